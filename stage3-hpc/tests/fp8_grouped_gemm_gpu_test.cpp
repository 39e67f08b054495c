// The FP8 grouped GEMM's operands and baseline on the GPU: the operands have the padded rows' shapes,
// and the baseline (s_A gathered per expert, then cuBLASLt's FP8 block-scaled matmul per expert that
// has rows) passes the op's check on every conformance problem it runs and on the DeepSeek-like
// benchmark problem (64 experts, many shapes), so that what the rungs are timed against is right.
// The rung is checked by the conformance tests (ctest --test-dir build/ci -R fp8_grouped_gemm), its
// negative control by tests/harness/negative_controls_test.cpp. Skips without a GPU; the baseline's
// checks skip where cuBLASLt has no block scaling (before Hopper, or before CUDA 12.9).
//   ctest --test-dir build/ci -R Fp8GroupedGemmGpu
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/check.hpp"
#include "kc/stage3/fp8_grouped_gemm.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

TEST(Fp8GroupedGemmGpu, OperandsHaveThePaddedRowsAndTheScaleLayouts) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec op = make_fp8_grouped_gemm_op();
  // 8, 4, 128, 4, 0, 16 rows (160); K = 272: 3 K blocks; N = 264: 3 N blocks.
  const Problem padded =
      op.problem({6, 264, 272}, DType::f8e4m3, {{"tokens", 150}, {"skew", 3}, {"routing_seed", 2}, {"row_align", 4}});
  Operands o = op.make_operands(padded, 1, context);
  EXPECT_EQ(o["A"].shape, (std::vector<std::int64_t>{160, 272}));
  EXPECT_EQ(o["B"].shape, (std::vector<std::int64_t>{6, 264, 272}));
  EXPECT_EQ(o["scale_a"].shape, (std::vector<std::int64_t>{3, 160}));
  EXPECT_EQ(o["scale_b"].shape, (std::vector<std::int64_t>{6, 3, 3}));
  EXPECT_EQ(o["C"].shape, (std::vector<std::int64_t>{160, 264}));
  EXPECT_EQ(o["A"].dtype, DType::f8e4m3);
  EXPECT_EQ(o["scale_a"].dtype, DType::f32);
  EXPECT_EQ(o["C"].dtype, DType::bf16);
  // 13 rows: s_A's rows are 16 long (a K block's scales start 16-byte aligned).
  const Problem sparse = op.problem({8, 255, 1040}, DType::f8e4m3, {{"tokens", 13}, {"skew", 2}, {"routing_seed", 5}});
  Operands s = op.make_operands(sparse, 1, context);
  EXPECT_EQ(s["A"].shape, (std::vector<std::int64_t>{13, 1040}));
  EXPECT_EQ(s["scale_a"].shape, (std::vector<std::int64_t>{9, 16}));
  EXPECT_EQ(s["scale_b"].shape, (std::vector<std::int64_t>{8, 2, 9}));
}

TEST(Fp8GroupedGemmGpu, TheBaselinePassesEveryConformanceProblemItRunsAndADeepSeekLayer) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec op = make_fp8_grouped_gemm_op();
  std::vector<Problem> problems = op.conformance_problems;
  problems.push_back(
      op.problem({64, 1408, 2048}, DType::f8e4m3, {{"tokens", 1024}, {"skew", 1}, {"row_align", 4}}));
  int ran = 0;
  for (const Problem& p : problems) {
    const CheckOutcome baseline = check_baseline(op, p, 3, context);
    if (baseline.status == CheckOutcome::Status::unsupported) {
      // Refused by the op's own rules (K, N, rows per expert), or by cuBLASLt on this GPU.
      if (fp8_grouped_gemm_baseline_shape_error(p).empty()) {
        EXPECT_NE(baseline.detail.find("cuBLASLt does not run it"), std::string::npos) << p.label() << ": "
                                                                                        << baseline.detail;
      }
      continue;
    }
    ++ran;
    EXPECT_TRUE(baseline.passed()) << op.baseline_name << " at " << p.label() << ": " << baseline.detail;
  }
  if (ran == 0) GTEST_SKIP() << "cuBLASLt runs no FP8 block-scaled matmul on this GPU";
  EXPECT_GE(ran, 4);  // 16x384x512, 8x512x1024, 2x128x8192 and the DeepSeek layer
}

}  // namespace
}  // namespace kc::stage3
