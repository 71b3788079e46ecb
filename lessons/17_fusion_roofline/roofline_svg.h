// Lesson 17 - fusion and the roofline: the roofline picture, written as plain SVG text
// (host-only, no CUDA, no dependency; the style of common/timeline.h).
//
// Log-log axes: arithmetic intensity (flop/byte) across, GFLOP/s up. A memory roof is a
// line of slope 1 (GFLOP/s = intensity x GB/s), a compute roof a horizontal line; solid
// lines are measured roofs, dashed ones bounds. A measured memory roof ends where it meets
// the highest measured compute roof (the ridge point), and that roof starts there.
// Every point is a <circle class="point"> with a tooltip. scripts/roofline.sh draws the
// same picture from the JSON reports of every lesson.
// Used by: lessons/17_fusion_roofline/summary.cuh (--svg=FILE).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/timeline.h"  // lesson::Timeline::escape

class RooflinePlot {
public:
    explicit RooflinePlot(std::string title) : title_(std::move(title)) {}

    // A compute roof at `gflops`, or a memory roof of `gbps` (GB/s: GFLOP/s = I x GB/s).
    void add_roof(double gflops, const std::string& color, bool dashed, const std::string& label) {
        if (gflops > 0 && std::isfinite(gflops)) roofs_.push_back({gflops, color, dashed, label});
    }
    void add_slope(double gbps, const std::string& color, bool dashed, const std::string& label) {
        if (gbps > 0 && std::isfinite(gbps)) slopes_.push_back({gbps, color, dashed, label});
    }
    // One measured kernel: its intensity (flop/byte) and GFLOP/s; not drawn unless both are > 0.
    void add_point(double intensity, double gflops, const std::string& color, const std::string& tip) {
        if (intensity > 0 && gflops > 0 && std::isfinite(intensity) && std::isfinite(gflops))
            points_.push_back({intensity, gflops, color, tip});
    }
    void add_legend(const std::string& color, const std::string& label) { legend_.push_back({color, label}); }

    size_t points() const { return points_.size(); }
    size_t lines() const { return roofs_.size() + slopes_.size(); }

    std::string svg(int width = 960, int height = 640) const {
        const double left = 80, right = 30, top = 50;
        const double legend_h = 18.0 * double(roofs_.size() + slopes_.size() + legend_.size()) + 10;
        const double bottom = 50 + legend_h;
        const double pw = std::max(100.0, width - left - right), ph = std::max(100.0, height - top - bottom);
        // Axis ranges: whole decades around every point, roof and ridge.
        double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
        auto see_x = [&](double v) { x_lo = std::min(x_lo, v), x_hi = std::max(x_hi, v); };
        auto see_y = [&](double v) { y_lo = std::min(y_lo, v), y_hi = std::max(y_hi, v); };
        for (const Point& p : points_) see_x(p.x), see_y(p.y);
        for (const Line& r : roofs_) {
            see_y(r.value);
            for (const Line& s : slopes_) see_x(r.value / s.value);  // the ridge points
        }
        if (!(x_lo < INFINITY)) x_lo = 0.01, x_hi = 1000;
        x_lo = std::pow(10.0, std::floor(std::log10(x_lo))), x_hi = std::pow(10.0, std::ceil(std::log10(x_hi)));
        if (x_hi <= x_lo) x_hi = x_lo * 10;
        for (const Line& s : slopes_) see_y(s.value * x_lo);
        if (!(y_lo < INFINITY)) y_lo = 1, y_hi = 1e5;
        y_lo = std::pow(10.0, std::floor(std::log10(y_lo))), y_hi = std::pow(10.0, std::ceil(std::log10(y_hi)));
        if (y_hi <= y_lo) y_hi = y_lo * 10;
        y_lo = std::max(y_lo, y_hi / 1e8);  // at most 8 decades up
        const double lx0 = std::log10(x_lo), lx1 = std::log10(x_hi), ly0 = std::log10(y_lo), ly1 = std::log10(y_hi);
        auto X = [&](double v) { return left + pw * (std::log10(v) - lx0) / (lx1 - lx0); };
        auto Y = [&](double v) { return top + ph * (1.0 - (std::log10(v) - ly0) / (ly1 - ly0)); };

        std::string s;
        s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
             std::to_string(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
        s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
        s += "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" + escape(title_) + "</text>\n";
        s += "<rect x=\"" + fmt(left) + "\" y=\"" + fmt(top) + "\" width=\"" + fmt(pw) + "\" height=\"" + fmt(ph) +
             "\" fill=\"#fafafa\" stroke=\"#888888\"/>\n";
        // Decade grid lines and labels.
        for (double e = lx0; e <= lx1 + 1e-9; e += 1.0) {
            const std::string x = fmt(X(std::pow(10.0, e)));
            s += "<line x1=\"" + x + "\" y1=\"" + fmt(top) + "\" x2=\"" + x + "\" y2=\"" + fmt(top + ph) +
                 "\" stroke=\"#dddddd\"/>\n";
            s += "<text x=\"" + x + "\" y=\"" + fmt(top + ph + 16) + "\" text-anchor=\"middle\">" +
                 fmt(std::pow(10.0, e)) + "</text>\n";
        }
        for (double e = ly0; e <= ly1 + 1e-9; e += 1.0) {
            const std::string y = fmt(Y(std::pow(10.0, e)));
            s += "<line x1=\"" + fmt(left) + "\" y1=\"" + y + "\" x2=\"" + fmt(left + pw) + "\" y2=\"" + y +
                 "\" stroke=\"#dddddd\"/>\n";
            s += "<text x=\"" + fmt(left - 6) + "\" y=\"" + y + "\" text-anchor=\"end\" dy=\"4\">" +
                 fmt(std::pow(10.0, e)) + "</text>\n";
        }
        s += "<text x=\"" + fmt(left + pw / 2) + "\" y=\"" + fmt(top + ph + 36) +
             "\" text-anchor=\"middle\">arithmetic intensity (flop/byte)</text>\n";
        s += "<text x=\"18\" y=\"" + fmt(top + ph / 2) + "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " +
             fmt(top + ph / 2) + ")\">GFLOP/s</text>\n";
        // Roofs: a measured memory roof stops at the highest measured compute roof, which starts there.
        double solid_roof = 0, solid_slope = 0;
        for (const Line& r : roofs_)
            if (!r.dashed) solid_roof = std::max(solid_roof, r.value);
        for (const Line& l : slopes_)
            if (!l.dashed) solid_slope = std::max(solid_slope, l.value);
        for (const Line& r : roofs_) {
            const double x0 = (!r.dashed && solid_slope > 0) ? std::max(x_lo, r.value / solid_slope) : x_lo;
            if (r.value < y_lo || r.value > y_hi || x0 >= x_hi) continue;
            s += line(X(x0), Y(r.value), X(x_hi), Y(r.value), r);
        }
        for (const Line& l : slopes_) {
            const double top_value = (!l.dashed && solid_roof > 0) ? std::min(solid_roof, y_hi) : y_hi;
            const double x0 = std::max(x_lo, y_lo / l.value), x1 = std::min(x_hi, top_value / l.value);
            if (x1 <= x0) continue;
            s += line(X(x0), Y(l.value * x0), X(x1), Y(l.value * x1), l);
        }
        // Points, with their tooltips.
        for (const Point& p : points_) {
            if (p.x < x_lo || p.x > x_hi || p.y < y_lo || p.y > y_hi) continue;
            s += "<circle class=\"point\" cx=\"" + fmt(X(p.x)) + "\" cy=\"" + fmt(Y(p.y)) + "\" r=\"4.5\" fill=\"" +
                 escape(p.color) + "\" stroke=\"black\" stroke-width=\"0.5\"><title>" + escape(p.tip) +
                 "</title></circle>\n";
        }
        // Legend under the axis: every line, then the point groups.
        double ly = top + ph + 56;
        for (const std::vector<Line>* group : {&slopes_, &roofs_})
            for (const Line& l : *group) {
                s += line(left, ly - 4, left + 28, ly - 4, l, "legend");
                char value[48];
                std::snprintf(value, sizeof value, group == &slopes_ ? " (%.0f GB/s)" : " (%.0f GFLOP/s)", l.value);
                s +=
                    "<text x=\"" + fmt(left + 36) + "\" y=\"" + fmt(ly) + "\">" + escape(l.label + value) + "</text>\n";
                ly += 18;
            }
        for (const Legend& g : legend_) {
            s += "<circle cx=\"" + fmt(left + 14) + "\" cy=\"" + fmt(ly - 4) + "\" r=\"4.5\" fill=\"" +
                 escape(g.color) + "\" stroke=\"black\" stroke-width=\"0.5\"/>\n";
            s += "<text x=\"" + fmt(left + 36) + "\" y=\"" + fmt(ly) + "\">" + escape(g.label) + "</text>\n";
            ly += 18;
        }
        s += "</svg>\n";
        return s;
    }

    // Writes svg() to an open file; false when the write fails.
    bool write(std::FILE* f) const {
        if (!f) return false;
        const std::string text = svg();
        return std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
    }

    // Text safe inside SVG elements and attribute values: the stream timeline's (common/timeline.h).
    static std::string escape(const std::string& t) { return lesson::Timeline::escape(t); }

private:
    struct Line {
        double value;
        std::string color;
        bool dashed;
        std::string label;
    };
    struct Point {
        double x, y;
        std::string color, tip;
    };
    struct Legend {
        std::string color, label;
    };
    static std::string fmt(double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6g", v);
        return buf;
    }
    static std::string line(double x0, double y0, double x1, double y1, const Line& l, const char* cls = "roof") {
        return "<line class=\"" + std::string(cls) + "\" x1=\"" + fmt(x0) + "\" y1=\"" + fmt(y0) + "\" x2=\"" +
               fmt(x1) + "\" y2=\"" + fmt(y1) + "\" stroke=\"" + escape(l.color) + "\" stroke-width=\"2\"" +
               (l.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>\n";
    }

    std::string title_;
    std::vector<Line> roofs_, slopes_;
    std::vector<Point> points_;
    std::vector<Legend> legend_;
};
