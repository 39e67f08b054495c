// The quantize_gguf op's host side: ggml's reference quantizers (quantize_gguf_on_host) on blocks
// worked out by hand — zeros, one large value, q4_0's signed scale, roundf's halves, NaN, Inf and
// subnormals as kc/stage3/quantize_gguf_args.hpp defines them —, quantize then dequantize (the
// GEMV's reference decode) within ggml's error bounds, the scalar conversions, the public entry's
// refusals, and the op's problems and registration.
//   ctest --test-dir build/ci -R QuantizeGguf
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf.hpp"
#include "kc/stage3/quantize_gguf.hpp"
#include "stage3_test_registry.hpp"

namespace kc::stage3 {
namespace {

constexpr GgufBlockType kTypes[] = {GgufBlockType::q4_0, GgufBlockType::q4_1, GgufBlockType::q8_0};
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

std::vector<std::uint8_t> quantize(GgufBlockType type, const std::vector<float>& x) {
  return quantize_gguf_on_host(type, x.data(), x.size());
}

std::uint16_t half_bits_at(const std::vector<std::uint8_t>& bytes, int offset) {
  return static_cast<std::uint16_t>(bytes[static_cast<std::size_t>(offset)] |
                                    (bytes[static_cast<std::size_t>(offset) + 1] << 8));
}

// The 16 bytes of q4 nibbles of block 0 built from its 32 quants: q[j] low, q[j + 16] high.
std::vector<std::uint8_t> nibbles(const std::vector<int>& q) {
  std::vector<std::uint8_t> qs(16);
  for (int j = 0; j < 16; ++j) qs[static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(q[j] | (q[j + 16] << 4));
  return qs;
}

std::vector<std::uint8_t> tail(const std::vector<std::uint8_t>& bytes, int from) {
  return std::vector<std::uint8_t>(bytes.begin() + from, bytes.end());
}

TEST(QuantizeGguf, ScalarConversionsAreX86sAndGgmls) {
  EXPECT_EQ(ggml_float_to_int8(3.9f), 3);
  EXPECT_EQ(ggml_float_to_int8(-3.9f), -3);
  EXPECT_EQ(ggml_float_to_int8(254.f), -2);  // the low byte of 254
  EXPECT_EQ(ggml_float_to_int8(-129.7f), 127);
  EXPECT_EQ(ggml_float_to_int8(kNaN), 0);
  EXPECT_EQ(ggml_float_to_int8(kInf), 0);
  EXPECT_EQ(ggml_float_to_int8(-kInf), 0);
  EXPECT_EQ(ggml_float_to_int8(3e9f), 0);
  EXPECT_EQ(ggml_fp16_bits(1.f), 0x3C00);
  EXPECT_EQ(ggml_fp16_bits(-0.f), 0x8000);
  EXPECT_EQ(ggml_fp16_bits(65520.f), 0x7C00);             // the tie above 65504 rounds to Inf
  EXPECT_EQ(ggml_fp16_bits(std::ldexp(1.f, -25)), 0x0000);  // half the smallest subnormal: to even, 0
  EXPECT_EQ(ggml_fp16_bits(std::ldexp(3.f, -25)), 0x0002);  // 1.5 subnormal steps: to even, 2
  EXPECT_EQ(ggml_fp16_bits(kNaN), 0x7E00);
  EXPECT_EQ(ggml_fp16_bits(-kNaN), 0xFE00);
}

TEST(QuantizeGguf, AllZeroBlocks) {
  const std::vector<float> zeros(32, 0.f);
  EXPECT_EQ(quantize(GgufBlockType::q8_0, zeros), std::vector<std::uint8_t>(34, 0));
  EXPECT_EQ(quantize(GgufBlockType::q4_1, zeros), std::vector<std::uint8_t>(20, 0));
  // q4_0: d = 0 / -8 = -0 (bytes 00 80) and every quant 0 x 0 + 8.5 -> 8.
  std::vector<std::uint8_t> q4_0(18, 0x88);
  q4_0[0] = 0x00;
  q4_0[1] = 0x80;
  EXPECT_EQ(quantize(GgufBlockType::q4_0, zeros), q4_0);
  // Negative zeros: q8_0 takes |x|; q4_1 keeps the first zero as its min (m = -0).
  const std::vector<float> negative_zeros(32, -0.f);
  EXPECT_EQ(quantize(GgufBlockType::q8_0, negative_zeros), std::vector<std::uint8_t>(34, 0));
  std::vector<std::uint8_t> q4_1(20, 0);
  q4_1[3] = 0x80;
  EXPECT_EQ(quantize(GgufBlockType::q4_1, negative_zeros), q4_1);
  EXPECT_EQ(quantize(GgufBlockType::q4_0, negative_zeros), q4_0);
}

TEST(QuantizeGguf, Q8OneLargeValueAndRoundfHalves) {
  std::vector<float> x(32, 1.f);
  x[5] = 127.f;    // amax: d = 1
  x[6] = 2.5f;     // roundf: away from zero
  x[8] = -2.5f;
  x[9] = 0.49999997f;
  const std::vector<std::uint8_t> bytes = quantize(GgufBlockType::q8_0, x);
  ASSERT_EQ(bytes.size(), 34u);
  EXPECT_EQ(half_bits_at(bytes, 0), 0x3C00);
  for (int j = 0; j < 32; ++j) {
    const int expected = j == 5 ? 127 : j == 6 ? 3 : j == 8 ? -3 : j == 9 ? 0 : 1;
    EXPECT_EQ(static_cast<std::int8_t>(bytes[2 + static_cast<std::size_t>(j)]), expected) << "element " << j;
  }
}

TEST(QuantizeGguf, Q4_0ScaleTakesTheSignOfTheFirstLargestValue) {
  std::vector<float> x(32, 0.f);
  x[3] = -8.f;  // first of largest magnitude: max = -8, d = 1
  x[10] = 8.f;  // as large, later: does not replace it
  x[12] = 7.f;
  x[20] = 3.f;  // element 16 + 4: high nibble of qs[4]
  std::vector<int> q(32, 8);
  q[3] = 0;    // -8 + 8.5
  q[10] = 15;  // 16.5 -> 16, clamped
  q[12] = 15;  // 15.5
  q[20] = 11;
  std::vector<std::uint8_t> bytes = quantize(GgufBlockType::q4_0, x);
  EXPECT_EQ(half_bits_at(bytes, 0), 0x3C00);
  EXPECT_EQ(tail(bytes, 2), nibbles(q));

  std::swap(x[3], x[10]);  // now +8 comes first: max = 8, d = -1, id = -1
  std::fill(q.begin(), q.end(), 8);
  q[3] = 0;    // 8 x -1 + 8.5 = 0.5
  q[10] = 15;  // -8 x -1 + 8.5 = 16.5 -> 15
  q[12] = 1;  // -7 + 8.5
  q[20] = 5;
  bytes = quantize(GgufBlockType::q4_0, x);
  EXPECT_EQ(half_bits_at(bytes, 0), 0xBC00);
  EXPECT_EQ(tail(bytes, 2), nibbles(q));
}

TEST(QuantizeGguf, Q4_1ScaleAndMin) {
  std::vector<float> x(32);
  std::vector<int> q(32);
  for (int j = 0; j < 32; ++j) {
    x[static_cast<std::size_t>(j)] = static_cast<float>(j % 16) - 4.f;  // min -4, max 11: d = 1, m = -4
    q[static_cast<std::size_t>(j)] = j % 16;
  }
  const std::vector<std::uint8_t> bytes = quantize(GgufBlockType::q4_1, x);
  EXPECT_EQ(half_bits_at(bytes, 0), 0x3C00);
  EXPECT_EQ(half_bits_at(bytes, 2), 0xC400);
  EXPECT_EQ(tail(bytes, 4), nibbles(q));
}

TEST(QuantizeGguf, NaNFollowsGgmlsComparisons) {
  // q8_0: ggml's MAX makes amax NaN at a NaN and the next value restarts it. Last in the block: d
  // NaN (0x7E00), every quant int8(NaN) = 0.
  std::vector<float> x(32, 1.f);
  x[31] = kNaN;
  std::vector<std::uint8_t> bytes = quantize(GgufBlockType::q8_0, x);
  EXPECT_EQ(half_bits_at(bytes, 0), 0x7E00);
  EXPECT_EQ(tail(bytes, 2), std::vector<std::uint8_t>(32, 0));
  // In the middle: the max before it is forgotten (127 at 5), the one after it counts (63.5 at
  // 20): d = 0.5, and 127 x 2 = 254 converts to int8 as its low byte, -2.
  std::fill(x.begin(), x.end(), 0.5f);
  x[5] = 127.f;
  x[10] = kNaN;
  x[20] = 63.5f;
  bytes = quantize(GgufBlockType::q8_0, x);
  EXPECT_EQ(half_bits_at(bytes, 0), 0x3800);
  for (int j = 0; j < 32; ++j) {
    const int expected = j == 5 ? -2 : j == 10 ? 0 : j == 20 ? 127 : 1;
    EXPECT_EQ(static_cast<std::int8_t>(bytes[2 + static_cast<std::size_t>(j)]), expected) << "element " << j;
  }
  // q4_0 and q4_1 never let a NaN into their max/min; its own quant is 0.
  std::fill(x.begin(), x.end(), 0.f);
  x[0] = kNaN;
  x[1] = -8.f;
  std::vector<int> q(32, 8);
  q[0] = 0;
  q[1] = 0;
  bytes = quantize(GgufBlockType::q4_0, x);
  EXPECT_EQ(half_bits_at(bytes, 0), 0x3C00);
  EXPECT_EQ(tail(bytes, 2), nibbles(q));
  for (int j = 0; j < 32; ++j) {
    x[static_cast<std::size_t>(j)] = static_cast<float>(j % 16);
    q[static_cast<std::size_t>(j)] = j % 16;
  }
  x[2] = kNaN;
  q[2] = 0;
  bytes = quantize(GgufBlockType::q4_1, x);
  EXPECT_EQ(half_bits_at(bytes, 0), 0x3C00);
  EXPECT_EQ(half_bits_at(bytes, 2), 0x0000);
  EXPECT_EQ(tail(bytes, 4), nibbles(q));
  // A block of NaN only: q8_0 d NaN; q4_0 max stays 0 (d = -0); q4_1 min and max keep FLT_MAX and
  // -FLT_MAX (d = -2 FLT_MAX / 15 = -Inf, m = FLT_MAX -> +Inf in half); every quant 0.
  const std::vector<float> nans(32, kNaN);
  bytes = quantize(GgufBlockType::q8_0, nans);
  EXPECT_EQ(half_bits_at(bytes, 0), 0x7E00);
  EXPECT_EQ(tail(bytes, 2), std::vector<std::uint8_t>(32, 0));
  bytes = quantize(GgufBlockType::q4_0, nans);
  EXPECT_EQ(half_bits_at(bytes, 0), 0x8000);
  EXPECT_EQ(tail(bytes, 2), std::vector<std::uint8_t>(16, 0));
  bytes = quantize(GgufBlockType::q4_1, nans);
  EXPECT_EQ(half_bits_at(bytes, 0), 0xFC00);
  EXPECT_EQ(half_bits_at(bytes, 2), 0x7C00);
  EXPECT_EQ(tail(bytes, 4), std::vector<std::uint8_t>(16, 0));
}

TEST(QuantizeGguf, InfinityMakesTheScaleInfiniteAndTheQuantsFlat) {
  std::vector<float> x(32, 1.f);
  x[4] = kInf;  // q8_0: d = Inf, id = 0: every quant 0
  std::vector<std::uint8_t> bytes = quantize(GgufBlockType::q8_0, x);
  EXPECT_EQ(half_bits_at(bytes, 0), 0x7C00);
  EXPECT_EQ(tail(bytes, 2), std::vector<std::uint8_t>(32, 0));
  x[4] = -kInf;  // q4_0: max = -Inf, d = +Inf, id = 0: finite values 8, the Inf int8(NaN) = 0
  std::vector<int> q(32, 8);
  q[4] = 0;
  bytes = quantize(GgufBlockType::q4_0, x);
  EXPECT_EQ(half_bits_at(bytes, 0), 0x7C00);
  EXPECT_EQ(tail(bytes, 2), nibbles(q));
  // q4_1: min = -Inf, d = Inf, m = -Inf; x - min = Inf, times 0: NaN, quant 0.
  bytes = quantize(GgufBlockType::q4_1, x);
  EXPECT_EQ(half_bits_at(bytes, 0), 0x7C00);
  EXPECT_EQ(half_bits_at(bytes, 2), 0xFC00);
  EXPECT_EQ(tail(bytes, 4), std::vector<std::uint8_t>(16, 0));
  // +Inf only: q4_1's min never leaves FLT_MAX (Inf < FLT_MAX is false), stored as +Inf.
  bytes = quantize(GgufBlockType::q4_1, std::vector<float>(32, kInf));
  EXPECT_EQ(half_bits_at(bytes, 0), 0x7C00);
  EXPECT_EQ(half_bits_at(bytes, 2), 0x7C00);
  EXPECT_EQ(tail(bytes, 4), std::vector<std::uint8_t>(16, 0));
}

TEST(QuantizeGguf, SubnormalsAreNotFlushed) {
  // bf16 subnormals k x 2^-133: q8_0's d = 2^-128 / 127 is a float subnormal whose reciprocal
  // overflows: id = Inf, every product Inf, every quant 0; d underflows to 0 in half.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[static_cast<std::size_t>(j)] = std::ldexp(static_cast<float>(j + 1), -133);
  EXPECT_EQ(quantize(GgufBlockType::q8_0, x), std::vector<std::uint8_t>(34, 0));
  // amax = 2^-120: d = 2^-120 / 127 is subnormal, 1 / d still finite: the quants are the usual ones.
  std::fill(x.begin(), x.end(), std::ldexp(1.f, -122));
  x[0] = std::ldexp(1.f, -120);
  const std::vector<std::uint8_t> bytes = quantize(GgufBlockType::q8_0, x);
  EXPECT_EQ(half_bits_at(bytes, 0), 0x0000);
  EXPECT_EQ(static_cast<std::int8_t>(bytes[2]), 127);
  for (int j = 1; j < 32; ++j) EXPECT_EQ(static_cast<std::int8_t>(bytes[2 + static_cast<std::size_t>(j)]), 32);  // 31.75
  // q4_0 at a normal d too small for half: quants as usual, d stored as 0.
  std::fill(x.begin(), x.end(), std::ldexp(1.f, -121));
  x[0] = -std::ldexp(1.f, -120);  // d = 2^-123, id = 2^123: -8 -> 0, 4 -> 12
  std::vector<int> q(32, 12);
  q[0] = 0;
  const std::vector<std::uint8_t> q4 = quantize(GgufBlockType::q4_0, x);
  EXPECT_EQ(half_bits_at(q4, 0), 0x0000);
  EXPECT_EQ(tail(q4, 2), nibbles(q));
}

// Quantize, then decode with the GEMV's reference decoder: within ggml's bounds (half a step, q4_0's
// clamped top value a whole step) plus the rounding of d and m to half.
TEST(QuantizeGguf, RoundTripWithinTheFormatsErrorBound) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> value(-1.f, 1.f);
  std::uniform_int_distribution<int> exponent(-12, 8);
  constexpr std::size_t kBlocks = 2000;
  std::vector<float> x(kBlocks * 32);
  for (std::size_t b = 0; b < kBlocks; ++b) {
    const float scale = std::ldexp(1.f, exponent(rng));
    const float offset = b % 3 == 0 ? value(rng) * scale * 2.f : 0.f;  // q4_1's min away from 0
    for (int j = 0; j < 32; ++j)
      x[b * 32 + static_cast<std::size_t>(j)] =
          __bfloat162float(__float2bfloat16(value(rng) * scale + offset));
  }
  for (const GgufBlockType type : kTypes) {
    const std::vector<std::uint8_t> bytes = quantize(type, x);
    ASSERT_EQ(bytes.size(), kBlocks * static_cast<std::size_t>(gguf_block_bytes(type)));
    const std::vector<double> decoded = decode_gguf_blocks(type, bytes.data(), kBlocks);
    for (std::size_t b = 0; b < kBlocks; ++b) {
      const float* block = x.data() + b * 32;
      const auto [lo, hi] = std::minmax_element(block, block + 32);
      const double amax = std::max(std::fabs(*lo), std::fabs(*hi));
      const double step = type == GgufBlockType::q8_0   ? amax / 127.0
                          : type == GgufBlockType::q4_0 ? amax / 8.0
                                                        : (static_cast<double>(*hi) - *lo) / 15.0;
      // Half a step (q4_0: a whole one at the clamped end), the half rounding of d (relative, or
      // half a subnormal step of half) over up to 128 steps, and of m.
      const double half_error = std::ldexp(1.0, -11), half_subnormal_error = std::ldexp(1.0, -25);
      const double bound = (type == GgufBlockType::q4_0 ? 1.0 : 0.5) * step +
                           128.0 * (step * half_error + half_subnormal_error) +
                           std::fabs(static_cast<double>(*lo)) * half_error + half_subnormal_error + 1e-12;
      for (int j = 0; j < 32; ++j) {
        const double error = std::fabs(decoded[b * 32 + static_cast<std::size_t>(j)] - block[j]);
        ASSERT_LE(error, bound) << "ggml type " << static_cast<int>(type) << ", block " << b << ", element " << j;
      }
    }
  }
}

TEST(QuantizeGguf, Bf16OverloadWidensExactly) {
  std::vector<__nv_bfloat16> x(96);
  std::vector<float> widened(96);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = __float2bfloat16(std::sin(static_cast<float>(i)) * 3.f);
    widened[i] = __bfloat162float(x[i]);
  }
  for (const GgufBlockType type : kTypes)
    EXPECT_EQ(quantize_gguf_on_host(type, x.data(), x.size()), quantize(type, widened));
}

TEST(QuantizeGguf, HostReferenceRefusesPartialBlocks) {
  const std::vector<float> x(48, 1.f);
  EXPECT_THROW(quantize_gguf_on_host(GgufBlockType::q8_0, x.data(), x.size()), Error);
  EXPECT_THROW(quantize_gguf_on_host(static_cast<GgufBlockType>(1), x.data(), 32), Error);
}

// The entry's checks throw before any CUDA call (host pointers stand in for device ones here).
TEST(QuantizeGguf, EntryRefusesBadArguments) {
  alignas(16) static __nv_bfloat16 x[64];
  alignas(16) static std::uint8_t out[64];
  QuantizeGgufArgs good;
  good.rows = 1;
  good.k = 32;
  good.x = x;
  good.out = out;
  EXPECT_NO_THROW(check_quantize_gguf_args(good));
  auto refused = [](QuantizeGgufArgs args, const std::string& words) {
    try {
      check_quantize_gguf_args(args);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  QuantizeGgufArgs a = good;
  a.k = 100;
  refused(a, "multiple of 32 (got 100)");
  a.k = 0;
  refused(a, "multiple of 32 (got 0)");
  a = good;
  a.rows = 0;
  refused(a, "rows must be at least 1 (got 0)");
  a = good;
  a.x = nullptr;
  refused(a, "x is null");
  a = good;
  a.out = nullptr;
  refused(a, "out is null");
  a = good;
  a.out = out + 2;
  refused(a, "16-byte aligned");
  a = good;
  a.type = static_cast<GgufBlockType>(1);
  refused(a, "is not q4_0");
  EXPECT_THROW(quantize_gguf(a, nullptr), Error);
}

TEST(QuantizeGguf, OpProblemsAndShapeRule) {
  const OpSpec op = make_quantize_gguf_op();
  EXPECT_EQ(quantize_gguf_shape_error(op.problem({4, 4096}, DType::bf16, {{"ggml_type", 3.0}})), "");
  EXPECT_NE(quantize_gguf_shape_error(op.problem({4, 100}, DType::bf16)).find("multiple of 32 (got 100)"),
            std::string::npos);
  EXPECT_NE(quantize_gguf_shape_error(op.problem({4, 64}, DType::bf16, {{"ggml_type", 1.0}})), "");
  // Odd row counts and K of one, three and 129 blocks, in every type.
  std::set<std::int64_t> rows, ks;
  std::set<double> types;
  for (const Problem& p : op.conformance_problems) {
    if (!quantize_gguf_shape_error(p).empty()) continue;
    rows.insert(p.dims[0]);
    ks.insert(p.dims[1]);
    types.insert(p.param("ggml_type"));
  }
  for (const std::int64_t r : {1, 3, 17, 1000}) EXPECT_EQ(rows.count(r), 1u) << r << " rows";
  for (const std::int64_t k : {32, 96, 4128}) EXPECT_EQ(ks.count(k), 1u) << "K " << k;
  EXPECT_EQ(types, (std::set<double>{2.0, 3.0, 8.0}));
  EXPECT_EQ(quantize_gguf_refusals(), std::vector<std::string>{"5x100 bf16"});
  // Llama-3-8B's projections and output projection, and a small one.
  std::set<std::string> shapes;
  for (const Problem& p : op.bench_problems) shapes.insert(p.shape());
  for (const char* shape : {"4096x4096", "14336x4096", "4096x14336", "128256x4096", "16x4096"})
    EXPECT_EQ(shapes.count(shape), 1u) << shape;
}

TEST(QuantizeGguf, RungIsRegistered) {
  const Registry& registry = stage3_test_registry();
  ASSERT_TRUE(registry.has_op(kQuantizeGgufOp));
  const KernelEntry& rung = registry.kernel("stage3/quantize_gguf/01_quad_per_block");
  EXPECT_EQ(rung.op, kQuantizeGgufOp);
  EXPECT_EQ(rung.rung, 1);
  EXPECT_EQ(rung.min_compute_capability, 80);
  EXPECT_EQ(rung.report, "stage3-quant");
  EXPECT_EQ(rung.refuses, quantize_gguf_refusals());
}

}  // namespace
}  // namespace kc::stage3
