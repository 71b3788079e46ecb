// common/report.h - the one report printer: human-readable text ending with
// the RESULT line, and (with --json) the same facts as one JSON object.
// Host-only, no CUDA.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace lesson {

// One verification step: what was checked and how far it was from the reference.
struct Check {
    std::string what;           // e.g. "every element of C (1024 x 1024)"
    uint64_t checked = 0;       // elements compared
    double rel_l2 = NAN;        // ||gpu - ref|| / ||ref||
    double max_abs = NAN;       // max |gpu - ref|
    int64_t first_bad = -1;     // first index outside tolerance, -1 if none
    uint64_t bad_count = 0;
    double tol = 0;             // tolerance on rel_l2 (and per element, see verify/compare.h)
    bool pass = false;
};

// One timed variant: a rung of a ladder, a pipeline configuration...
struct Variant {
    std::string name;
    double ms = NAN;            // median time
    double rate = NAN;          // in `unit`
    std::string unit;           // "GB/s", "GFLOP/s", ...
    double fraction = NAN;      // of `ceiling_name`, NaN if not applicable
    std::string ceiling_name;
};

class Report {
public:
    explicit Report(std::string lesson) : lesson_(std::move(lesson)) {}

    void device(const std::string& name, int cc_major, int cc_minor, int sms, double mem_gb) {
        device_ = name;
        cc_ = std::to_string(cc_major) + "." + std::to_string(cc_minor);
        sms_ = sms;
        mem_gb_ = mem_gb;
    }
    void config(const std::string& key, const std::string& value) { config_.push_back({key, quote(value)}); }
    void config(const std::string& key, int64_t value) { config_.push_back({key, std::to_string(value)}); }
    void config(const std::string& key, double value) { config_.push_back({key, num(value)}); }

    // A ceiling measured in this run ("D2D cudaMemcpy", 3500, "GB/s").
    void ceiling(const std::string& name, double value, const std::string& unit) {
        ceilings_.push_back({name, value, unit});
    }
    void variant(const Variant& v) { variants_.push_back(v); }
    // Convenience: rate and fraction of a named ceiling, computed here.
    void variant(const std::string& name, double ms, double rate, const std::string& unit,
                 double ceiling_value = NAN, const std::string& ceiling_name = "") {
        Variant v{name, ms, rate, unit, ceiling_value > 0 ? rate / ceiling_value : NAN, ceiling_name};
        variants_.push_back(v);
    }
    // Any other measured number worth a line (and a JSON field).
    void metric(const std::string& name, double value, const std::string& unit) {
        metrics_.push_back({name, value, unit});
    }
    void cpu_reference_ms(double ms) { cpu_ms_ = ms; }
    void check(const Check& c) { checks_.push_back(c); }
    void note(const std::string& text) { notes_.push_back(text); }
    // The one-line key result that scripts/run_all.sh puts in its table.
    void key_result(const std::string& metric, double fraction, const std::string& of_what) {
        key_metric_ = metric;
        key_fraction_ = fraction;
        key_of_ = of_what;
    }

    bool passed() const {
        if (checks_.empty()) return false;  // nothing verified is not a PASS
        for (const Check& c : checks_)
            if (!c.pass) return false;
        return true;
    }

    // Prints the report and the RESULT line, writes JSON if asked; returns the exit code.
    int finish(const std::string& json_path) {
        bool ok = passed();
        std::printf("\n== %s ==\n", lesson_.c_str());
        if (!device_.empty())
            std::printf("device: %s (cc %s, %d SMs, %.1f GB)\n", device_.c_str(), cc_.c_str(), sms_, mem_gb_);
        if (!config_.empty()) {
            std::printf("config:");
            for (auto& kv : config_) std::printf(" %s=%s", kv.first.c_str(), unquote(kv.second).c_str());
            std::printf("\n");
        }
        for (auto& c : ceilings_)
            std::printf("ceiling (measured now): %-34s %10.1f %s\n", c.name.c_str(), c.value, c.unit.c_str());
        if (!variants_.empty()) {
            std::printf("%-50s %11s %12s %-8s %s\n", "variant", "ms", "rate", "unit", "of ceiling");
            for (auto& v : variants_) {
                std::printf("%-50s %11.4f %12.1f %-8s", v.name.c_str(), v.ms, v.rate, v.unit.c_str());
                if (std::isfinite(v.fraction)) std::printf(" %5.1f%% of %s", 100.0 * v.fraction, v.ceiling_name.c_str());
                std::printf("\n");
            }
        }
        for (auto& m : metrics_) std::printf("%-50s %12.4g %s\n", m.name.c_str(), m.value, m.unit.c_str());
        if (std::isfinite(cpu_ms_)) std::printf("single-threaded CPU reference: %.1f ms\n", cpu_ms_);
        for (auto& c : checks_) {
            std::printf("check: %s: %llu elements, rel-L2 error %.3e, max abs error %.3e, tolerance %.1e -> %s",
                        c.what.c_str(), (unsigned long long)c.checked, c.rel_l2, c.max_abs, c.tol,
                        c.pass ? "ok" : "FAILED");
            if (c.first_bad >= 0)
                std::printf(" (%llu bad, first at index %lld)", (unsigned long long)c.bad_count, (long long)c.first_bad);
            std::printf("\n");
        }
        for (auto& n : notes_) std::printf("note: %s\n", n.c_str());
        if (!key_metric_.empty()) {
            std::printf("Key result: %s", key_metric_.c_str());
            if (std::isfinite(key_fraction_)) std::printf(" | %.1f%% of %s", 100.0 * key_fraction_, key_of_.c_str());
            std::printf("\n");
        }
        if (!json_path.empty() && !write_json(json_path, ok)) {
            std::printf("RESULT: FAIL (could not write --json file %s)\n", json_path.c_str());
            return 1;
        }
        if (ok) std::printf("RESULT: PASS\n");
        else std::printf("RESULT: FAIL (%s)\n", checks_.empty() ? "nothing was verified" : first_failure().c_str());
        std::fflush(stdout);
        return ok ? 0 : 1;
    }

    std::string json(bool ok) const {
        std::string j = "{\"lesson\":" + quote(lesson_);
        j += ",\"result\":" + quote(ok ? "PASS" : "FAIL");
        j += ",\"device\":{\"name\":" + quote(device_) + ",\"cc\":" + quote(cc_) + ",\"sms\":" + std::to_string(sms_) +
             ",\"memory_gb\":" + num(mem_gb_) + "}";
        j += ",\"config\":{";
        for (size_t i = 0; i < config_.size(); ++i)
            j += (i ? "," : "") + quote(config_[i].first) + ":" + config_[i].second;
        j += "},\"ceilings\":[";
        for (size_t i = 0; i < ceilings_.size(); ++i)
            j += std::string(i ? "," : "") + "{\"name\":" + quote(ceilings_[i].name) + ",\"value\":" +
                 num(ceilings_[i].value) + ",\"unit\":" + quote(ceilings_[i].unit) + "}";
        j += "],\"variants\":[";
        for (size_t i = 0; i < variants_.size(); ++i) {
            const Variant& v = variants_[i];
            j += std::string(i ? "," : "") + "{\"name\":" + quote(v.name) + ",\"ms\":" + num(v.ms) +
                 ",\"rate\":" + num(v.rate) + ",\"unit\":" + quote(v.unit) + ",\"fraction_of_ceiling\":" +
                 num(v.fraction) + ",\"ceiling\":" + quote(v.ceiling_name) + "}";
        }
        j += "],\"metrics\":[";
        for (size_t i = 0; i < metrics_.size(); ++i)
            j += std::string(i ? "," : "") + "{\"name\":" + quote(metrics_[i].name) + ",\"value\":" +
                 num(metrics_[i].value) + ",\"unit\":" + quote(metrics_[i].unit) + "}";
        j += "],\"cpu_reference_ms\":" + num(cpu_ms_);
        j += ",\"verification\":{\"pass\":" + std::string(ok ? "true" : "false") + ",\"checks\":[";
        for (size_t i = 0; i < checks_.size(); ++i) {
            const Check& c = checks_[i];
            j += std::string(i ? "," : "") + "{\"what\":" + quote(c.what) + ",\"checked\":" + std::to_string(c.checked) +
                 ",\"rel_l2_error\":" + num(c.rel_l2) + ",\"max_abs_error\":" + num(c.max_abs) +
                 ",\"first_bad_index\":" + std::to_string(c.first_bad) + ",\"bad_count\":" +
                 std::to_string(c.bad_count) + ",\"tolerance\":" + num(c.tol) + ",\"pass\":" +
                 (c.pass ? "true" : "false") + "}";
        }
        j += "]},\"key_result\":{\"metric\":" + quote(key_metric_) + ",\"fraction\":" + num(key_fraction_) +
             ",\"of\":" + quote(key_of_) + "},\"notes\":[";
        for (size_t i = 0; i < notes_.size(); ++i) j += std::string(i ? "," : "") + quote(notes_[i]);
        j += "]}";
        return j;
    }

    static std::string quote(const std::string& s) {
        std::string q = "\"";
        for (char ch : s) {
            unsigned char c = static_cast<unsigned char>(ch);
            if (c == '"') q += "\\\"";
            else if (c == '\\') q += "\\\\";
            else if (c == '\n') q += "\\n";
            else if (c == '\t') q += "\\t";
            else if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                q += buf;
            } else q += ch;
        }
        return q + "\"";
    }
    static std::string num(double v) {  // JSON has no NaN/Inf: they become null
        if (!std::isfinite(v)) return "null";
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6g", v);
        return buf;
    }

private:
    struct Named {
        std::string name;
        double value;
        std::string unit;
    };
    static std::string unquote(const std::string& s) {
        return (s.size() >= 2 && s.front() == '"') ? s.substr(1, s.size() - 2) : s;
    }
    std::string first_failure() const {
        for (const Check& c : checks_)
            if (!c.pass) {
                char buf[96];
                std::snprintf(buf, sizeof buf, ": rel-L2 %.3e, %llu bad elements, first at %lld", c.rel_l2,
                              (unsigned long long)c.bad_count, (long long)c.first_bad);
                return c.what + buf;
            }
        return "";
    }
    bool write_json(const std::string& path, bool ok) const {
        FILE* f = std::fopen(path.c_str(), "w");
        if (!f) return false;
        std::string j = json(ok) + "\n";
        bool good = std::fwrite(j.data(), 1, j.size(), f) == j.size();
        return (std::fclose(f) == 0) && good;
    }

    std::string lesson_, device_, cc_;
    int sms_ = 0;
    double mem_gb_ = 0;
    std::vector<std::pair<std::string, std::string>> config_;
    std::vector<Named> ceilings_, metrics_;
    std::vector<Variant> variants_;
    std::vector<Check> checks_;
    std::vector<std::string> notes_;
    double cpu_ms_ = NAN;
    std::string key_metric_, key_of_;
    double key_fraction_ = NAN;
};

}  // namespace lesson
