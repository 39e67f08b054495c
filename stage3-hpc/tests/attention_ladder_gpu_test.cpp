// The FlashAttention ladder on the GPU, beyond what the conformance suite checks (every rung on
// every conformance problem, tests/conformance): non-finite inputs. A NaN in a key some rows see
// must make exactly those rows NaN (O and LSE), and rows that do not see it must stay what the
// definition says — the mask must select, not add, and the running maximum must not drop the NaN.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/fill.hpp"
#include "kc/common/registry.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/register.hpp"
#include "stage3_test_registry.hpp"
#include "attention_test_support.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

using testing_support::download;

using testing_support::plant_nan;

// Causal, Sq = 100, Sk = 130 (row i sees keys j <= i + 30), two query heads on one kv head. K of
// key 129 holds a NaN: only row 99 (of both heads) sees it. Key 129 lies in the last K/V tile of
// every rung, next to keys that rows 64-98 do see, so tiles that hold both kinds are exercised.
TEST(AttentionLadderGpu, NanInAKeyReachesTheRowsThatSeeItOnly) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const Registry& r = stage3_test_registry();
  const OpSpec& op = r.op(kAttentionFwdOp);
  constexpr std::int64_t kD = 64, kSq = 100, kSk = 130, kNanKey = 129;
  for (const KernelEntry* kernel : r.select("^stage3/attention_fwd/"))
    for (const DType dtype : {DType::bf16, DType::f16}) {
      const Problem problem = op.problem({1, 2, 1, kSq, kSk, kD}, dtype, {{"causal", 1.0}});
      Operands operands = op.make_operands(problem, 17, context);
      plant_nan(operands["K"], static_cast<std::size_t>(kNanKey * kD + 5), context.stream());
      kernel->launch(problem, operands, context.stream());
      KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));

      const AttentionShape shape = attention_shape(problem);
      const std::vector<double> q = download(operands["Q"], context.stream());
      const std::vector<double> k = download(operands["K"], context.stream());
      const std::vector<double> v = download(operands["V"], context.stream());
      std::vector<double> o_ref(q.size()), lse_ref(static_cast<std::size_t>(2 * kSq));
      attention_reference(shape, attention_scale(problem), true, q.data(), k.data(), v.data(), o_ref.data(),
                          lse_ref.data());
      const std::vector<double> o = download(operands["O"], context.stream());
      const std::vector<double> lse = download(operands["LSE"], context.stream());

      int wrong_rows = 0;
      for (std::int64_t row = 0; row < 2 * kSq; ++row) {
        const bool sees_nan = row % kSq == kSq - 1;
        bool row_ok = std::isnan(lse[row]) == sees_nan &&
                      (sees_nan || std::abs(lse[row] - lse_ref[row]) <= 1e-2 * std::max(1.0, std::abs(lse_ref[row])));
        for (std::int64_t c = 0; c < kD; ++c) {
          const double value = o[row * kD + c];
          row_ok = row_ok && std::isnan(value) == sees_nan &&
                   (sees_nan || std::abs(value - o_ref[row * kD + c]) <= 5e-2);
        }
        EXPECT_EQ(std::isnan(lse_ref[row]), sees_nan);  // the reference agrees on which rows
        wrong_rows += row_ok ? 0 : 1;
      }
      EXPECT_EQ(wrong_rows, 0) << kernel->id << " " << dtype_name(dtype) << ": " << wrong_rows
                               << " rows differ from the definition (rows 99 and 199 NaN, the rest finite)";
    }
}

}  // namespace
}  // namespace kc::stage3
