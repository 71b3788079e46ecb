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

#include "common/flags.h"
#include "common/gpu_class.h"
#include "common/phases.h"

namespace lesson {

namespace detail {
// Which per-clock rate each peak of this run was computed from (common/ceilings.h adds them;
// every report prints them as notes).
inline std::vector<std::string>& peak_rate_notes() {
    static std::vector<std::string> notes;
    return notes;
}
}  // namespace detail

// One verification step: what was checked and how far it was from the reference.
struct Check {
    std::string what;        // e.g. "every element of C (1024 x 1024)"
    uint64_t checked = 0;    // elements compared
    double rel_l2 = NAN;     // ||gpu - ref|| / ||ref||
    double max_abs = NAN;    // max |gpu - ref|
    int64_t first_bad = -1;  // first index outside tolerance, -1 if none
    uint64_t bad_count = 0;
    double tol = 0;  // tolerance on rel_l2 (and per element, see verify/compare.h)
    bool pass = false;
};

// What a timed variant is measured against.
//  - Bound: the rate a correct kernel should not beat. Printed as "97.1% of <bound>".
//    Only the peaks computed from the clocks are strict; the DRAM and PCIe bounds are
//    measured ceilings (the best probe burst), which a better access pattern or a slow
//    probe run can beat. A result above 100% adds a WARNING: the time or the probe is
//    wrong (docs/measuring.md, "Bounds and yardsticks").
//  - Yardstick: a reference to compare with (cuBLAS or CUB on the same problem,
//    a copy with another read/write mix). Printed as "1.02x <yardstick>".
enum class Against { Nothing, Bound, Yardstick };

// Which line of the roofline a bound or metric is, for scripts/roofline.py: a memory roof (GB/s,
// the slope) or a compute roof (GFLOP/s or TFLOP/s, the flat top). A bound is drawn dashed, a
// metric (a rate the run's own kernels reached) solid. Most bounds and metrics are no roof.
enum class Roof { None, Memory, Compute };

// One timed variant: a rung of a ladder, a pipeline configuration...
struct Variant {
    std::string name;
    double ms = NAN;    // median time
    double rate = NAN;  // in `unit`
    std::string unit;   // "GB/s", "GFLOP/s", ...
    Against against = Against::Nothing;
    std::string ref_name;    // the bound or yardstick
    double ref_value = NAN;  // its rate, in `unit`
    double fraction = NAN;   // rate / ref_value
    std::string ungraded;    // why it is not compared (e.g. "data fit in L2"); empty if it is
};

// One benchmark target (docs/lesson-contract.md section 8): graded at the
// lesson's default size only.
struct Target {
    std::string name;  // e.g. "vectorAdd4 vs DRAM bound"
    double value = NAN;
    double minimum = NAN;
    std::string unit;                              // "%" (value is a fraction, printed as a percentage) or "x"
    bool met() const { return value >= minimum; }  // NaN is never met
};

class Report {
public:
    explicit Report(std::string lesson) : lesson_(std::move(lesson)) {}

    void device(const std::string& name, int cc_major, int cc_minor, int sms, double mem_gb) {
        device_ = name;
        cc_ = std::to_string(cc_major) + "." + std::to_string(cc_minor);
        if (const GpuClass* e = gpu_limits().emulated) {  // the GPU's own cc; the class it stands in for beside it
            cc_ = cc_text(gpu_limits().real_cc);
            emulating_ = e->name;
        }
        sms_ = sms;
        mem_gb_ = mem_gb;
    }
    // The device as the runtime describes it (a cudaDeviceProp; a template keeps this header free
    // of CUDA's).
    template <class Prop>
    void device(const Prop& prop) {
        device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    }
    // A setting of the run; a key given again replaces its value.
    void config(const std::string& key, const std::string& value) { set_config(key, quote(value)); }
    void config(const std::string& key, int64_t value) { set_config(key, std::to_string(value)); }
    void config(const std::string& key, double value) { set_config(key, num(value)); }
    // Every flag of the command line as it was parsed (its name with '_' for '-'), output paths
    // aside; a lesson adds with config() only what it derives (a size in MB, the shapes it checks).
    void config_from(const Cli& cli) {
        for (const Cli::Value& v : cli.values()) {
            std::string key = v.name;
            for (char& ch : key)
                if (ch == '-') ch = '_';
            set_config(key, v.text ? quote(v.json) : v.json);
        }
    }

    // A bound measured (or computed from the clock) in this run: ("PCIe H2D, burst of 64 MB copies", 55.1, "GB/s").
    void bound(const std::string& name, double value, const std::string& unit, Roof roof = Roof::None) {
        bounds_.push_back({name, value, unit, roof});
    }
    // A yardstick measured in this run: ("cuBLAS SGEMM fp32, same shape", 51000, "GFLOP/s").
    void yardstick(const std::string& name, double value, const std::string& unit) {
        yardsticks_.push_back({name, value, unit});
    }
    // A timed variant with no bound or yardstick beside it.
    void variant(const std::string& name, double ms, double rate, const std::string& unit) {
        variants_.push_back(Variant{name, ms, rate, unit});
    }
    // A timed variant against a bound. `ungraded` non-empty (e.g. lesson::l2_note)
    // says why the bound does not apply at this size: then no fraction is printed.
    void variant_bound(const std::string& name, double ms, double rate, const std::string& unit, double bound_value,
                       const std::string& bound_name, const std::string& ungraded = "") {
        add_compared(name, ms, rate, unit, Against::Bound, bound_value, bound_name, ungraded);
    }
    // A timed variant against a yardstick ("1.02x cuBLAS").
    void variant_yardstick(const std::string& name, double ms, double rate, const std::string& unit, double yard_value,
                           const std::string& yard_name, const std::string& ungraded = "") {
        add_compared(name, ms, rate, unit, Against::Yardstick, yard_value, yard_name, ungraded);
    }
    // A WARNING line: something in the measurement cannot be trusted.
    void warning(const std::string& text) {
        for (const std::string& w : warnings_)
            if (w == text) return;
        warnings_.push_back(text);
    }
    // A benchmark target (fraction as "%" or a ratio as "x"), graded at the default size only.
    void target(const std::string& name, double value, double minimum, const std::string& unit = "%") {
        targets_.push_back({name, value, minimum, unit});
    }
    // Whether this run is at the lesson's default size (Cli::at_default_size()).
    void default_size(bool yes) { default_size_ = yes; }
    // How the times were taken (printed once, and in the JSON).
    void timing(const std::string& how) { timing_ = how; }
    // Any other measured number worth a line (and a JSON field); a roof of the roofline if `roof` says so.
    void metric(const std::string& name, double value, const std::string& unit, Roof roof = Roof::None) {
        metrics_.push_back({name, value, unit, roof});
    }
    // The work a kernel did: floating-point operations and DRAM bytes it must move, and its
    // median time. Written to the JSON as a roofline point (arithmetic intensity = flops / bytes,
    // attained GFLOP/s and GB/s), which scripts/roofline.py draws on this GPU's measured roofline.
    void work(const std::string& name, double flops, double bytes, double ms) {
        work_.push_back({name, flops, bytes, ms});
    }
    // Time of the CPU reference, and how many host threads computed it.
    void cpu_reference_ms(double ms, int threads = 1) {
        cpu_ms_ = ms;
        cpu_threads_ = threads;
    }
    void check(const Check& c) { checks_.push_back(c); }
    void note(const std::string& text) { notes_.push_back(text); }
    // The one-line key result that scripts/run_all.sh puts in its table: the
    // metric, and where it stands against a bound or a yardstick (or why it is
    // not compared at this size, in `ungraded`).
    void key_result(const std::string& metric, double fraction = NAN, const std::string& of_what = "",
                    Against against = Against::Nothing, const std::string& ungraded = "") {
        key_metric_ = metric;
        key_fraction_ = fraction;
        key_of_ = of_what;
        key_against_ = against;
        key_ungraded_ = ungraded;
        if (against == Against::Bound && ungraded.empty() && fraction > 1.0) warn_above(metric, fraction, of_what);
    }

    bool passed() const {
        if (checks_.empty()) return false;  // nothing verified is not a PASS
        for (const Check& c : checks_)
            if (!c.pass) return false;
        return true;
    }

    // Prints the report and the RESULT line, writes JSON if asked; returns the exit code.
    int finish(const std::string& json_path) {
        const Phase phase("report finish");
        bool ok = passed();
        std::printf("\n== %s ==\n", lesson_.c_str());
        if (!device_.empty())
            std::printf("device: %s (cc %s, %d SMs, %.1f GB)%s\n", device_.c_str(), cc_.c_str(), sms_, mem_gb_,
                        emulating_.empty() ? "" : (", emulating " + emulating_ + " (LESSON_GPU_LIMITS)").c_str());
        if (!config_.empty()) {
            std::printf("config:");
            for (auto& kv : config_) std::printf(" %s=%s", kv.first.c_str(), unquote(kv.second).c_str());
            std::printf("\n");
        }
        for (auto& c : bounds_)
            std::printf("bound (measured now):     %-48s %10.1f %s\n", c.name.c_str(), c.value, c.unit.c_str());
        for (auto& c : yardsticks_)
            std::printf("yardstick (measured now): %-48s %10.1f %s\n", c.name.c_str(), c.value, c.unit.c_str());
        if (!timing_.empty()) std::printf("timing: %s\n", timing_.c_str());
        if (!variants_.empty()) {
            std::printf("%-50s %11s %12s %-8s %s\n", "variant", "ms", "rate", "unit", "against");
            for (auto& v : variants_) {
                std::printf("%-50s %11.4f %12.1f %-8s %s\n", v.name.c_str(), v.ms, v.rate, v.unit.c_str(),
                            against_text(v.against, v.fraction, v.ref_name, v.ungraded).c_str());
            }
        }
        for (auto& m : metrics_) std::printf("%-50s %12.4g %s\n", m.name.c_str(), m.value, m.unit.c_str());
        if (std::isfinite(cpu_ms_))
            std::printf("CPU reference: %.1f ms on %d host thread%s\n", cpu_ms_, cpu_threads_,
                        cpu_threads_ == 1 ? "" : "s");
        for (auto& c : checks_) {
            std::printf("check: %s: %llu elements, rel-L2 error %.3e, max abs error %.3e, tolerance %.1e -> %s",
                        c.what.c_str(), (unsigned long long)c.checked, c.rel_l2, c.max_abs, c.tol,
                        c.pass ? "ok" : "FAILED");
            if (c.first_bad >= 0)
                std::printf(" (%llu bad, first at index %lld)", (unsigned long long)c.bad_count,
                            (long long)c.first_bad);
            std::printf("\n");
        }
        for (auto& n : notes_) std::printf("note: %s\n", n.c_str());
        for (auto& n : detail::peak_rate_notes()) std::printf("note: %s\n", n.c_str());
        for (auto& t : targets_) {
            std::printf("target: %s%s\n", target_text(t).c_str(),
                        !default_size_ ? ", not graded at this size" : (t.met() ? ", met" : ", MISSED"));
        }
        for (auto& w : warnings_) std::printf("WARNING: %s\n", w.c_str());
        if (!key_metric_.empty()) {
            std::string against = against_text(key_against_, key_fraction_, key_of_, key_ungraded_);
            std::printf("Key result: %s%s%s\n", key_metric_.c_str(), against.empty() ? "" : " | ", against.c_str());
        }
        if (!json_path.empty() && !write_json(json_path, ok)) {
            std::printf("RESULT: FAIL (could not write --json file %s)\n", json_path.c_str());
            return 1;
        }
        if (ok) std::printf("RESULT: PASS\n");
        else std::printf("RESULT: FAIL (%s)\n", fail_reason().c_str());
        std::fflush(stdout);
        return ok ? 0 : 1;
    }

    // Nothing the user selected can run on this GPU: prints the report so far (its notes say what
    // was skipped and why) and "RESULT: SKIP (<reason>)", writes the JSON with result SKIP if
    // asked; returns 77, the exit code CTest counts as a skip.
    int skip(const std::string& reason, const std::string& json_path) {
        std::printf("\n== %s ==\n", lesson_.c_str());
        if (!device_.empty())
            std::printf("device: %s (cc %s)%s\n", device_.c_str(), cc_.c_str(),
                        emulating_.empty() ? "" : (", emulating " + emulating_ + " (LESSON_GPU_LIMITS)").c_str());
        for (auto& n : notes_) std::printf("note: %s\n", n.c_str());
        skip_reason_ = reason;
        if (!json_path.empty() && !write_json(json_path, false)) {
            std::printf("RESULT: FAIL (could not write --json file %s)\n", json_path.c_str());
            return 1;
        }
        std::printf("RESULT: SKIP (%s)\n", reason.c_str());
        std::fflush(stdout);
        return 77;
    }

    // The report as one JSON object (docs/lesson-contract.md lists the fields). The texts the report
    // prints are written beside the numbers (`against_text`, a target's `text`, `fail_reason`), so a
    // script shows them without forming them again.
    std::string json(bool ok) const {
        const std::string result = !skip_reason_.empty() ? "SKIP" : ok ? "PASS" : "FAIL";
        std::string j = "{\"lesson\":" + quote(lesson_) + ",\"result\":" + quote(result);
        if (!skip_reason_.empty()) j += ",\"skip_reason\":" + quote(skip_reason_);
        if (result == "FAIL") j += ",\"fail_reason\":" + quote(fail_reason());
        j += ",\"device\":{\"name\":" + quote(device_) + ",\"cc\":" + quote(cc_) + ",\"sms\":" + std::to_string(sms_) +
             ",\"memory_gb\":" + num(mem_gb_) + ",\"emulating\":" + quote(emulating_) + "}";
        j += ",\"config\":{";
        for (size_t i = 0; i < config_.size(); ++i)
            j += (i ? "," : "") + quote(config_[i].first) + ":" + config_[i].second;
        j += "},\"default_size\":" + std::string(default_size_ ? "true" : "false");
        j += ",\"timing\":" + quote(timing_);
        j += ",\"bounds\":" + named_list(bounds_) + ",\"yardsticks\":" + named_list(yardsticks_);
        j += ",\"variants\":" + json_list(variants_, variant_json);
        j += ",\"metrics\":" + named_list(metrics_) + ",\"roofs\":" + roofs_json();
        j += ",\"cpu_reference_ms\":" + num(cpu_ms_) + ",\"cpu_reference_threads\":" + std::to_string(cpu_threads_);
        j += ",\"verification\":{\"pass\":" + std::string(ok ? "true" : "false") +
             ",\"checks\":" + json_list(checks_, check_json) + "}";
        j += ",\"key_result\":{\"metric\":" + quote(key_metric_) +
             ",\"fraction\":" + num(key_ungraded_.empty() ? key_fraction_ : NAN) + ",\"of\":" + quote(key_of_) +
             ",\"against\":" + quote(against_word(key_against_)) + ",\"ungraded\":" + quote(key_ungraded_) +
             ",\"against_text\":" + quote(against_text(key_against_, key_fraction_, key_of_, key_ungraded_)) + "}";
        j += ",\"targets\":" + json_list(targets_, target_json);
        j += ",\"work\":" + json_list(work_, work_json);
        std::vector<std::string> notes = notes_;
        notes.insert(notes.end(), detail::peak_rate_notes().begin(), detail::peak_rate_notes().end());
        j += ",\"warnings\":" + string_list(warnings_) + ",\"notes\":" + string_list(notes) + "}";
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

    // "97.1% of PCIe bound", "1.02x cuBLAS", "not graded: data fit in L2", or "".
    static std::string against_text(Against a, double fraction, const std::string& ref, const std::string& ungraded) {
        if (a == Against::Nothing) return "";
        if (!ungraded.empty()) return "not graded: " + ungraded;
        if (!std::isfinite(fraction)) return "";
        char buf[48];
        if (a == Against::Bound) std::snprintf(buf, sizeof buf, "%.1f%% of ", 100.0 * fraction);
        else std::snprintf(buf, sizeof buf, "%.2fx ", fraction);
        return buf + ref;
    }

private:
    struct Named {
        std::string name;
        double value;
        std::string unit;
        Roof roof = Roof::None;
    };
    struct Work {
        std::string name;
        double flops, bytes, ms;
    };
    static const char* against_word(Against a) {
        return a == Against::Bound ? "bound" : a == Against::Yardstick ? "yardstick" : "";
    }
    static std::string target_value(double v, const std::string& unit) {
        char buf[32];
        if (unit == "%") std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * v);
        else std::snprintf(buf, sizeof buf, "%.2f%s", v, unit.c_str());
        return buf;
    }
    // "vectorAdd4 vs DRAM bound: 95.0% (needs >= 90.0%)": the target line without its verdict.
    static std::string target_text(const Target& t) {
        return t.name + ": " + target_value(t.value, t.unit) + " (needs >= " + target_value(t.minimum, t.unit) + ")";
    }
    template <class T, class F>
    static std::string json_list(const std::vector<T>& list, F one) {
        std::string j = "[";
        for (size_t i = 0; i < list.size(); ++i) j += (i ? "," : "") + one(list[i]);
        return j + "]";
    }
    static std::string variant_json(const Variant& v) {
        return "{\"name\":" + quote(v.name) + ",\"ms\":" + num(v.ms) + ",\"rate\":" + num(v.rate) +
               ",\"unit\":" + quote(v.unit) + ",\"against\":" + quote(against_word(v.against)) +
               ",\"reference\":" + quote(v.ref_name) + ",\"reference_rate\":" + num(v.ref_value) +
               ",\"fraction\":" + num(v.ungraded.empty() ? v.fraction : NAN) + ",\"ungraded\":" + quote(v.ungraded) +
               ",\"against_text\":" + quote(against_text(v.against, v.fraction, v.ref_name, v.ungraded)) + "}";
    }
    static std::string check_json(const Check& c) {
        return "{\"what\":" + quote(c.what) + ",\"checked\":" + std::to_string(c.checked) +
               ",\"rel_l2_error\":" + num(c.rel_l2) + ",\"max_abs_error\":" + num(c.max_abs) +
               ",\"first_bad_index\":" + std::to_string(c.first_bad) + ",\"bad_count\":" + std::to_string(c.bad_count) +
               ",\"tolerance\":" + num(c.tol) + ",\"pass\":" + (c.pass ? "true" : "false") + "}";
    }
    static std::string target_json(const Target& t) {
        return "{\"name\":" + quote(t.name) + ",\"value\":" + num(t.value) + ",\"minimum\":" + num(t.minimum) +
               ",\"unit\":" + quote(t.unit) + ",\"met\":" + (t.met() ? "true" : "false") +
               ",\"text\":" + quote(target_text(t)) + "}";
    }
    static std::string work_json(const Work& w) {
        const double s = w.ms * 1e-3;
        return "{\"name\":" + quote(w.name) + ",\"flops\":" + num(w.flops) + ",\"bytes\":" + num(w.bytes) +
               ",\"ms\":" + num(w.ms) + ",\"intensity\":" + num(w.bytes > 0 ? w.flops / w.bytes : NAN) +
               ",\"gflops\":" + num(w.flops / s * 1e-9) + ",\"gbps\":" + num(w.bytes / s * 1e-9) + "}";
    }
    // Every bound and metric that is a roof, typed: kind "memory" or "compute", measured true for a
    // metric (reached by the run's kernels), false for a bound (a probe or a peak from the clock).
    std::string roofs_json() const {
        std::string j = "[";
        for (const std::vector<Named>* list : {&bounds_, &metrics_})
            for (const Named& m : *list) {
                if (m.roof == Roof::None) continue;
                j += std::string(j.size() > 1 ? "," : "") + "{\"name\":" + quote(m.name) +
                     ",\"value\":" + num(m.value) + ",\"unit\":" + quote(m.unit) +
                     ",\"kind\":" + quote(m.roof == Roof::Memory ? "memory" : "compute") +
                     ",\"measured\":" + (list == &metrics_ ? "true" : "false") + "}";
            }
        return j + "]";
    }
    static std::string named_list(const std::vector<Named>& list) {
        std::string j = "[";
        for (size_t i = 0; i < list.size(); ++i)
            j += std::string(i ? "," : "") + "{\"name\":" + quote(list[i].name) + ",\"value\":" + num(list[i].value) +
                 ",\"unit\":" + quote(list[i].unit) + "}";
        return j + "]";
    }
    static std::string string_list(const std::vector<std::string>& list) {
        std::string j = "[";
        for (size_t i = 0; i < list.size(); ++i) j += std::string(i ? "," : "") + quote(list[i]);
        return j + "]";
    }
    void warn_above(const std::string& what, double fraction, const std::string& bound_name) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " is %.1f%% of ", 100.0 * fraction);
        if (const GpuClass* e = gpu_limits().emulated) {  // the bound is the emulated class's, not this GPU's
            note(what + buf + bound_name + ", a bound of the emulated class " + e->name + ", which this GPU beats");
            return;
        }
        warning(what + buf + bound_name + ", above a bound: a measurement error (the bound or the time is wrong)");
    }
    void add_compared(const std::string& name, double ms, double rate, const std::string& unit, Against a,
                      double ref_value, const std::string& ref_name, const std::string& ungraded) {
        Variant v{name, ms, rate, unit, a, ref_name, ref_value, ref_value > 0 ? rate / ref_value : NAN, ungraded};
        if (a == Against::Bound && ungraded.empty() && v.fraction > 1.0) warn_above(name, v.fraction, ref_name);
        variants_.push_back(v);
    }
    static std::string unquote(const std::string& s) {
        return (s.size() >= 2 && s.front() == '"') ? s.substr(1, s.size() - 2) : s;
    }
    // Why the run FAILs: what the RESULT line says in its parentheses.
    std::string fail_reason() const {
        if (checks_.empty()) return "nothing was verified";
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
    std::string emulating_;    // the GPU class LESSON_GPU_LIMITS named, if any
    std::string skip_reason_;  // set by skip()
    int sms_ = 0;
    double mem_gb_ = 0;
    std::vector<std::pair<std::string, std::string>> config_;
    void set_config(const std::string& key, const std::string& json) {
        for (auto& kv : config_)
            if (kv.first == key) {
                kv.second = json;
                return;
            }
        config_.push_back({key, json});
    }
    std::vector<Named> bounds_, yardsticks_, metrics_;
    std::vector<Variant> variants_;
    std::vector<Check> checks_;
    std::vector<std::string> notes_, warnings_;
    std::vector<Target> targets_;
    std::vector<Work> work_;
    bool default_size_ = false;
    std::string timing_;
    double cpu_ms_ = NAN;
    int cpu_threads_ = 1;
    std::string key_metric_, key_of_, key_ungraded_;
    Against key_against_ = Against::Nothing;
    double key_fraction_ = NAN;
};

}  // namespace lesson
