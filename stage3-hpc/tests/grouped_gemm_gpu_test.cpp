// The grouped GEMM's baseline and peer on the GPU: cublasGemmGroupedBatchedEx and the loop of
// cublasGemmEx must pass the op's check on every conformance problem (experts with 0 and 1 rows,
// N odd, K not a multiple of 8), so that what the rungs are timed against is right everywhere the
// rungs are. The rungs themselves are checked by the conformance tests
// (ctest --test-dir build/ci -R grouped_gemm), the routing mistakes by the negative controls
// (tests/harness/negative_controls_test.cpp). Skips without a GPU.
//   ctest --test-dir build/ci -R GroupedGemmGpu
#include <gtest/gtest.h>

#include "kc/common/check.hpp"
#include "kc/stage3/grouped_gemm.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

TEST(GroupedGemmGpu, TheBaselineAndThePeerPassEveryConformanceProblem) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec op = make_grouped_gemm_op();
  ASSERT_EQ(op.peers.size(), 1u);
  for (const Problem& p : op.conformance_problems) {
    const CheckOutcome baseline = check_baseline(op, p, 3, context);
    EXPECT_TRUE(baseline.passed()) << op.baseline_name << " at " << p.label() << ": " << baseline.detail;
    const CheckOutcome peer = check_run(op, op.peers[0].run, p, 3, context);
    EXPECT_TRUE(peer.passed()) << op.peers[0].name << " at " << p.label() << ": " << peer.detail;
  }
}

}  // namespace
}  // namespace kc::stage3
