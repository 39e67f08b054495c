// The INT8 GEMM ops' host side: their operands and outputs, refusals (K within the exact 32-bit
// sums, K % 16 for the rung), the problems, the FLOP and byte counts, and the rung's registration
// in both ops. The kernel's conformance and the negative controls run on an H100/H200
// (tests/conformance, tests/harness: ctest -R Int8).
//   ctest --test-dir build/ci -R Int8Gemm
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/error.hpp"
#include "kc/stage3/int8_gemm.hpp"
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
