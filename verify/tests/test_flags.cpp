// CPU tests of common/flags.h: the flag parser every lesson uses (bad input exits 2).
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>
#include "catch_shim.hpp"
#include "common/flags.h"

namespace {
struct Parsed {
    lesson::Cli::Status status;
    std::string error;
};

// A small lesson-like command line: --n in [1, 2^40], --scale in [0, 10], common flags.
struct Fixture {
    lesson::CommonOptions common;
    int64_t n = 1000;
    double scale = 1.0;
    std::string name;
    lesson::Cli cli{"demo", "a demo"};
    Fixture() {
        lesson::add_common_flags(cli, common);
        cli.add_int("n", &n, 1, int64_t(1) << 40, "elements", 10);
        cli.add_double("scale", &scale, 0.0, 10.0, "scale");
        cli.add_string("name", &name, "a name");
    }
    Parsed parse(std::vector<const char*> args) {
        args.insert(args.begin(), "demo");
        Parsed p;
        p.status = cli.parse(static_cast<int>(args.size()), args.data(), &p.error);
        return p;
    }
};
// Every command line of `bad` is an error with a message.
void check_all_rejected(const std::vector<std::vector<const char*>>& bad) {
    for (const auto& args : bad) {
        Fixture f;
        auto p = f.parse(args);
        INFO("args: " << args[0]);
        CHECK(p.status == lesson::Cli::Status::Error);
        CHECK_FALSE(p.error.empty());
    }
}
}  // namespace

TEST_CASE("flags: defaults hold when nothing is given", "[flags]") {
    Fixture f;
    auto p = f.parse({});
    REQUIRE(p.status == lesson::Cli::Status::Ok);
    CHECK(f.n == 1000);
    CHECK(f.common.repeat == 15);
    CHECK_FALSE(f.common.quick);
    CHECK_FALSE(f.cli.given("n"));
}

TEST_CASE("flags: --name=value and --name value both parse", "[flags]") {
    Fixture f;
    auto p = f.parse({"--n=4096", "--scale", "2.5", "--name", "x", "--inject-fault", "--json=out.json"});
    REQUIRE(p.status == lesson::Cli::Status::Ok);
    CHECK(f.n == 4096);
    CHECK(f.scale == Approx(2.5));
    CHECK(f.name == "x");
    CHECK(f.common.inject_fault);
    CHECK(f.common.json == "out.json");
    CHECK(f.cli.given("n"));
}

TEST_CASE("flags: sizes past 2^31 parse into 64 bits", "[flags]") {
    Fixture f;
    auto p = f.parse({"--n=4294967296"});
    REQUIRE(p.status == lesson::Cli::Status::Ok);
    CHECK(f.n == (int64_t(1) << 32));
}

TEST_CASE("flags: --quick takes quick values only for flags not given", "[flags]") {
    Fixture a;
    REQUIRE(a.parse({"--quick"}).status == lesson::Cli::Status::Ok);
    CHECK(a.n == 10);
    CHECK(a.common.repeat == 3);
    Fixture b;
    REQUIRE(b.parse({"--n=77", "--quick"}).status == lesson::Cli::Status::Ok);
    CHECK(b.n == 77);
}

TEST_CASE("flags: bad values are errors that name the flag and the range", "[flags]") {
    const std::vector<std::vector<const char*>> bad = {{"--n=0"},
                                                       {"--n=-3"},
                                                       {"--n=abc"},
                                                       {"--n=12x"},
                                                       {"--n="},
                                                       {"--n=99999999999999999999999"},
                                                       {"--n=2199023255553"},
                                                       {"--scale=nan"},
                                                       {"--scale=11"},
                                                       {"--scale=inf"},
                                                       {"--repeat=0"},
                                                       {"--name="},
                                                       {"--n"},
                                                       {"--bogus=1"},
                                                       {"stray"},
                                                       {"--quick=maybe"}};
    check_all_rejected(bad);
    Fixture f;
    auto p = f.parse({"--n=0"});
    CHECK(p.error.find("--n") != std::string::npos);
    CHECK(p.error.find("[1, 1099511627776]") != std::string::npos);
}

// The bad command lines every lesson shares (LESSON_COMMON_BAD_ARGS in lessons/CMakeLists.txt): the
// lessons do not run them one by one, since the flags they test are add_common_flags' own.
TEST_CASE("flags: the common flags reject the bad command lines every lesson shares", "[flags]") {
    const std::vector<std::vector<const char*>> bad = {
        {"--no-such-flag"}, {"--repeat=0"}, {"--repeat=abc"}, {"--seed=-1"},
        {"--device=-1"},    {"--json="},    {"positional"},   {"--json=/nonexistent-dir/report.json"},
        {"--json=/"}};
    check_all_rejected(bad);
    Fixture f;
    CHECK(f.parse({"--json=/nonexistent-dir/report.json"}).error.find("does not exist") != std::string::npos);
    Fixture g;
    CHECK(g.parse({"--json=/"}).error.find("is a folder") != std::string::npos);
}

TEST_CASE("flags: --help is reported and usage lists every flag", "[flags]") {
    Fixture f;
    CHECK(f.parse({"--n=5", "--help"}).status == lesson::Cli::Status::Help);
    std::string u = f.cli.usage();
    for (const char* flag : {"--quick", "--repeat", "--seed", "--device", "--json", "--inject-fault", "--n", "--scale"})
        CHECK(u.find(flag) != std::string::npos);
    CHECK(u.find("--quick: 10") != std::string::npos);
}
