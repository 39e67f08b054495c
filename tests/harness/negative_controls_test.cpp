// A test of the tests: every deliberately wrong kernel must be caught by the same checks the real
// kernels pass. Skips without a GPU.
#include <gtest/gtest.h>

#include "kc/common/check.hpp"
#include "kc/testing/negative_controls.hpp"
#include "support/gpu_test.hpp"

namespace kc {
namespace {

using testing::shared_context;

const Registry& registry_with_controls() {
  static const Registry registry = [] {
    Registry r;
    testing::register_negative_controls(r);
    return r;
  }();
  return registry;
}

CheckOutcome check(const std::string& name, const Problem& problem) {
  const Registry& r = registry_with_controls();
  return check_kernel(r, r.kernel("stage1/sgemm/" + name), problem, 1, shared_context());
}

const Problem kOdd{"sgemm", {127, 129, 131}};
const Problem kTileMultiple{"sgemm", {64, 64, 64}};

TEST(NegativeControls, WritesNothingIsCaught) {
  KC_SKIP_WITHOUT_GPU();
  const CheckOutcome o = check("nc_writes_nothing", kOdd);
  EXPECT_EQ(o.status, CheckOutcome::Status::failed) << o.detail;
  EXPECT_NE(o.detail.find("16383 of 16383"), std::string::npos) << "every element unwritten: " << o.detail;
}

TEST(NegativeControls, SkippedEdgeTileIsCaughtOnOddShapesOnly) {
  KC_SKIP_WITHOUT_GPU();
  EXPECT_EQ(check("nc_skips_edge_tile", kOdd).status, CheckOutcome::Status::failed);
  // The flaw hides on tile multiples: this is why conformance uses odd shapes.
  const CheckOutcome hidden = check("nc_skips_edge_tile", kTileMultiple);
  EXPECT_TRUE(hidden.passed()) << hidden.detail;
}

TEST(NegativeControls, Fp16RoundingIsCaughtByTheFrobeniusBound) {
  KC_SKIP_WITHOUT_GPU();
  const CheckOutcome o = check("nc_rounds_through_fp16", Problem{"sgemm", {256, 256, 1024}});
  EXPECT_EQ(o.status, CheckOutcome::Status::failed) << o.detail;
  EXPECT_GT(o.worst_rel_frobenius, 1e-4) << o.detail;
}

TEST(NegativeControls, ASingleNaNIsCaught) {
  KC_SKIP_WITHOUT_GPU();
  const CheckOutcome o = check("nc_returns_nan", kOdd);
  EXPECT_EQ(o.status, CheckOutcome::Status::failed) << o.detail;
  EXPECT_NE(o.detail.find("1 of 16383"), std::string::npos) << o.detail;
}

TEST(NegativeControls, DroppedKStepIsCaught) {
  KC_SKIP_WITHOUT_GPU();
  EXPECT_EQ(check("nc_drops_last_k", kOdd).status, CheckOutcome::Status::failed);
}

TEST(NegativeControls, ReadingCWhenBetaIsZeroIsCaught) {
  KC_SKIP_WITHOUT_GPU();
  EXPECT_EQ(check("nc_reads_c_when_beta_zero", kOdd).status, CheckOutcome::Status::failed);
  // With beta != 0 the same kernel is right: only the BLAS rule for beta == 0 catches it.
  const CheckOutcome with_beta = check("nc_reads_c_when_beta_zero", Problem{"sgemm", {127, 129, 131}, 1.0, 0.5});
  EXPECT_TRUE(with_beta.passed()) << with_beta.detail;
}

TEST(NegativeControls, EveryControlFailsSomeConformanceProblem) {
  KC_SKIP_WITHOUT_GPU();
  const Registry& r = registry_with_controls();
  for (const auto& control : testing::negative_controls()) {
    int failures = 0;
    for (const Problem& p : r.op("sgemm").conformance_problems)
      failures += check_kernel(r, r.kernel(control.id), p, 3, shared_context()).status ==
                  CheckOutcome::Status::failed;
    EXPECT_GT(failures, 0) << control.id << " (" << control.flaw << ") slipped through every problem";
  }
}

}  // namespace
}  // namespace kc
