// common/timeline.h - a Gantt chart of timed intervals, written as plain SVG
// text (host-only, no CUDA, no dependency). A lesson records CUDA events
// around its copies and kernels, turns them into milliseconds, adds one bar
// per interval to a row (one row per stream and engine), and writes the file.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace lesson {

class Timeline {
public:
    explicit Timeline(std::string title) : title_(std::move(title)) {}

    // Rows are drawn top to bottom in the order they are added; returns the row's index.
    // A heading row holds no bars; it labels the group of rows below it.
    int add_row(const std::string& label, bool heading = false) {
        rows_.push_back({label, heading});
        return static_cast<int>(rows_.size()) - 1;
    }
    // One interval [t0_ms, t1_ms] on `row`, filled with `color` (any SVG color);
    // `tip` shows when the mouse rests on the bar.
    void add_bar(int row, double t0_ms, double t1_ms, const std::string& color, const std::string& tip = "") {
        if (row < 0 || row >= static_cast<int>(rows_.size())) return;
        bars_.push_back({row, t0_ms, std::max(t0_ms, t1_ms), color, tip});
    }
    void add_legend(const std::string& color, const std::string& label) { legend_.push_back({label, color}); }

    size_t rows() const { return rows_.size(); }
    size_t bars() const { return bars_.size(); }

    // The whole chart as SVG text; every bar on one shared time axis starting at 0 ms.
    std::string svg(int width = 1200) const {
        const int label_w = 190, right = 30, top = 46, row_h = 18, axis_h = 40;
        const int legend_h = legend_.empty() ? 0 : 24;
        const int plot_w = std::max(100, width - label_w - right);
        const int height = top + static_cast<int>(rows_.size()) * row_h + axis_h + legend_h;
        double t_max = 0;
        for (const Bar& b : bars_) t_max = std::max(t_max, b.t1);
        const double tick = nice_tick(t_max > 0 ? t_max : 1.0);
        const double span = (t_max > 0 ? std::ceil(t_max / tick) : 1.0) * tick;
        auto x_of = [&](double t) { return label_w + plot_w * (t / span); };

        std::string s;
        s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
             std::to_string(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
        s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
        s += "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" + escape(title_) + "</text>\n";
        // Rows: a label on the left, a light band behind the bars.
        for (size_t r = 0; r < rows_.size(); ++r) {
            const int y = top + static_cast<int>(r) * row_h;
            if (rows_[r].heading) {
                s += "<text x=\"10\" y=\"" + std::to_string(y + 13) + "\" font-weight=\"bold\">" +
                     escape(rows_[r].label) + "</text>\n";
                continue;
            }
            s += "<rect x=\"" + std::to_string(label_w) + "\" y=\"" + std::to_string(y + 1) + "\" width=\"" +
                 std::to_string(plot_w) + "\" height=\"" + std::to_string(row_h - 2) + "\" fill=\"#f3f3f3\"/>\n";
            s += "<text x=\"" + std::to_string(label_w - 8) + "\" y=\"" + std::to_string(y + 13) +
                 "\" text-anchor=\"end\">" + escape(rows_[r].label) + "</text>\n";
        }
        // Time axis: vertical grid lines at round numbers of milliseconds.
        const int axis_y = top + static_cast<int>(rows_.size()) * row_h;
        for (double t = 0; t <= span + tick * 1e-6; t += tick) {
            const std::string x = fmt(x_of(t));
            s += "<line x1=\"" + x + "\" y1=\"" + std::to_string(top) + "\" x2=\"" + x + "\" y2=\"" +
                 std::to_string(axis_y + 4) + "\" stroke=\"#cccccc\" stroke-width=\"1\"/>\n";
            s += "<text x=\"" + x + "\" y=\"" + std::to_string(axis_y + 18) + "\" text-anchor=\"middle\">" + fmt(t) +
                 "</text>\n";
        }
        s += "<text x=\"" + fmt(label_w + plot_w / 2.0) + "\" y=\"" + std::to_string(axis_y + 34) +
             "\" text-anchor=\"middle\">time (ms)</text>\n";
        // Bars, each with a tooltip.
        for (const Bar& b : bars_) {
            const int y = top + b.row * row_h;
            const double x0 = x_of(b.t0), w = std::max(0.5, x_of(b.t1) - x0);
            s += "<rect x=\"" + fmt(x0) + "\" y=\"" + std::to_string(y + 3) + "\" width=\"" + fmt(w) + "\" height=\"" +
                 std::to_string(row_h - 6) + "\" fill=\"" + escape(b.color) + "\"" +
                 (w > 2 ? " stroke=\"white\" stroke-width=\"0.3\"" : "") + ">";  // thin bars stay visible
            if (!b.tip.empty()) s += "<title>" + escape(b.tip) + "</title>";
            s += "</rect>\n";
        }
        // Legend under the axis.
        double lx = label_w;
        const int ly = axis_y + axis_h;
        for (const Legend& l : legend_) {
            s += "<rect x=\"" + fmt(lx) + "\" y=\"" + std::to_string(ly + 4) + "\" width=\"14\" height=\"12\" fill=\"" +
                 escape(l.color) + "\"/>\n";
            s += "<text x=\"" + fmt(lx + 20) + "\" y=\"" + std::to_string(ly + 15) + "\">" + escape(l.label) +
                 "</text>\n";
            lx += 40 + 7.0 * static_cast<double>(l.label.size());
        }
        s += "</svg>\n";
        return s;
    }

    // Writes svg() to an open file; false when the write fails.
    bool write(std::FILE* f, int width = 1200) const {
        if (!f) return false;
        const std::string text = svg(width);
        return std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
    }

    // The tick spacing: 1, 2 or 5 times a power of ten, giving about 10 ticks over t_max.
    static double nice_tick(double t_max) {
        const double raw = t_max / 10.0;
        const double p = std::pow(10.0, std::floor(std::log10(raw)));
        for (double m : {1.0, 2.0, 5.0})
            if (m * p >= raw) return m * p;
        return 10.0 * p;
    }

    // Text safe inside SVG elements and attribute values (also used by lesson 17's roofline plot).
    static std::string escape(const std::string& t) {
        std::string e;
        for (char c : t) {
            switch (c) {
                case '&': e += "&amp;"; break;
                case '<': e += "&lt;"; break;
                case '>': e += "&gt;"; break;
                case '"': e += "&quot;"; break;
                default: e += c;
            }
        }
        return e;
    }

private:
    struct Row {
        std::string label;
        bool heading = false;
    };
    struct Legend {
        std::string label, color;
    };
    struct Bar {
        int row;
        double t0, t1;
        std::string color, tip;
    };
    static std::string fmt(double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4g", v);
        return buf;
    }

    std::string title_;
    std::vector<Row> rows_;
    std::vector<Bar> bars_;
    std::vector<Legend> legend_;
};

}  // namespace lesson
