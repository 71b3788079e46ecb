// CPU tests of the elementwise and matmul references (verify/elementwise.h, verify/matmul.h).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>
#include "catch_shim.hpp"
#include "common/report.h"
#include "verify/elementwise.h"
#include "verify/matmul.h"

TEST_CASE("reference: elementwise add", "[reference]") {
    float a[] = {1.0f, -2.5f, 3.0f, 16777216.0f};
    float b[] = {2.0f, 0.5f, -3.0f, 1.0f};
    double c[4];
    verify::add_reference(a, b, c, 4);
    CHECK(c[0] == 3.0);
    CHECK(c[1] == -2.0);
    CHECK(c[2] == 0.0);
    CHECK(c[3] == 16777217.0);  // exact in double, not representable in float
}

TEST_CASE("reference: 4x4 matmul known answer (C00 = 130)", "[reference]") {
    // A[i][j] = 4i + j + 1 (1..16), B = A + 4 (5..20), row-major.
    float A[16], B[16];
    for (int i = 0; i < 16; ++i) {
        A[i] = float(i + 1);
        B[i] = float(i + 5);
    }
    double C[16];
    verify::matmul_reference(A, B, C, 4, 4, 4);
    CHECK(C[0] == 130.0);   // 1*5 + 2*9 + 3*13 + 4*17
    CHECK(C[1] == 140.0);   // 1*6 + 2*10 + 3*14 + 4*18
    CHECK(C[4] == 306.0);   // 5*5 + 6*9 + 7*13 + 8*17
    CHECK(C[15] == 832.0);  // 13*8 + 14*12 + 15*16 + 16*20
}

TEST_CASE("reference: non-square matmul and row subsets", "[reference]") {
    // A is 2x3, B is 3x4
    float A[] = {1, 2, 3, 4, 5, 6};
    float B[] = {1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1};
    double C[8];
    verify::matmul_reference(A, B, C, 2, 4, 3);
    double want[] = {1, 2, 3, 6, 4, 5, 6, 15};
    for (int i = 0; i < 8; ++i) CHECK(C[i] == want[i]);
    double D[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    verify::matmul_reference(A, B, D, 2, 4, 3, 1, 2);  // second row only
    CHECK(D[0] == -1);
    for (int j = 0; j < 4; ++j) CHECK(D[4 + j] == want[4 + j]);
}

TEST_CASE("report: PASS needs at least one check, all passing", "[report]") {
    lesson::Report empty("x");
    CHECK_FALSE(empty.passed());
    lesson::Report r("x");
    lesson::Check ok;
    ok.pass = true;
    r.check(ok);
    CHECK(r.passed());
    lesson::Check bad;
    bad.pass = false;
    r.check(bad);
    CHECK_FALSE(r.passed());
}

TEST_CASE("report: JSON escapes text and writes NaN as null", "[report]") {
    lesson::Report r("00_vector_add");
    r.config("n", int64_t(1) << 33);
    r.config("label", std::string("a \"quoted\"\nline"));
    r.variant("add", 1.5, NAN, "GB/s");
    std::string j = r.json(false);
    CHECK(j.find("\"n\":8589934592") != std::string::npos);
    CHECK(j.find("a \\\"quoted\\\"\\nline") != std::string::npos);
    CHECK(j.find("\"rate\":null") != std::string::npos);
    CHECK(j.find("\"result\":\"FAIL\"") != std::string::npos);
}

TEST_CASE("report: config_from records every parsed flag once, output paths aside", "[report]") {
    lesson::CommonOptions opt;
    int64_t decode_n = 1000;
    double cutoff = 0.5;
    std::string precision = "bf16", out;
    bool causal = false;
    lesson::Cli cli("x", "a test");
    lesson::add_common_flags(cli, opt);
    cli.add_int("decode-n", &decode_n, 1, 1 << 20, "keys");
    cli.add_double("cutoff", &cutoff, 0.0, 1.0, "radius");
    cli.add_string("precision", &precision, "which");
    cli.add_switch("causal", &causal, "mask");
    cli.add_output("out", &out, "a file");
    const char* argv[] = {"x", "--decode-n=77", "--causal", "--seed=5"};
    std::string error;
    REQUIRE(cli.parse(4, argv, &error) == lesson::Cli::Status::Ok);
    lesson::Report r("00_vector_add");
    r.config("seed", int64_t(1));
    r.config_from(cli);
    r.config("decode_n", int64_t(78));  // a key given again replaces its value
    const std::string j = r.json(false);
    CHECK(j.find("\"decode_n\":78") != std::string::npos);
    CHECK(j.find("\"decode_n\":77") == std::string::npos);
    CHECK(j.find("\"seed\":5") != std::string::npos);
    CHECK(j.find("\"seed\":1") == std::string::npos);
    CHECK(j.find("\"cutoff\":0.5") != std::string::npos);
    CHECK(j.find("\"precision\":\"bf16\"") != std::string::npos);
    CHECK(j.find("\"causal\":true") != std::string::npos);
    CHECK(j.find("\"out\"") == std::string::npos);
    CHECK(j.find("\"json\"") == std::string::npos);
}

TEST_CASE("report: JSON carries the texts the report prints", "[report]") {
    lesson::Report r("00_vector_add");
    r.variant_bound("vectorAdd4", 1.0, 2913.0, "GB/s", 3000.0, "DRAM bound");
    r.variant_yardstick("tiled", 1.0, 51.0, "TFLOP/s", 50.0, "cuBLAS");
    r.variant_bound("small", 1.0, 10.0, "GB/s", 3000.0, "DRAM bound", "data fit in L2");
    r.variant("plain", 1.0, 10.0, "GB/s");
    r.target("vectorAdd4 vs DRAM bound", 0.971, 0.9);
    r.target("tiled vs cuBLAS", 1.02, 1.05, "x");
    r.key_result("2913 GB/s", 0.971, "DRAM bound", lesson::Against::Bound);
    const std::string j = r.json(false);
    CHECK(j.find("\"against_text\":\"97.1% of DRAM bound\"") != std::string::npos);
    CHECK(j.find("\"against_text\":\"1.02x cuBLAS\"") != std::string::npos);
    CHECK(j.find("\"against_text\":\"not graded: data fit in L2\"") != std::string::npos);
    CHECK(j.find("\"against_text\":\"\"") != std::string::npos);
    CHECK(j.find("\"ungraded\":\"\",\"against_text\":\"97.1% of DRAM bound\"}") != std::string::npos);  // key
    CHECK(j.find("\"text\":\"vectorAdd4 vs DRAM bound: 97.1% (needs >= 90.0%)\"") != std::string::npos);
    CHECK(j.find("\"text\":\"tiled vs cuBLAS: 1.02x (needs >= 1.05x)\"") != std::string::npos);
    CHECK(j.find("\"fail_reason\":\"nothing was verified\"") != std::string::npos);
    lesson::Check ok;
    ok.pass = true;
    r.check(ok);
    CHECK(r.json(true).find("fail_reason") == std::string::npos);
}

TEST_CASE("report: roofs are typed, every other bound and metric is no roof", "[report]") {
    lesson::Report r("17_fusion_roofline");
    r.bound("DRAM bound, 1 read : 1 write (best burst)", 3000.0, "GB/s", lesson::Roof::Memory);
    r.bound("FP32 peak", 66908.0, "GFLOP/s", lesson::Roof::Compute);
    r.bound("PCIe H2D", 55.0, "GB/s");
    r.metric("memory roof", 2900.0, "GB/s", lesson::Roof::Memory);
    r.metric("ridge point", 21.0, "flop/byte");
    const std::string j = r.json(false);
    CHECK(j.find("\"roofs\":[{\"name\":\"DRAM bound, 1 read : 1 write (best burst)\",\"value\":3000,\"unit\":\"GB/s\","
                 "\"kind\":\"memory\",\"measured\":false},{\"name\":\"FP32 peak\",\"value\":66908,\"unit\":\"GFLOP/s\","
                 "\"kind\":\"compute\",\"measured\":false},{\"name\":\"memory roof\",\"value\":2900,\"unit\":\"GB/s\","
                 "\"kind\":\"memory\",\"measured\":true}]") != std::string::npos);
    CHECK(
        j.find(
            "\"bounds\":[{\"name\":\"DRAM bound, 1 read : 1 write (best burst)\",\"value\":3000,\"unit\":\"GB/s\"}") !=
        std::string::npos);
    CHECK(lesson::Report("x").json(false).find("\"roofs\":[]") != std::string::npos);
}
