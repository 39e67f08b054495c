// The grouped GEMM's baseline and peers on the GPU: the faster of the two cuBLAS paths (chosen per
// problem), cublasGemmGroupedBatchedEx and the loop of cublasGemmEx must pass the op's check on every conformance problem (experts with 0 and 1 rows,
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
  ASSERT_EQ(op.peers.size(), 2u);
  for (const Problem& p : op.conformance_problems) {
    // The baseline's first call on a problem times both paths and keeps the faster: the check
    // runs after that choice, on whichever path it made.
    const CheckOutcome baseline = check_baseline(op, p, 3, context);
    EXPECT_TRUE(baseline.passed()) << op.baseline_name << " at " << p.label() << ": " << baseline.detail;
    for (const OpSpec::Peer& peer : op.peers) {
      const CheckOutcome outcome = check_run(op, peer.run, p, 3, context);
      EXPECT_TRUE(outcome.passed()) << peer.name << " at " << p.label() << ": " << outcome.detail;
    }
  }
}

}  // namespace
}  // namespace kc::stage3
