// The INT8 GEMM ops' host side: their operands and outputs, refusals (K within the exact 32-bit
// sums, K % 16 for the rung), the problems, the FLOP and byte counts, and the rung's registration
// in both ops. The kernel's conformance and the negative controls run on an H100/H200
// (tests/conformance, tests/harness: ctest -R Int8).
//   ctest --test-dir build/ci -R Int8Gemm
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kc/common/compare.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/int8_gemm.hpp"
#include "src/int8_gemm_edges.hpp"
#include "stage3_test_registry.hpp"

namespace kc::stage3 {
namespace {

TEST(Int8GemmOp, TheRawOpWritesS32AndTheDequantizingOpBf16WithRowAndColumnScales) {
  const OpSpec raw = make_int8_gemm_op();
  const OpSpec dequant = make_int8_gemm_dequant_op();
  EXPECT_EQ(raw.math, MathUnit::int8_tensor);
  EXPECT_EQ(raw.dtypes, std::vector<DType>{DType::i8});
  const Problem p = raw.problem({300, 1000, 1040}, DType::i8);
  // A and B one byte a value; C32 four bytes.
  EXPECT_DOUBLE_EQ(raw.work(p).bytes, 300.0 * 1040 + 1000.0 * 1040 + 4.0 * 300 * 1000);
  EXPECT_DOUBLE_EQ(raw.work(p).flops, 2.0 * 300 * 1000 * 1040);
  // C two bytes a value, s_A [M] and s_B [N] four.
  const Problem q = dequant.problem({300, 1000, 1040}, DType::i8);
  EXPECT_DOUBLE_EQ(dequant.work(q).bytes, 300.0 * 1040 + 1000.0 * 1040 + 2.0 * 300 * 1000 + 4.0 * 300 + 4.0 * 1000);
  EXPECT_NE(raw.baseline_name.find("cuBLASLt INT8"), std::string::npos) << raw.baseline_name;
  EXPECT_NE(dequant.baseline_name.find("dequantizing kernel"), std::string::npos) << dequant.baseline_name;
}

TEST(Int8GemmOp, RefusesWhatItDoesNotDefineWithAReason) {
  const OpSpec op = make_int8_gemm_op();
  EXPECT_EQ(int8_gemm_problem_error(op.problem({64, 64, 64}, DType::i8)), "");
  EXPECT_EQ(int8_gemm_problem_error(op.problem({1, 1, kInt8MaxK}, DType::i8)), "");
  const std::string long_k = int8_gemm_problem_error(op.problem({1, 1, kInt8MaxK + 1}, DType::i8));
  EXPECT_NE(long_k.find("overflow"), std::string::npos) << long_k;
  EXPECT_NE(int8_gemm_problem_error(op.problem({65536, 65536, 16}, DType::i8)).find("2^31 - 1"), std::string::npos);
  const std::string odd_k = int8_gemm_rung_shape_error(op.problem({64, 64, 100}, DType::i8));
  EXPECT_NE(odd_k.find("multiple of 16"), std::string::npos) << odd_k;
  EXPECT_NE(odd_k.find("100"), std::string::npos) << odd_k;
  // 131071 products of 128 x 128 still fit in a signed 32-bit sum; one more might not.
  EXPECT_LE(static_cast<long long>(kInt8MaxK) * 128 * 128, 2147483647LL);
  EXPECT_GT(static_cast<long long>(kInt8MaxK + 1) * 128 * 128, 2147483647LL);
}

TEST(Int8GemmOp, BenchAndConformanceProblemsCoverTheEdges) {
  for (const OpSpec& op : {make_int8_gemm_op(), make_int8_gemm_dequant_op()}) {
    std::vector<std::string> bench;
    for (const Problem& p : op.bench_problems) bench.push_back(p.label());
    for (const char* expected : {"4096x4096x4096 i8", "8192x8192x8192 i8", "8192x14336x4096 i8", "8192x4096x14336 i8"})
      EXPECT_NE(std::find(bench.begin(), bench.end(), expected), bench.end()) << expected;
    int odd_n = 0, k_tail = 0, long_k = 0, below_a_tile = 0;
    std::vector<std::string> refused;
    for (const Problem& p : op.conformance_problems) {
      ASSERT_EQ(int8_gemm_problem_error(p), "") << p.label();
      if (!int8_gemm_rung_shape_error(p).empty()) refused.push_back(p.label());
      odd_n += p.dims[1] % 2;
      k_tail += p.dims[2] % 128 != 0 && p.dims[2] % 16 == 0;
      long_k += p.dims[2] >= 8192;
      below_a_tile += p.dims[0] < 128 && p.dims[1] < 256;
    }
    EXPECT_GE(odd_n, 6);
    EXPECT_GE(k_tail, 8);
    EXPECT_GE(long_k, 1);
    EXPECT_GE(below_a_tile, 4);
    EXPECT_EQ(refused, int8_gemm_rung_refusals());
  }
}

// The scale edge cases (src/int8_gemm_edges.hpp): every conformance problem holds them, no bench
// problem does, each scale is of its kind, one-row and one-column problems keep that line plain,
// and the same seed draws the same bits.
TEST(Int8GemmDequantScales, ConformanceProblemsHoldEveryEdgeKindAndBenchProblemsNone) {
  const OpSpec op = make_int8_gemm_dequant_op();
  const auto in_range = [](float s) { return s >= 0.25f && s <= 4.0f; };
  for (const Problem& p : op.bench_problems) {
    EXPECT_GT(p.dims[0] * p.dims[1], std::int64_t{1} << 23) << p.label();
    EXPECT_FALSE(int8_scales_have_edges(p)) << p.label();
    for (const bool of_a : {true, false})
      for (const float s : int8_gemm_scales(p, of_a, 11)) ASSERT_TRUE(in_range(s)) << p.label() << ": " << s;
  }
  int seen[2][5] = {};  // [of_a][kind]
  for (const Problem& p : op.conformance_problems) {
    EXPECT_TRUE(int8_scales_have_edges(p)) << p.label();
    for (const bool of_a : {true, false}) {
      const std::vector<float> scales = int8_gemm_scales(p, of_a, 5);
      const std::int64_t count = of_a ? p.dims[0] : p.dims[1];
      ASSERT_EQ(static_cast<std::int64_t>(scales.size()), count) << p.label();
      int non_finite = 0;
      for (std::int64_t i = 0; i < count; ++i) {
        const float s = scales[static_cast<std::size_t>(i)];
        const Int8ScaleKind kind = int8_scale_kind(p, of_a, i);
        ++seen[of_a][static_cast<int>(kind)];
        non_finite += !std::isfinite(s);
        switch (kind) {
          case Int8ScaleKind::plain: EXPECT_TRUE(in_range(s)) << p.label() << " " << i << ": " << s; break;
          case Int8ScaleKind::zero: EXPECT_EQ(s, 0.0f) << p.label() << " " << i; break;
          case Int8ScaleKind::subnormal:
            EXPECT_EQ(std::fpclassify(s), FP_SUBNORMAL) << p.label() << " " << i;
            EXPECT_GE(s, std::ldexp(1.0f, -130)) << p.label() << " " << i;
            EXPECT_LT(s, std::ldexp(1.0f, -127)) << p.label() << " " << i;
            break;
          case Int8ScaleKind::infinite: EXPECT_EQ(s, std::numeric_limits<float>::infinity()) << p.label(); break;
          case Int8ScaleKind::nan: EXPECT_TRUE(std::isnan(s)) << p.label(); break;
        }
      }
      // At most one Inf and one NaN line a side; none where that side is a single line.
      EXPECT_EQ(non_finite, count >= 4 ? 2 : 0) << p.label() << (of_a ? " s_A" : " s_B");
      if (count == 1) {
        EXPECT_TRUE(in_range(scales[0])) << p.label();
      }
      const std::vector<float> again = int8_gemm_scales(p, of_a, 5);
      EXPECT_EQ(std::memcmp(again.data(), scales.data(), scales.size() * sizeof(float)), 0) << p.label();
    }
  }
  for (const bool of_a : {true, false})
    for (int kind = 0; kind < 5; ++kind) EXPECT_GE(seen[of_a][kind], 1) << "of_a " << of_a << ", kind " << kind;
}

// Host inputs of a problem of the dequantizing op: A and B integers in [-127, 127] from `seed`, the
// scales of src/int8_gemm_edges.hpp.
HostTensors dequant_inputs(const Problem& p, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int> value(-127, 127);
  HostTensors in;
  for (const char* name : {"A", "B"}) {
    std::vector<double>& v = in[name];
    v.resize(static_cast<std::size_t>(p.dims[name[0] == 'A' ? 0 : 1] * p.dims[2]));
    for (double& x : v) x = value(random);
  }
  for (const bool of_a : {true, false}) {
    const std::vector<float> scales = int8_gemm_scales(p, of_a, seed + (of_a ? 1 : 2));
    in[of_a ? "scale_a" : "scale_b"] = std::vector<double>(scales.begin(), scales.end());
  }
  return in;
}

// The reference's classes where a scale is 0, NaN or +Inf: NaN lines, +-Inf by the sign of the sum
// where the sum and the other scale are nonzero, NaN where either is 0, +-0 in zero lines; every
// other value the sum times both scales.
TEST(Int8GemmDequantReference, NonFiniteAndZeroScalesGiveTheClassesOfTheDefinition) {
  const OpSpec op = make_int8_gemm_dequant_op();
  const Problem p = op.problem({65, 129, 32}, DType::i8);
  HostTensors in = dequant_inputs(p, 3);
  // Row 0 of A zero: its sums are 0; with s_A[0] = +Inf every C in that row is NaN.
  std::fill(in["A"].begin(), in["A"].begin() + 32, 0.0);
  in["scale_a"][0] = std::numeric_limits<double>::infinity();
  const std::vector<double> c = int8_gemm_host_reference(p, in).at("C");
  const std::vector<double> sums = int8_gemm_host_reference(make_int8_gemm_op().problem({65, 129, 32}, DType::i8), in).at("C32");
  ASSERT_EQ(sums.size(), c.size());
  const std::vector<double>& sa = in.at("scale_a");
  const std::vector<double>& sb = in.at("scale_b");
  int inf = 0, nan_from_zero = 0;
  for (std::int64_t r = 0; r < 65; ++r)
    for (std::int64_t col = 0; col < 129; ++col) {
      const std::size_t i = static_cast<std::size_t>(r * 129 + col);
      const double a = sa[static_cast<std::size_t>(r)], b = sb[static_cast<std::size_t>(col)], sum = sums[i];
      SCOPED_TRACE(::testing::Message() << "row " << r << ", column " << col << ", sum " << sum << ", s_A " << a
                                      << ", s_B " << b << ", C " << c[i]);
      if (std::isnan(a) || std::isnan(b)) {
        EXPECT_TRUE(std::isnan(c[i]));
      } else if (std::isinf(a) || std::isinf(b)) {
        if (sum == 0.0 || a == 0.0 || b == 0.0) {
          EXPECT_TRUE(std::isnan(c[i]));
          ++nan_from_zero;
        } else {
          EXPECT_EQ(c[i], sum > 0.0 ? HUGE_VAL : -HUGE_VAL);
          ++inf;
        }
      } else {
        EXPECT_EQ(c[i], sum * a * b);
        if (a == 0.0 || b == 0.0) {
          EXPECT_EQ(c[i], 0.0);
        }
      }
    }
  EXPECT_GT(inf, 100);
  EXPECT_GT(nan_from_zero, 129 + 16);  // row 0, and the zero scales meeting the infinite line
}

// Whether a kernel that applies both scales in FP32 matches the reference on the edge cases: the
// epilogue of rungs 01-04 and the baseline's dequantizing kernel compute bf16((float(sum) s_A) s_B);
// a kernel computing float(sum) (s_A s_B) must pass too (src/int8_gemm_edges.hpp says why), and
// one that flushes subnormal scales to 0 must fail. The CPU's FP32 multiplications round as the
// GPU's do (IEEE, subnormals kept: kc builds without -ftz).
enum class Epilogue { sum_times_a_then_b, sum_times_ab, flush_a, flush_b };

std::vector<double> emulated_epilogue(const Problem& p, const HostTensors& in, const std::vector<double>& sums,
                                      Epilogue epilogue) {
  const auto flushed = [](float s) { return std::fpclassify(s) == FP_SUBNORMAL ? 0.0f : s; };
  const std::int64_t m = p.dims[0], n = p.dims[1];
  std::vector<double> out(sums.size());
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t col = 0; col < n; ++col) {
      const std::size_t i = static_cast<std::size_t>(r * n + col);
      const float sum = static_cast<float>(static_cast<std::int32_t>(sums[i]));
      float a = static_cast<float>(in.at("scale_a")[static_cast<std::size_t>(r)]);
      float b = static_cast<float>(in.at("scale_b")[static_cast<std::size_t>(col)]);
      if (epilogue == Epilogue::flush_a) a = flushed(a);
      if (epilogue == Epilogue::flush_b) b = flushed(b);
      const float value = epilogue == Epilogue::sum_times_ab ? sum * (a * b) : sum * a * b;
      out[i] = static_cast<double>(__bfloat162float(__float2bfloat16_rn(value)));
    }
  return out;
}

TEST(Int8GemmDequantReference, BothOrdersOfTheScalesPassOnTheEdgeCasesAndAFlushFails) {
  const OpSpec op = make_int8_gemm_dequant_op();
  const OpSpec raw = make_int8_gemm_op();
  for (const Shape& dims : std::vector<Shape>{{65, 129, 272}, {17, 1, 32}, {1, 257, 144}, {1000, 17, 656}}) {
    const Problem p = op.problem(dims, DType::i8);
    const HostTensors in = dequant_inputs(p, 7);
    const std::vector<double> ref = int8_gemm_host_reference(p, in).at("C");
    const std::vector<double> sums = int8_gemm_host_reference(raw.problem(dims, DType::i8), in).at("C32");
    Accuracy accuracy;  // the op's (common/gemm.cpp): one rounding to bf16 of K FP32-summed terms
    accuracy.output = DType::bf16;
    accuracy.terms = static_cast<double>(dims[2]);
    for (const Epilogue e : {Epilogue::sum_times_a_then_b, Epilogue::sum_times_ab}) {
      const CompareResult result = compare(emulated_epilogue(p, in, sums, e).data(), ref.data(), ref.size(), accuracy);
      EXPECT_TRUE(result.passed) << p.label() << ", order " << static_cast<int>(e) << ": " << result.summary();
    }
    // A flushed scale shows where it meets the other side's +Inf line (0 x Inf = NaN, not +-Inf).
    const auto has = [&p](bool of_a, Int8ScaleKind kind) {
      for (std::int64_t i = 0; i < p.dims[of_a ? 0 : 1]; ++i)
        if (int8_scale_kind(p, of_a, i) == kind) return true;
      return false;
    };
    for (const Epilogue e : {Epilogue::flush_a, Epilogue::flush_b}) {
      const bool of_a = e == Epilogue::flush_a;
      const bool meets_inf = has(of_a, Int8ScaleKind::subnormal) && has(!of_a, Int8ScaleKind::infinite);
      const CompareResult result = compare(emulated_epilogue(p, in, sums, e).data(), ref.data(), ref.size(), accuracy);
      EXPECT_EQ(result.passed, !meets_inf) << p.label() << ", flush " << static_cast<int>(e) << ": "
                                           << result.summary();
    }
  }
}

// Every rung's launch checks its arguments first (check_int8_gemm_args): a bad argument is a
// kc::Error naming the rule, before any CUDA call. No GPU needed: the pointers are never read.
TEST(Int8GemmArgs, LaunchChecksNameTheRuleTheArgumentsBreak) {
  alignas(16) static std::int8_t a[64], b[64];
  alignas(16) static std::int32_t c32[4];
  alignas(16) static bf16 c[4];
  alignas(16) static float scales[4];
  Int8GemmArgs good;
  good.m = good.n = 2;
  good.k = 32;
  good.a = a;
  good.b = b;
  good.c32 = c32;
  EXPECT_NO_THROW(check_int8_gemm_args(good));
  const auto message = [](const Int8GemmArgs& args) {
    try {
      check_int8_gemm_args(args);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Int8GemmArgs odd_k = good;
  odd_k.k = 40;
  EXPECT_NE(message(odd_k).find("multiple of 16"), std::string::npos) << message(odd_k);
  Int8GemmArgs misaligned = good;
  misaligned.b = b + 1;
  EXPECT_NE(message(misaligned).find("16-byte aligned"), std::string::npos) << message(misaligned);
  Int8GemmArgs two_outputs = good;
  two_outputs.c = c;
  EXPECT_NE(message(two_outputs).find("exactly one output"), std::string::npos) << message(two_outputs);
  Int8GemmArgs no_scales = good;
  no_scales.c32 = nullptr;
  no_scales.c = c;
  no_scales.scale_a = scales;
  EXPECT_NE(message(no_scales).find("both scales"), std::string::npos) << message(no_scales);
  no_scales.scale_b = scales;
  EXPECT_NO_THROW(check_int8_gemm_args(no_scales));
  Int8GemmArgs empty = good;
  empty.m = 0;
  EXPECT_NE(message(empty).find("empty problem"), std::string::npos) << message(empty);
}

TEST(Int8GemmLadder, RegistersRungsOneAndTwoForHopperOnlyAndRungThreeFromSm80) {
  const Registry& registry = stage3_test_registry();
  for (const char* op : {kInt8GemmOp, kInt8GemmDequantOp})
  for (const char* name : {"01_tma_wgmma", "02_tma_store", "03_mma_sync", "04_ping_pong"}) {
    const KernelEntry& rung = registry.kernel(std::string("stage3/") + op + "/" + name);
    const bool hopper = std::string(name) != "03_mma_sync";
    EXPECT_EQ(rung.rung, name[1] - '0');
    EXPECT_EQ(rung.report_group(), kInt8GemmReport);
    EXPECT_EQ(rung.dtypes, std::vector<DType>{DType::i8});
    EXPECT_EQ(rung.min_compute_capability, hopper ? 90 : 80);
    if (hopper)
      EXPECT_EQ(rung.max_compute_capability, 90);
    else
      EXPECT_EQ(rung.max_compute_capability, 0) << "mma.sync runs on every GPU from sm_80 on";
    EXPECT_EQ(rung.refuses, int8_gemm_rung_refusals());
    const Problem odd = registry.op(op).problem({64, 64, 100}, DType::i8);
    EXPECT_NE(unsupported_reason(registry, rung, odd, nullptr).find("multiple of 16"), std::string::npos);
  }
}

}  // namespace
}  // namespace kc::stage3
