// CPU tests of common/timeline.h: the SVG Gantt chart of lesson 05.
#include <cstddef>
#include <string>
#include "catch_shim.hpp"
#include "common/timeline.h"

static size_t count_of(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
}

TEST_CASE("timeline: tick spacing is 1, 2 or 5 times a power of ten", "[timeline]") {
    CHECK(lesson::Timeline::nice_tick(10.0) == Approx(1.0));
    CHECK(lesson::Timeline::nice_tick(20.0) == Approx(2.0));
    CHECK(lesson::Timeline::nice_tick(23.4) == Approx(5.0));
    CHECK(lesson::Timeline::nice_tick(0.37) == Approx(0.05));
    CHECK(lesson::Timeline::nice_tick(95.0) == Approx(10.0));
}

TEST_CASE("timeline: one rect with a tooltip per bar, a band per plain row", "[timeline]") {
    lesson::Timeline t("two <streams> & more");
    t.add_row("1 stream", true);
    int h2d = t.add_row("stream 0 H2D");
    int k = t.add_row("stream 0 kernel");
    t.add_bar(h2d, 0.0, 1.5, "#4e79a7", "chunk 0 H2D");
    t.add_bar(k, 1.5, 1.6, "#59a14f", "chunk 0 kernel");
    t.add_bar(7, 0.0, 1.0, "red", "no such row");   // ignored
    t.add_bar(-1, 0.0, 1.0, "red", "no such row");  // ignored
    t.add_legend("#4e79a7", "H2D");
    CHECK(t.rows() == 3);
    CHECK(t.bars() == 2);
    const std::string svg = t.svg();
    CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
    CHECK(svg.size() >= 7);
    CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
    CHECK(count_of(svg, "<title>") == 2);
    CHECK(count_of(svg, "fill=\"#f3f3f3\"") == 2);  // heading rows get no band
    CHECK(svg.find("two &lt;streams&gt; &amp; more") != std::string::npos);
    CHECK(svg.find("<streams>") == std::string::npos);
    CHECK(count_of(svg, "</rect>") == 2);  // bars only; bands and legend boxes are self-closed
}

TEST_CASE("timeline: the longest bar ends at the right edge of the plot", "[timeline]") {
    lesson::Timeline t("scale");
    int r = t.add_row("row");
    t.add_bar(r, 0.0, 10.0, "blue");
    const std::string svg = t.svg(1200);  // plot from x = 190 to 1170
    CHECK(svg.find("<rect x=\"190\" y=\"49\" width=\"980\"") != std::string::npos);
}
