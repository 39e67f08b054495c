// Every tile configuration of rung 03's kernel (tune/mma_sync_variants.cu) against the hgemm
// reference. The conformance suite runs rung 03 only in the configuration it uses now
// (Rung03Config); this test runs all of them, so a configuration is known to be correct before
// kc-mma-sync-tune (or an edit of Rung03Config) selects it. C is poisoned with NaN when beta == 0
// (an unwritten element fails) and read when beta != 0. Skips without a GPU, and skips a
// configuration that needs more shared memory than the GPU offers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hgemm.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage3/register.hpp"
#include "kc/common/check.hpp"
#include "mma_sync_variants.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

// Odd shapes: M and N not multiples of any block tile, a partial last K step, K = 8 (one partial
// step, so the pipeline's later stages hold only empty copy groups), a single output; problems
// whose interior blocks take the unchecked copy path (M, N beyond one tile, K % 64 == 0) while
// their edge blocks take the checked one. N % 8 == 0 (1000, 512, 2104) takes the staged
// epilogue's 16-byte stores, with chunks past M and N left out; other N the direct stores.
std::vector<Problem> problems() {
  const std::vector<std::vector<std::int64_t>> shapes = {
      {129, 131, 72}, {1, 1, 8}, {257, 383, 1032}, {200, 300, 8}, {520, 1000, 256}, {512, 512, 640},
      {2100, 2104, 136},  // 153 tiles of 128 x 256 or 256 x 128, N % 8 == 0: the staged epilogue at every edge
  };
  std::vector<Problem> list;
  for (const auto& dims : shapes) {
    list.push_back(gemm_problem(kHgemmOp, dims, DType::bf16));
    list.push_back(gemm_problem(kHgemmOp, dims, DType::bf16, -1.5, 0.5));
  }
  return list;
}

class MmaSyncConfigs : public ::testing::TestWithParam<int> {};

TEST_P(MmaSyncConfigs, MatchTheReferenceOnOddShapesWithAndWithoutBeta) {
  KC_SKIP_WITHOUT_GPU();
  const MmaSyncVariant& variant = mma_sync_variants()[GetParam()];
  Context& context = ::kc::testing::shared_context();
  if (!variant.fits(context.device().smem_per_block_optin))
    GTEST_SKIP() << variant.name() << " needs " << variant.shape.smem_bytes() << " bytes of shared memory per block; "
                 << "this GPU offers " << context.device().smem_per_block_optin;
  const OpSpec op = make_hgemm_op();
  for (const Problem& problem : problems()) {
    const CheckOutcome outcome = variant.check(op, problem, 23, context);
    EXPECT_TRUE(outcome.passed()) << variant.name() << ", " << problem.label() << ": " << outcome.detail;
  }
}

// A control: the same check catches a launch that leaves the last row of C unwritten (it tells
// the kernel M is one less), so the test above can fail.
TEST(MmaSyncConfigsControl, AnUnwrittenLastRowFails) {
  KC_SKIP_WITHOUT_GPU();
  const MmaSyncVariant& variant = mma_sync_variants().front();
  const CheckOutcome outcome = check_run(
      make_hgemm_op(),
      [&](const Problem& p, Operands& o, Context& c) {
        HgemmArgs args = gemm_args<bf16>(p, o, BLayout::n_by_k);
        args.m -= 1;
        variant.launch(args, c.stream());
      },
      gemm_problem(kHgemmOp, {129, 131, 72}, DType::bf16, 1.0, 0.0), 23, ::kc::testing::shared_context());
  EXPECT_FALSE(outcome.passed());
}

INSTANTIATE_TEST_SUITE_P(Variants, MmaSyncConfigs,
                         ::testing::Range(0, static_cast<int>(mma_sync_variants().size())),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           std::string name = "config" + std::to_string(param_info.param) + "_" +
                                              mma_sync_variants()[param_info.param].name();
                           for (char& c : name)
                             if (c == ' ') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace kc::stage3
