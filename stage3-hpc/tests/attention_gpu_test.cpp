// The attention_fwd op on the GPU: its FP64 device reference agrees with the host reference, the
// unfused cuBLAS path (the baseline where the build has no cuDNN) passes the op's check on every
// conformance problem, and the check rejects that same path run with a wrong scale or without its
// causal mask. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kc/common/check.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/registry.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/register.hpp"
#include "attention_test_support.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {


const OpSpec& attention_op() {
  static const Registry registry = [] {
    Registry r;
    register_kernels(r);
    return r;
  }();
  return registry.op(kAttentionFwdOp);
}

TEST(AttentionGpu, DeviceReferenceAgreesWithTheHostReference) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec& op = attention_op();
  for (const DType dtype : {DType::bf16, DType::f16})
    for (const double causal : {0.0, 1.0})
      for (const std::vector<std::int64_t>& dims :
           {std::vector<std::int64_t>{2, 4, 2, 77, 300, 64}, std::vector<std::int64_t>{1, 8, 1, 300, 77, 128}}) {
        const Problem problem = op.problem(dims, dtype, {{"causal", causal}});
        const Operands operands = op.make_operands(problem, 7, context);
        testing_support::expect_references_agree(op, problem, operands, context);
      }
}

TEST(AttentionGpu, TheUnfusedBaselinePassesEveryConformanceProblem) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec& op = attention_op();
  DeviceScratch scratch;
  const auto unfused = [&](const Problem& p, Operands& o, Context& c) { attention_unfused(p, o, c, scratch); };
  for (const Problem& problem : op.conformance_problems) {
    const CheckOutcome outcome = check_run(op, unfused, problem, 11, context);
    EXPECT_TRUE(outcome.passed()) << problem.label() << ": " << outcome.detail;
  }
}

// The tolerance must not let a realistic bug through: the unfused path run with another problem's
// parameters (a scale 25% off; the causal mask dropped) is judged against the right reference.
TEST(AttentionGpu, TheCheckRejectsAWrongScaleAndAMissingMask) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec& op = attention_op();
  DeviceScratch scratch;
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const Problem problem = op.problem({1, 8, 2, 1000, 1000, 128}, dtype, {{"causal", 1.0}});
    Problem wrong_scale = problem;
    wrong_scale.set("scale", 1.25 * attention_scale(problem));
    Problem no_mask = problem;
    no_mask.set("causal", 0.0);
    for (const Problem* wrong : {&wrong_scale, &no_mask}) {
      const CheckOutcome outcome = check_run(
          op, [&](const Problem&, Operands& operands, Context& c) { attention_unfused(*wrong, operands, c, scratch); },
          problem, 5, context);
      EXPECT_FALSE(outcome.passed()) << problem.label() << " computed as " << wrong->label()
                                     << " passed: " << outcome.detail;
    }
  }
}

}  // namespace
}  // namespace kc::stage3
