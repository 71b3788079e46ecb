// verify/precision.h - the narrow floating-point formats on the CPU: rounding a
// float to FP16, BF16, TF32 and FP8 E4M3 (round to nearest, ties to even) and
// back, the formats' unit roundoffs, the tolerance of a GEMM in a given
// precision, lesson 19's GEMM inputs rounded as each format sees them and the
// exact check of the bits its conversion kernels write, a double reference for
// sampled rows of C = A * B^T, and the emulated running sums of lesson 19's
// demonstrations.
//
// Rounding is done in double, where every step is exact for a float input:
// the value is divided by its quantum (a power of two: the spacing of the
// format's numbers around it), rounded to an integer with ties to even
// (std::nearbyint in the default rounding mode) and multiplied back. That is
// independent of the bit tricks a GPU or a library uses, so comparing the two
// bit for bit checks both.
#pragma once
#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
#include "common/report.h"
#include "verify/parallel.h"
#include "verify/random.h"

namespace verify {

// A binary floating-point format: p significand bits (the implicit leading 1
// included), exponent bits and bias, the smallest normal exponent, the largest
// finite value, and what overflow gives: infinity (IEEE FP16, BF16) or the
// largest finite value (FP8 E4M3 converted with saturation, as cuBLAS users do;
// E4M3 has no infinity at all).
struct FloatFormat {
    const char* name;
    int p;         // significand bits, implicit bit included
    int exp_bits;  // exponent field width (0: not stored as bits here, e.g. TF32 kept in a float)
    int bias;      // exponent bias
    int emin;      // exponent of the smallest normal number
    double max_finite;
    bool saturate;  // overflow -> +-max_finite instead of +-inf
};

constexpr FloatFormat kFp32{"FP32", 24, 8, 127, -126, 3.4028234663852886e38, false};
constexpr FloatFormat kTf32{"TF32", 11, 8, 127, -126, 3.4011621342146535e38, false};  // (2 - 2^-10) * 2^127
constexpr FloatFormat kBf16{"BF16", 8, 8, 127, -126, 3.3895313892515355e38, false};   // (2 - 2^-7) * 2^127
constexpr FloatFormat kFp16{"FP16", 11, 5, 15, -14, 65504.0, false};
constexpr FloatFormat kE4m3{"FP8 E4M3", 4, 4, 7, -6, 448.0, true};  // 1.75 * 2^8; S.1111.111 is NaN

// Unit roundoff u = 2^-p: the largest relative error of one rounding to nearest.
inline double unit_roundoff(const FloatFormat& f) { return std::ldexp(1.0, -f.p); }

// The exponent of a finite a > 0: floor(log2 a), read from the bits of the double (frexp for the
// doubles below the normal range). And 2^e, built from its bits where it is a normal double (ldexp
// elsewhere). Both exact, and without a library call per element: the references below convert
// every element of matrices of 10^8 values.
inline int exponent_of(double a) {
    uint64_t b = 0;
    std::memcpy(&b, &a, sizeof b);
    const int field = int((b >> 52) & 0x7FF);
    if (field != 0) return field - 1023;
    int e2 = 0;
    std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
    return e2 - 1;
}
inline double pow2(int e) {
    if (e < -1022 || e > 1023) return std::ldexp(1.0, e);
    const uint64_t b = uint64_t(e + 1023) << 52;
    double d = 0.0;
    std::memcpy(&d, &b, sizeof d);
    return d;
}

// x rounded to the nearest number of format f, ties to even; overflow gives
// +-inf, or +-max_finite for a saturating format. NaN stays NaN.
inline double round_to(double x, const FloatFormat& f) {
    if (std::isnan(x)) return x;
    const double a = std::fabs(x);
    if (a == 0.0) return x;
    if (std::isinf(x)) return f.saturate ? std::copysign(f.max_finite, x) : x;
    const int e = std::max(exponent_of(a), f.emin);  // below the normal range the spacing stays fixed (subnormals)
    const double quantum = pow2(e - (f.p - 1));
    const int mode = std::fegetround();
    if (mode != FE_TONEAREST) std::fesetround(FE_TONEAREST);
    double r = std::nearbyint(a / quantum) * quantum;  // ties to even
    if (mode != FE_TONEAREST) std::fesetround(mode);
    if (r > f.max_finite) r = f.saturate ? f.max_finite : INFINITY;
    return std::copysign(r, x);
}

// The bits of a value of format f (total 1 + exp_bits + p - 1 bits). `v` must be
// representable in f (a result of round_to). NaN: the format's canonical quiet NaN.
inline uint32_t encode(double v, const FloatFormat& f) {
    const int mant_bits = f.p - 1;
    const uint32_t sign = std::signbit(v) ? 1u << (f.exp_bits + mant_bits) : 0u;
    const uint32_t exp_all = (1u << f.exp_bits) - 1u;
    if (std::isnan(v)) {
        if (f.saturate) return exp_all << mant_bits | ((1u << mant_bits) - 1u);  // E4M3: S.1111.111
        return exp_all << mant_bits | 1u << (mant_bits - 1);
    }
    const double a = std::fabs(v);
    if (std::isinf(a)) return sign | exp_all << mant_bits;
    if (a == 0.0) return sign;
    const int e = exponent_of(a);
    if (e < f.emin)  // subnormal: exponent field 0, mantissa = a / 2^(emin - mant_bits)
        return sign | uint32_t(a * pow2(-(f.emin - mant_bits)));
    const uint32_t mant = uint32_t(a * pow2(-(e - mant_bits))) - (1u << mant_bits);
    return sign | uint32_t(e + f.bias) << mant_bits | mant;
}

// The value of the bits of format f.
inline double decode(uint32_t bits, const FloatFormat& f) {
    const int mant_bits = f.p - 1;
    const uint32_t exp_all = (1u << f.exp_bits) - 1u;
    const bool neg = (bits >> (f.exp_bits + mant_bits)) & 1u;
    const uint32_t ef = (bits >> mant_bits) & exp_all, mant = bits & ((1u << mant_bits) - 1u);
    double a;
    if (f.saturate && ef == exp_all && mant == (1u << mant_bits) - 1u) a = NAN;  // E4M3's only NaN
    else if (!f.saturate && ef == exp_all) a = mant ? NAN : INFINITY;
    else if (ef == 0) a = double(mant) * pow2(f.emin - mant_bits);
    else a = double(mant + (1u << mant_bits)) * pow2(int(ef) - f.bias - mant_bits);
    return neg ? -a : a;
}

// The conversions of lesson 19's kernels, element by element, as round_to, encode and decode
// define them (the *_generic functions), and the same on the float's bits (the functions lesson 19
// calls on 10^8 elements: integer adds and shifts, no division and no library call, about 10x
// faster). Infinities and NaNs take the generic path. verify/tests/test_precision.cpp checks the
// bit-level functions against the generic ones for every float and every FP16, BF16 and E4M3
// pattern, bit for bit.
inline uint16_t to_fp16_bits_generic(float x) { return uint16_t(encode(round_to(x, kFp16), kFp16)); }
inline uint16_t to_bf16_bits_generic(float x) { return uint16_t(encode(round_to(x, kBf16), kBf16)); }
inline uint8_t to_e4m3_bits_generic(float x) { return uint8_t(encode(round_to(x, kE4m3), kE4m3)); }
inline float to_tf32_generic(float x) { return float(round_to(x, kTf32)); }
inline float fp16_bits_to_float_generic(uint16_t b) { return float(decode(b, kFp16)); }
inline float bf16_bits_to_float_generic(uint16_t b) { return float(decode(b, kBf16)); }
inline float e4m3_bits_to_float_generic(uint8_t b) { return float(decode(b, kE4m3)); }

namespace fp_bits {
inline uint32_t bits_of(float x) {
    uint32_t u = 0;
    std::memcpy(&u, &x, sizeof u);
    return u;
}
inline float float_of(uint32_t u) {
    float x = 0.0f;
    std::memcpy(&x, &u, sizeof x);
    return x;
}
// m / 2^s rounded to the nearest integer, ties to even (1 <= s <= 31).
inline uint32_t shift_nearest_even(uint32_t m, uint32_t s) {
    const uint32_t q = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
    return q + uint32_t(rem > half || (rem == half && (q & 1u) != 0u));
}
// The bits of a normal float (sign cleared) with its low `drop` bits rounded off, ties to even:
// a carry out of the mantissa moves into the exponent, as rounding up to the next binade does.
inline uint32_t round_low_bits(uint32_t a, uint32_t drop) {
    return (a + ((1u << (drop - 1u)) - 1u) + ((a >> drop) & 1u)) >> drop;
}
constexpr uint32_t kExpMask = 0x7F800000u;  // a float's exponent field: all ones for inf and NaN
}  // namespace fp_bits

// TF32 keeps the float's exponent (so its subnormals and its overflow to inf too): round off 13 bits.
inline float to_tf32(float x) {
    const uint32_t u = fp_bits::bits_of(x);
    if ((u & fp_bits::kExpMask) == fp_bits::kExpMask) return to_tf32_generic(x);
    return fp_bits::float_of((u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu);
}
// BF16 likewise: the top 16 bits, rounded.
inline uint16_t to_bf16_bits(float x) {
    const uint32_t u = fp_bits::bits_of(x);
    if ((u & fp_bits::kExpMask) == fp_bits::kExpMask) return to_bf16_bits_generic(x);
    return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
// FP16: exponent bias 15 instead of 127; below 2^-14 subnormal, in units of 2^-24.
inline uint16_t to_fp16_bits(float x) {
    const uint32_t u = fp_bits::bits_of(x), a = u & 0x7FFFFFFFu, sign = (u >> 16) & 0x8000u;
    if ((u & fp_bits::kExpMask) == fp_bits::kExpMask) return to_fp16_bits_generic(x);
    if (a >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // 65520 and up round to 65536: inf
    if (a >= 0x38800000u) return uint16_t(sign | fp_bits::round_low_bits(a - (112u << 23), 13));  // 2^-14 and up
    const uint32_t e = a >> 23;                                                                   // biased exponent
    if (e < 102) return uint16_t(sign);  // below 2^-25 (float subnormals too): rounds to 0
    return uint16_t(sign | fp_bits::shift_nearest_even((a & 0x7FFFFFu) | 0x800000u, 126u - e));  // m 2^(e-126)
}
// FP8 E4M3, saturating: bias 7, 448 the largest value (S.1111.110), below 2^-6 in units of 2^-9.
inline uint8_t to_e4m3_bits(float x) {
    const uint32_t u = fp_bits::bits_of(x), a = u & 0x7FFFFFFFu, sign = (u >> 24) & 0x80u;
    if ((u & fp_bits::kExpMask) == fp_bits::kExpMask) return to_e4m3_bits_generic(x);
    if (a >= 0x43E00000u) return uint8_t(sign | 0x7Eu);                                          // 448 and up: 448
    if (a >= 0x3C800000u) return uint8_t(sign | fp_bits::round_low_bits(a - (120u << 23), 20));  // 2^-6 and up
    const uint32_t e = a >> 23;
    if (e < 117) return uint8_t(sign);  // below 2^-10: rounds to 0
    return uint8_t(sign | fp_bits::shift_nearest_even((a & 0x7FFFFFu) | 0x800000u, 141u - e));  // m 2^(e-141)
}
inline float bf16_bits_to_float(uint16_t b) {
    if ((b & 0x7F80u) == 0x7F80u) return bf16_bits_to_float_generic(b);
    return fp_bits::float_of(uint32_t(b) << 16);
}
inline float fp16_bits_to_float(uint16_t b) {
    const uint32_t e = (b >> 10) & 0x1Fu, mant = b & 0x3FFu, sign = uint32_t(b & 0x8000u) << 16;
    if (e == 0x1Fu) return fp16_bits_to_float_generic(b);
    if (e == 0) return fp_bits::float_of(sign | fp_bits::bits_of(float(mant) * 0x1p-24f));  // exact
    return fp_bits::float_of(sign | (e + 112u) << 23 | mant << 13);
}
inline float e4m3_bits_to_float(uint8_t b) {
    const uint32_t e = (b >> 3) & 0xFu, mant = b & 0x7u, sign = uint32_t(b & 0x80u) << 24;
    if ((b & 0x7Fu) == 0x7Fu) return e4m3_bits_to_float_generic(b);
    if (e == 0) return fp_bits::float_of(sign | fp_bits::bits_of(float(mant) * 0x1p-9f));  // exact
    return fp_bits::float_of(sign | (e + 120u) << 23 | mant << 20);
}

// Lesson 19's GEMM inputs: A uniform in [-kGemmRangeA, kGemmRangeA), Bt in [-kGemmRangeBt,
// kGemmRangeBt): activations of tens and weights of 1e-3, as in a linear layer. FP8's per-tensor
// scales 448 / amax are then far apart (about 9.3 and 448000), so a scale that is wrong shows:
// a conversion that hard-codes 448 saturates nearly all of A; one amax for both tensors either
// saturates A (Bt's) or leaves all of Bt below E4M3's normal range, 2^-6 (A's: 1e-3 * 448 / 48
// = 0.0093); a GEMM given one dequantization scale for both is off by amax_A / amax_Bt = 48000.
// That ratio is 2^15 * 1.46, far from a power of two: a scale off by a power of two would put
// the values on the same grid of E4M3 numbers and change almost no rounding. Every check of
// the lesson is relative, and FP16 holds both ranges: 48 is far below 65504, and the 6% of Bt
// below FP16's normal range (2^-14) are rounded with an absolute error of at most 2^-25, no more
// than any normal value of Bt (whose rounding sets the FP16 error).
constexpr float kGemmRangeA = 48.0f;
constexpr float kGemmRangeBt = 1e-3f;

// FP8 with a per-tensor scale: the kernel multiplies by 448 / amax (in float) and
// rounds with saturation; the GEMM multiplies back by amax / 448 (the dequantization
// scale it is given). amax = 0 (an all-zero tensor): both scales are 1.
inline float fp8_quant_scale(float amax) { return amax > 0.0f ? 448.0f / amax : 1.0f; }
inline float fp8_dequant_scale(float amax) { return amax > 0.0f ? amax / 448.0f : 1.0f; }

// The largest |x| of n floats (the amax of a tensor).
inline float amax_of(const float* x, uint64_t n) {
    const std::vector<float> parts = block_partials<float>(n, kReduceBlock, [&](uint64_t begin, uint64_t end) {
        float m = 0.0f;
        for (uint64_t i = begin; i < end; ++i) m = std::max(m, std::fabs(x[i]));
        return m;
    });
    float m = 0.0f;
    for (float p : parts) m = std::max(m, p);
    return m;
}

// Lesson 19's GEMM inputs as a GEMM of format f sees them, rounded on the CPU: the values of the
// sampled rows of A (packed one after another) and of all of Bt, and, for the formats the lesson's
// kernels write (BF16, FP16, FP8 E4M3), the bits they must write. TF32 is rounded within the float
// (cuBLAS rounds it itself); FP8 rounds x * 448 / amax (fp8_quant_scale) of each tensor and carries
// both dequantization scales and their product; any other format (FP32) keeps the values as they
// are. Every element by itself, in blocks on all host cores.
struct RoundedInputs {
    host_vector<float> a_rows, bt;
    host_vector<uint16_t> a_bits, bt_bits;
    double scale = 1.0;  // FP8: dequantization scale of A times that of Bt
    float scale_a = 1.0f, scale_bt = 1.0f;
};
inline RoundedInputs round_gemm_inputs(const FloatFormat& f, const float* A, const float* Bt, uint64_t nB,
                                       const std::vector<int64_t>& rows, int64_t K, float amax_a, float amax_bt) {
    auto is = [&](const FloatFormat& g) { return f.p == g.p && f.exp_bits == g.exp_bits; };
    const bool tf32 = is(kTf32), bf16 = is(kBf16), fp16 = is(kFp16), e4m3 = is(kE4m3);
    RoundedInputs r;
    r.a_rows.resize(rows.size() * uint64_t(K));
    for (size_t i = 0; i < rows.size(); ++i)
        std::copy(A + rows[i] * K, A + (rows[i] + 1) * K, r.a_rows.begin() + int64_t(i) * K);
    r.bt.resize(nB);
    const float qa = fp8_quant_scale(amax_a), qb = fp8_quant_scale(amax_bt);
    if (e4m3) {
        r.scale_a = fp8_dequant_scale(amax_a);
        r.scale_bt = fp8_dequant_scale(amax_bt);
        r.scale = double(r.scale_a) * double(r.scale_bt);
    }
    // v[i] = src[i] rounded (src may be v itself).
    auto round_all = [&](const float* src, host_vector<float>& v, host_vector<uint16_t>& bits, float q) {
        if (bf16 || fp16 || e4m3) bits.resize(v.size());
        parallel_blocks(v.size(), items_per_block(64), [&](uint64_t b, uint64_t e) {
            for (uint64_t i = b; i < e; ++i) {
                float x = src[i];
                if (tf32) x = to_tf32(x);
                if (bf16) x = bf16_bits_to_float(bits[i] = to_bf16_bits(x));
                if (fp16) x = fp16_bits_to_float(bits[i] = to_fp16_bits(x));
                if (e4m3) x = e4m3_bits_to_float(bits[i] = to_e4m3_bits(x * q));
                v[i] = x;
            }
        });
    };
    round_all(r.a_rows.data(), r.a_rows, r.a_bits, qa);
    round_all(Bt, r.bt, r.bt_bits, qb);
    return r;
}

// One more part of an exact check c: n values the GPU wrote (`bytes` = 1 or 2 bytes each, as
// stored) against the CPU's bits, element i counted as element offset + i of the check. A check
// made of several parts reports the first bad element of the first part that has one.
inline lesson::Check add_same_bits(lesson::Check c, const void* gpu, size_t bytes, const uint16_t* cpu, uint64_t n,
                                   uint64_t offset) {
    struct Tally {
        uint64_t bad = 0;
        int64_t first = -1;
    };
    const uint8_t* g8 = static_cast<const uint8_t*>(gpu);
    const uint16_t* g16 = static_cast<const uint16_t*>(gpu);
    const std::vector<Tally> parts = block_partials<Tally>(n, items_per_block(1), [&](uint64_t b, uint64_t e) {
        Tally t;
        for (uint64_t i = b; i < e; ++i)
            if ((bytes == 2 ? g16[i] : uint16_t(g8[i])) != cpu[i]) {
                if (t.bad++ == 0) t.first = int64_t(offset + i);
            }
        return t;
    });
    c.checked += n;
    for (const Tally& t : parts) {  // in block order: the first bad element is the first block's first
        if (t.bad > 0 && c.bad_count == 0 && c.first_bad < 0) c.first_bad = t.first;
        c.bad_count += t.bad;
    }
    c.rel_l2 = c.max_abs = 0.0;
    c.tol = 0.0;
    c.pass = c.checked > 0 && c.bad_count == 0;
    return c;
}

// `count` row indices of [0, rows), ascending and distinct: one random row in
// each of `count` equal bands of rows, so the sample reaches every part of C
// (every band of output tiles), not only where random draws happen to cluster.
inline std::vector<int64_t> stratified_rows(int64_t rows, int64_t count, uint64_t seed) {
    count = std::max<int64_t>(1, std::min(count, rows));
    std::vector<int64_t> picked(static_cast<size_t>(count));
    for (int64_t b = 0; b < count; ++b) {
        const int64_t lo = b * rows / count, hi = (b + 1) * rows / count;  // hi > lo since count <= rows
        const int64_t off = int64_t(double(hash_uniform(seed, uint64_t(b), 0.0f, 1.0f)) * double(hi - lo));
        picked[size_t(b)] = lo + std::min(off, hi - lo - 1);
    }
    return picked;
}

// Rows `rows` of C = scale * A * Bt^T in double, packed one after another
// (rows.size() x N): A is M x K and Bt is N x K, both row-major, so
// C[i][j] = scale * sum_k A[i][k] * Bt[j][k], summed k = 0, 1, ..., K-1 in double.
// (Bt is "B transposed": the layout of a linear layer's weights, and the one
// cuBLASLt's FP8 GEMM wants.) Every output element is one dot product of two
// contiguous rows; they are spread over all host cores. Four outputs are summed
// side by side (four independent chains of additions keep the core busy where one
// waits for each addition), each still k = 0, 1, ..., K-1: the same bits as one at a time.
inline void gemm_abt_rows(const float* A, const float* Bt, int64_t N, int64_t K, const std::vector<int64_t>& rows,
                          double* out, double scale = 1.0) {
    const uint64_t outputs = uint64_t(rows.size()) * uint64_t(N);
    auto row_a = [&](uint64_t o) { return A + rows[o / uint64_t(N)] * K; };
    auto row_b = [&](uint64_t o) { return Bt + int64_t(o % uint64_t(N)) * K; };
    parallel_blocks(outputs, items_per_block(uint64_t(K)), [&](uint64_t begin, uint64_t end) {
        uint64_t o = begin;
        for (; o + 4 <= end; o += 4) {
            const float *a0 = row_a(o), *a1 = row_a(o + 1), *a2 = row_a(o + 2), *a3 = row_a(o + 3);
            const float *b0 = row_b(o), *b1 = row_b(o + 1), *b2 = row_b(o + 2), *b3 = row_b(o + 3);
            double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
            for (int64_t k = 0; k < K; ++k) {
                s0 += double(a0[k]) * double(b0[k]);
                s1 += double(a1[k]) * double(b1[k]);
                s2 += double(a2[k]) * double(b2[k]);
                s3 += double(a3[k]) * double(b3[k]);
            }
            out[o] = scale * s0;
            out[o + 1] = scale * s1;
            out[o + 2] = scale * s2;
            out[o + 3] = scale * s3;
        }
        for (; o < end; ++o) {
            const float* a = row_a(o);
            const float* b = row_b(o);
            double s = 0.0;
            for (int64_t k = 0; k < K; ++k) s += double(a[k]) * double(b[k]);
            out[o] = scale * s;
        }
    });
}

// The rel-L2 tolerance of a GEMM with inputs rounded to a format of unit roundoff
// u_in (0: the inputs are used as they are), outputs rounded to u_out, and sums
// accumulated in u_acc over K terms:
//     tol = 4 u_in + 2 u_out + 4 u_acc sqrt(K).
// For random inputs the expected errors are about 0.6 u_in (each product carries
// the roundings of two inputs, relative error up to u each, independent), 0.4 u_out,
// and u_acc times a factor that grows like sqrt(K) (rounding errors of a running sum
// add up like a random walk). The constants leave room for the largest of
// 10^5 elements, which verify::compare also checks one by one, and are tight enough
// that a wrong layout fails. A wrong scale or format changes the error by about the
// input rounding, which this tolerance must hold: gemm_rounded_tolerance catches it.
inline double gemm_tolerance(double u_in, double u_out, double u_acc, int64_t K) {
    return 4.0 * u_in + 2.0 * u_out + 4.0 * u_acc * std::sqrt(double(K));
}

// The rel-L2 tolerance of the same GEMM against a reference computed from its inputs as
// rounded (for FP8 also scaled, and the reference multiplied back by the dequantization
// scales). The input rounding is taken out; what is left is the output's rounding and the
// accumulation's:
//     tol = 2 u_out + 4 u_acc sqrt(K)        (gemm_tolerance with u_in = 0)
//         + 2 u_acc K / 4                    where the MMA truncates.
// Tensor cores that accumulate in FP32 do not round each addition to nearest: an MMA step
// aligns its block of products and the accumulator to the largest exponent and drops the bits
// shifted out (Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021). That error
// leans one way, toward a smaller sum, so it adds up like the number of steps, not like its
// square root: an H100's TF32 GEMM measured 9.7e-6 at K = 4096 and 1.9e-5 at 8192, 0.04 u_acc K,
// where the round-to-nearest terms alone (2.2e-5 at 8192) leave no room. Budget: up to one ulp
// (2 u_acc relative) per step, K / 4 steps (blocks of at least 4 products): 0.5 u_acc K. A CPU
// emulation that truncates after every block of 4 gives 0.10 u_acc K, of 8 0.05 u_acc K.
// This is the check that catches a wrong conversion or a wrong scale: either changes the
// values the GPU multiplies by about the input rounding or more (FP8 E4M3: 3.6e-2 for both
// tensors), above this tolerance (FP8 in, BF16 out, u_acc budgeted at 2^-14, K = 4096:
// 2 * 2^-8 + 4 * 2^-14 * 64 = 2.3e-2). verify/tests/test_precision.cpp shows it on lesson 19's
// inputs.
inline double gemm_rounded_tolerance(double u_out, double u_acc, int64_t K, bool mma_truncates) {
    return gemm_tolerance(0.0, u_out, u_acc, K) + (mma_truncates ? 2.0 * u_acc * double(K) / 4.0 : 0.0);
}

// A running sum of x[0..n) in index order with the accumulator held in format f
// (FP32, FP16 or BF16): acc = round_f(float(acc) + x[i]), the float addition
// rounded once to float, then to f: what lesson 19's sumInOrder kernel does on
// the GPU, bit for bit. For FP32 the second rounding changes nothing.
inline float emulated_running_sum(const float* x, uint64_t n, const FloatFormat& f) {
    float acc = 0.0f;
    for (uint64_t i = 0; i < n; ++i) {
        volatile float s = acc + x[i];  // one IEEE float addition (volatile: no wider intermediate)
        acc = float(round_to(double(s), f));
    }
    return acc;
}

// Where a running sum of addends in [0, 1) stops growing in format f: at 2^p the
// spacing of f's numbers becomes 2, so adding anything below 1 rounds back to the
// same sum. BF16: 256, FP16: 2048 (FP32: 2^24).
inline double running_sum_stall(const FloatFormat& f) { return std::ldexp(1.0, f.p); }

}  // namespace verify
