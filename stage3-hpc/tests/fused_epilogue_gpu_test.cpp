// Rung 10's epilogue handoff (epilogue_offloaded_activation.cuh, EpilogueKind::tma_store_offloaded)
// on the problems that exercise it hardest. The conformance suite runs rung 10 on odd shapes, but
// almost all of them give each CTA of the persistent grid at most one tile, and a CTA's last tile never
// goes through the handoff (its consumers apply the activation themselves). Here every CTA gets
// several tiles, so each handoff buffer goes through many full/empty phases, the last pass of
// one tile is written during the next tile's mainloop, and the last tile follows handed-over
// ones; with partial tiles in M (a consumer whose rows all lie past M still hands over) and in N
// (boxes past N are not stored), one K step per tile (the held pass is written at step 0), beta
// != 0, and the N % 8 != 0 fallback, where the epilogue warps must wait for nothing. A control
// checks rung 09 (no bias, no GELU) against the same op: the check must fail it. Skips without a
// GPU, and on GPUs other than compute capability 9.0 (sm_90a code).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hgemm.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage3/register.hpp"
#include "kc/common/check.hpp"
#include "kc/stage3/register.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

constexpr const char* kFusedRung = "stage3/gemm_bias_gelu/10_fused_bias_gelu";
constexpr const char* kTmaStoreRung = "stage3/hgemm/09_tma_store";

const Registry& registry() {
  static const Registry r = [] {
    Registry stage3;
    register_kernels(stage3);
    return stage3;
  }();
  return r;
}

// "" when this GPU runs `kernel`, otherwise why not.
std::string cannot_run(const KernelEntry& kernel, Context& context) {
  const int cc = context.device().compute_capability();
  if (cc >= kernel.min_compute_capability &&
      (kernel.max_compute_capability == 0 || cc <= kernel.max_compute_capability))
    return {};
  return kernel.id + " runs on sm_" + std::to_string(kernel.min_compute_capability) +
         " only (sm_90a code); this GPU is sm_" + std::to_string(cc);
}

// With 132 SMs (H100 SXM / H200) the persistent grid has 132 CTAs.
std::vector<Problem> problems() {
  return {
      // 65 x 5 = 325 tiles (2-3 per CTA); K = 64: one K step; 8 rows in the last tile row (the
      // second consumer's rows all past M) and 8 columns in the last tile column.
      gemm_problem(kBiasGeluOp, {8200, 1032, 64}, DType::bf16, 1.0, 0.0),
      // 33 x 17 = 561 tiles (4-5 per CTA), 4 K steps, the last one partial; edges in M and N.
      gemm_problem(kBiasGeluOp, {4100, 4104, 200}, DType::bf16, 1.0, 0.0),
      gemm_problem(kBiasGeluOp, {4100, 4104, 200}, DType::bf16, 1.5, -0.75),
      // 8 x 48 = 384 tiles (2-3 per CTA), 16 K steps: the held pass goes out at step 8.
      gemm_problem(kBiasGeluOp, {1000, 12288, 1024}, DType::bf16, -0.5, 0.25),
      // N % 8 != 0: direct stores by the consumers on every tile, 33 x 9 = 297 tiles.
      gemm_problem(kBiasGeluOp, {4100, 2049, 72}, DType::bf16, 1.0, 0.0),
      // One tile: only the last-tile path.
      gemm_problem(kBiasGeluOp, {100, 200, 8}, DType::bf16, 1.0, 1.0),
  };
}

TEST(FusedEpilogue, MatchesTheReferenceWithSeveralTilesPerBlock) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = ::kc::testing::shared_context();
  const KernelEntry& kernel = registry().kernel(kFusedRung);
  const std::string reason = cannot_run(kernel, context);
  if (!reason.empty()) GTEST_SKIP() << reason;
  for (const Problem& problem : problems()) {
    for (const std::uint64_t seed : {31, 32}) {
      const CheckOutcome outcome = check_kernel(registry(), kernel, problem, seed, context);
      EXPECT_TRUE(outcome.passed()) << problem.label() << ", seed " << seed << ": " << outcome.detail;
    }
  }
}

// The control: a kernel that stores alpha.A.B^T + beta.C without bias and GELU must fail the
// same check (so the test above can fail, and the check does look at the activation).
TEST(FusedEpilogueControl, AGemmWithoutBiasAndGeluFails) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = ::kc::testing::shared_context();
  const KernelEntry& plain = registry().kernel(kTmaStoreRung);
  const std::string reason = cannot_run(plain, context);
  if (!reason.empty()) GTEST_SKIP() << reason;
  const CheckOutcome outcome = check_run(
      make_gemm_bias_gelu_op(),
      [&](const Problem& p, Operands& o, Context& c) { plain.launch(p, o, c.stream()); },
      gemm_problem(kBiasGeluOp, {4100, 4104, 200}, DType::bf16, 1.0, 0.0), 31, context);
  EXPECT_FALSE(outcome.passed());
}

}  // namespace
}  // namespace kc::stage3
