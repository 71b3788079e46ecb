// common/flags.h - the one flag parser of every lesson (host-only, no CUDA).
//
// Flags are --name=value or --name value. Every flag is typed and has a default
// and an allowed range; bad input is one clear line on stderr and exit code 2,
// decided before any CUDA call (docs/lesson-contract.md, section 2).
#pragma once
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/phases.h"

namespace lesson {

// Prints the reason on stderr, the RESULT: ERROR line on stdout, exits 2 (docs/lesson-contract.md).
[[noreturn]] inline void bad_input(const std::string& why) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", why.c_str());
    std::printf("RESULT: ERROR (%s)\n", why.c_str());
    std::fflush(stdout);
    std::exit(2);
}

class Cli {
public:
    enum class Status { Ok, Help, Error };

    Cli(std::string program, std::string summary) : program_(std::move(program)), summary_(std::move(summary)) {}

    // An integer flag in [lo, hi]. quick_value (if >= lo) replaces the default under --quick.
    void add_int(const std::string& name, int64_t* value, int64_t lo, int64_t hi, const std::string& help,
                 int64_t quick_value = INT64_MIN) {
        Opt o{name, Kind::Int, help};
        o.i = value;
        o.lo = lo;
        o.hi = hi;
        o.quick_i = quick_value;
        o.default_text = std::to_string(*value);
        opts_.push_back(o);
    }
    void add_double(const std::string& name, double* value, double lo, double hi, const std::string& help) {
        Opt o{name, Kind::Double, help};
        o.d = value;
        o.dlo = lo;
        o.dhi = hi;
        o.default_text = fmt_double(*value);
        opts_.push_back(o);
    }
    void add_string(const std::string& name, std::string* value, const std::string& help) {
        Opt o{name, Kind::String, help};
        o.s = value;
        o.default_text = value->empty() ? "none" : *value;
        opts_.push_back(o);
    }
    // A file the lesson will write (--json, --out, --timeline, ...). Checked when
    // parsed, before any CUDA call: its folder must exist and be writable, and
    // the path must not be a folder or a read-only file (exit 2 otherwise).
    void add_output(const std::string& name, std::string* value, const std::string& help) {
        Opt o{name, Kind::Output, help};
        o.s = value;
        o.default_text = value->empty() ? "none" : *value;
        opts_.push_back(o);
    }
    // A switch: --name (or --name=true/false/1/0).
    void add_switch(const std::string& name, bool* value, const std::string& help) {
        Opt o{name, Kind::Switch, help};
        o.b = value;
        o.default_text = *value ? "on" : "off";
        opts_.push_back(o);
    }

    // Parses argv[1..]. On Error, *error holds one line naming the flag and the allowed range.
    Status parse(int argc, const char* const* argv, std::string* error) {
        for (int i = 1; i < argc; ++i) {
            std::string arg = argv[i];
            if (arg == "--help" || arg == "-h") return Status::Help;
            if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
                *error = "unexpected argument '" + arg + "' (flags look like --name=value; see --help)";
                return Status::Error;
            }
            std::string name = arg.substr(2), value;
            bool has_value = false;
            size_t eq = name.find('=');
            if (eq != std::string::npos) {
                value = name.substr(eq + 1);
                name = name.substr(0, eq);
                has_value = true;
            }
            Opt* o = find(name);
            if (!o) {
                *error = "unknown flag --" + name + " (see --help for the flags of " + program_ + ")";
                return Status::Error;
            }
            if (!has_value && o->kind != Kind::Switch) {
                if (i + 1 >= argc) {
                    *error = "--" + name + " needs a value; allowed: " + range_text(*o);
                    return Status::Error;
                }
                value = argv[++i];
                has_value = true;
            }
            if (!set(*o, has_value, value, error)) return Status::Error;
            o->given = true;
        }
        if (quick_ && *quick_)
            for (Opt& o : opts_)
                if (!o.given && o.kind == Kind::Int && o.quick_i != INT64_MIN) *o.i = o.quick_i;
        return Status::Ok;
    }

    // For main(): --help prints usage and exits 0; bad input exits 2.
    void parse_or_exit(int argc, char** argv) {
        phase_clock_start();
        std::string error;
        Status s = parse(argc, argv, &error);
        if (s == Status::Help) {
            std::printf("%s", usage().c_str());
            std::exit(0);
        }
        if (s == Status::Error) bad_input(error);
    }

    bool given(const std::string& name) const {
        for (const Opt& o : opts_)
            if (o.name == name) return o.given;
        return false;
    }

    // Every flag but the output paths, after parsing: name, kind and value as JSON text
    // ("512", "0.5", "\"bf16\"", "true"); what Report::config_from records of a run.
    struct Value {
        std::string name;
        std::string json;
        bool text;  // a string flag (printed without its quotes)
    };
    std::vector<Value> values() const {
        std::vector<Value> v;
        for (const Opt& o : opts_) {
            switch (o.kind) {
                case Kind::Int: v.push_back({o.name, std::to_string(*o.i), false}); break;
                case Kind::Double: v.push_back({o.name, fmt_double(*o.d), false}); break;
                case Kind::Switch: v.push_back({o.name, *o.b ? "true" : "false", false}); break;
                case Kind::String: v.push_back({o.name, *o.s, true}); break;
                case Kind::Output: break;
            }
        }
        return v;
    }

    // Marks which switch is --quick, so that integer flags take their quick values.
    void set_quick_switch(bool* quick) { quick_ = quick; }

    // Flags registered from here on are the lesson's own size flags; the ones
    // before (add_common_flags) do not change the problem size.
    void begin_size_flags() { size_flags_from_ = opts_.size(); }
    // True when the run is at the lesson's default size: no --quick and no size
    // flag given. Benchmark targets are graded only there.
    bool at_default_size() const {
        if (quick_ && *quick_) return false;
        for (size_t i = size_flags_from_; i < opts_.size(); ++i)
            if (opts_[i].given && opts_[i].kind != Kind::Output) return false;
        return true;
    }

    // The reason an output path cannot be written, or "" when it can.
    static std::string output_path_problem(const std::string& path) {
        if (path.empty()) return "is empty";
        struct stat st {};
        if (stat(path.c_str(), &st) == 0) {
            if (S_ISDIR(st.st_mode)) return "is a folder, not a file";
            if (access(path.c_str(), W_OK) != 0) return "exists and is not writable";
            return "";
        }
        size_t slash = path.find_last_of('/');
        std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
        if (stat(dir.c_str(), &st) != 0) return "is in a folder that does not exist (" + dir + ")";
        if (!S_ISDIR(st.st_mode)) return "is under " + dir + ", which is not a folder";
        if (access(dir.c_str(), W_OK) != 0) return "is in a folder that is not writable (" + dir + ")";
        return "";
    }

    std::string usage() const {
        std::string u = "usage: " + program_ + " [flags]\n" + summary_ + "\n\nflags:\n";
        u += "  --help                 this text\n";
        for (const Opt& o : opts_) {
            std::string left = "  --" + o.name + (o.kind == Kind::Switch ? "" : "=" + kind_word(o.kind));
            if (left.size() < 24) left.resize(24, ' ');
            else left += "\n" + std::string(24, ' ');
            std::string right = o.help + " (default " + o.default_text;
            if (o.kind == Kind::Int && o.quick_i != INT64_MIN) right += ", --quick: " + std::to_string(o.quick_i);
            if (o.kind == Kind::Int || o.kind == Kind::Double) right += "; range " + range_text(o);
            right += ")";
            u += left + right + "\n";
        }
        return u;
    }

private:
    enum class Kind { Int, Double, String, Output, Switch };
    struct Opt {
        std::string name;
        Kind kind;
        std::string help;
        int64_t* i = nullptr;
        int64_t lo = 0, hi = 0, quick_i = INT64_MIN;
        double* d = nullptr;
        double dlo = 0, dhi = 0;
        std::string* s = nullptr;
        bool* b = nullptr;
        std::string default_text;
        bool given = false;
    };

    static std::string fmt_double(double v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%g", v);
        return buf;
    }
    static std::string kind_word(Kind k) {
        switch (k) {
            case Kind::Int: return "INT";
            case Kind::Double: return "REAL";
            case Kind::String: return "TEXT";
            case Kind::Output: return "FILE";
            default: return "";
        }
    }
    static std::string range_text(const Opt& o) {
        switch (o.kind) {
            case Kind::Int: return "integer in [" + std::to_string(o.lo) + ", " + std::to_string(o.hi) + "]";
            case Kind::Double: return "number in [" + fmt_double(o.dlo) + ", " + fmt_double(o.dhi) + "]";
            case Kind::String: return "non-empty text";
            case Kind::Output: return "a writable file path";
            default: return "no value, or true/false";
        }
    }
    Opt* find(const std::string& name) {
        for (Opt& o : opts_)
            if (o.name == name) return &o;
        return nullptr;
    }
    bool set(Opt& o, bool has_value, const std::string& v, std::string* error) {
        const std::string shown = "--" + o.name + (has_value ? "=" + v : "");
        switch (o.kind) {
            case Kind::Int: {
                errno = 0;
                char* end = nullptr;
                long long x = std::strtoll(v.c_str(), &end, 10);
                bool ok = !v.empty() && end && *end == '\0' && errno == 0;
                if (!ok || x < o.lo || x > o.hi) {
                    *error = shown +
                             (ok ? " is out of range" : (errno == ERANGE ? " overflows" : " is not an integer")) +
                             "; allowed: " + range_text(o);
                    return false;
                }
                *o.i = x;
                return true;
            }
            case Kind::Double: {
                errno = 0;
                char* end = nullptr;
                double x = std::strtod(v.c_str(), &end);
                bool ok = !v.empty() && end && *end == '\0' && errno == 0 && std::isfinite(x);
                if (!ok || x < o.dlo || x > o.dhi) {
                    *error = shown + (ok ? " is out of range" : " is not a number") + "; allowed: " + range_text(o);
                    return false;
                }
                *o.d = x;
                return true;
            }
            case Kind::String:
                if (v.empty()) {
                    *error = shown + " is empty; allowed: " + range_text(o);
                    return false;
                }
                *o.s = v;
                return true;
            case Kind::Output: {
                std::string why = output_path_problem(v);
                if (!why.empty()) {
                    *error = shown + " " + why + "; allowed: " + range_text(o);
                    return false;
                }
                *o.s = v;
                return true;
            }
            case Kind::Switch:
                if (!has_value || v == "true" || v == "1") {
                    *o.b = true;
                    return true;
                }
                if (v == "false" || v == "0") {
                    *o.b = false;
                    return true;
                }
                *error = shown + " is not a switch value; allowed: " + range_text(o);
                return false;
        }
        return false;
    }

    std::string program_, summary_;
    std::vector<Opt> opts_;
    bool* quick_ = nullptr;
    size_t size_flags_from_ = 0;
};

// The flags every lesson accepts (docs/lesson-contract.md, section 2).
struct CommonOptions {
    bool quick = false;
    int64_t repeat = 15;
    int64_t seed = 2026;
    int64_t device = 0;
    std::string json;
    bool inject_fault = false;
};

inline void add_common_flags(Cli& cli, CommonOptions& c) {
    cli.add_switch("quick", &c.quick, "small sizes that finish in about a second");
    cli.add_int("repeat", &c.repeat, 1, 1000, "timed repetitions; the median is reported", 3);
    cli.add_int("seed", &c.seed, 0, INT64_MAX, "seed of the random inputs");
    cli.add_int("device", &c.device, 0, 63, "which GPU (cudaSetDevice index)");
    cli.add_output("json", &c.json, "also write the report as one JSON object to this file");
    cli.add_switch("inject-fault", &c.inject_fault,
                   "corrupt one output element before verification (the run must FAIL)");
    cli.set_quick_switch(&c.quick);
    cli.begin_size_flags();
}

}  // namespace lesson
