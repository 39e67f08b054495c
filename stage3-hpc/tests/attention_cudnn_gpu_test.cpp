// cuDNN SDPA as the attention_fwd baseline, on the GPU: it passes the op's check (O and LSE
// against the FP64 reference) on grouped heads, odd lengths, the causal mask with Sq < Sk and an
// explicit scale in bf16 and f16; it refuses what it cannot run (the causal mask with Sq > Sk,
// D not a multiple of 8) with a reason instead of failing; and the check rejects it when it runs
// another problem's parameters. Skips without a GPU, and without cuDNN in the build.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kc/common/check.hpp"
#include "kc/common/registry.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/attention_cudnn.hpp"
#include "attention_test_support.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

using testing_support::registered_attention_op;

#define KC_SKIP_WITHOUT_CUDNN() \
  if (!cudnn_attention_built()) GTEST_SKIP() << cudnn_attention_versions()

TEST(AttentionCudnnGpu, TheBaselineIsCudnnAndPassesTheCheck) {
  KC_SKIP_WITHOUT_GPU();
  KC_SKIP_WITHOUT_CUDNN();
  Context& context = testing::shared_context();
  const OpSpec& op = registered_attention_op();
  EXPECT_NE(op.baseline_name.find("cuDNN SDPA"), std::string::npos) << op.baseline_name;
  using P = ParamValues;
  struct Case {
    std::vector<std::int64_t> dims;
    P params;
  };
  const std::vector<Case> cases = {
      {{2, 8, 2, 77, 77, 128}, {}},                               // GQA 4:1, odd length
      {{1, 8, 1, 77, 77, 64}, {{"causal", 1.0}}},                 // MQA, causal, odd length
      {{2, 4, 1, 77, 1000, 64}, {{"causal", 1.0}}},               // causal with Sq < Sk (bottom-right)
      {{1, 4, 4, 1, 4097, 128}, {{"causal", 1.0}}},               // one query row (decode) over 4097 keys
      {{1, 2, 2, 1000, 300, 128}, {}},                            // Sq > Sk without the mask
      {{2, 4, 4, 127, 127, 128}, {{"causal", 1.0}, {"scale", 0.5}}},  // explicit scale
      {{1, 16, 16, 1024, 1024, 128}, {{"causal", 1.0}}},          // a bench-like square problem
  };
  for (const DType dtype : {DType::bf16, DType::f16})
    for (const Case& c : cases) {
      const Problem problem = op.problem(c.dims, dtype, c.params);
      const CheckOutcome outcome = check_baseline(op, problem, 21, context);
      EXPECT_TRUE(outcome.passed()) << problem.label() << ": " << outcome.detail;
    }
}

TEST(AttentionCudnnGpu, TheBaselineRefusesWhatCudnnCannotRunWithAReason) {
  KC_SKIP_WITHOUT_GPU();
  KC_SKIP_WITHOUT_CUDNN();
  Context& context = testing::shared_context();
  const OpSpec& op = registered_attention_op();
  // Rows with no visible key (causal, Sq > Sk): cuDNN's bottom-right mask takes Sq <= Sk only.
  const Problem empty_rows = op.problem({1, 8, 1, 1000, 77, 64}, DType::bf16, {{"causal", 1.0}});
  const CheckOutcome refused = check_baseline(op, empty_rows, 3, context);
  EXPECT_EQ(refused.status, CheckOutcome::Status::unsupported) << refused.detail;
  EXPECT_NE(refused.detail.find("Sq > Sk"), std::string::npos) << refused.detail;
  // D = 36 is a problem kc defines but cuDNN's FP16/BF16 engines do not take.
  const Problem odd_head = op.problem({1, 2, 2, 64, 64, 36}, DType::f16);
  const CheckOutcome odd = check_baseline(op, odd_head, 3, context);
  EXPECT_EQ(odd.status, CheckOutcome::Status::unsupported) << odd.detail;
  EXPECT_NE(odd.detail.find("multiple of 8"), std::string::npos) << odd.detail;
  // Running it anyway is a kc::Error naming the reason, before any launch.
  CudnnAttention cudnn;
  Operands operands = op.make_operands(empty_rows, 3, context);
  EXPECT_THROW(cudnn.run(empty_rows, operands, context), Error);
  // Every conformance problem either passes or is refused; none fails.
  for (const Problem& problem : op.conformance_problems) {
    const CheckOutcome outcome = check_baseline(op, problem, 5, context);
    EXPECT_NE(outcome.status, CheckOutcome::Status::failed) << problem.label() << ": " << outcome.detail;
  }
}

// The check must catch cuDNN run with the wrong parameters: a scale 25% off; the causal mask
// dropped.
TEST(AttentionCudnnGpu, TheCheckRejectsCudnnRunWithWrongParameters) {
  KC_SKIP_WITHOUT_GPU();
  KC_SKIP_WITHOUT_CUDNN();
  Context& context = testing::shared_context();
  const OpSpec& op = registered_attention_op();
  CudnnAttention cudnn;
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const Problem problem = op.problem({1, 8, 2, 1000, 1000, 128}, dtype, {{"causal", 1.0}});
    const std::vector<Problem> wrong = testing_support::wrongly_parameterized(problem);
    ASSERT_EQ(wrong.size(), 2u);
    for (const Problem& computed : wrong) {
      const CheckOutcome outcome = check_run(
          op, [&](const Problem&, Operands& operands, Context& c) { cudnn.run(computed, operands, c); }, problem,
          5, context);
      EXPECT_FALSE(outcome.passed()) << problem.label() << " computed as " << computed.label()
                                     << " passed: " << outcome.detail;
    }
  }
}

}  // namespace
}  // namespace kc::stage3
