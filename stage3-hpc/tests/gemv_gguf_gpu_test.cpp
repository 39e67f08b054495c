// The GGUF GEMV's negative control: rung 01 with each byte's nibbles read in the wrong order must
// fail the op's check on q4_0 and q4_1 (q8_0 has no nibbles). The rung itself is checked by the
// conformance tests on every conformance problem. Skips without a GPU.
//   ctest --test-dir build/ci -R GemvGgufGpu
#include <gtest/gtest.h>

#include "kc/common/check.hpp"
#include "kc/stage3/gemv_gguf.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

RunFn launch_with(void (*gemv)(const GgufGemvArgs&, cudaStream_t)) {
  return [gemv](const Problem& p, Operands& o, Context& c) { gemv(gemv_gguf_args(p, o), c.stream()); };
}

TEST(GemvGgufGpu, SwappedNibblesFailTheCheck) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec op = make_gemv_gguf_op();
  for (const double type : {2.0, 3.0}) {
    const Problem problem = op.problem({4, 129, 256}, DType::bf16, {{"ggml_type", type}});
    EXPECT_TRUE(check_run(op, launch_with(&gemv_gguf_01_warp_per_column), problem, 5, context).passed())
        << problem.label();
    const CheckOutcome wrong = check_run(op, launch_with(&gemv_gguf_01_swapped_nibbles), problem, 5, context);
    EXPECT_FALSE(wrong.passed()) << problem.label() << ": the swapped nibble order went unnoticed";
  }
}

}  // namespace
}  // namespace kc::stage3
