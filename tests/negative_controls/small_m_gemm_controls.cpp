// The small-M GEMM's deliberately wrong kernels, each a rung's kernel with one flaw in how it adds
// the splits of K. Everything else is the rung: the same plan and, for rung 14, the same workspace
// and counters (stage3-hpc/src/small_m_weights_as_a_rung.hpp). Each flaw shows wherever K is split
// over CTAs and hides where a column block has a single split (then nothing is reduced).
//  - nc_split_k_partials_added_twice: rung 14 (gemm/14_small_m_weights_as_a.cu) whose last CTA of
//    a column block adds split 0's partials twice.
//  - nc_cluster_split_reads_rank_0_twice: rung 16 (gemm/16_small_m_cluster_split.cu, Hopper) whose
//    cluster adds rank 0's partial tile in place of the last rank's.
#include <memory>
#include <string>
#include <vector>

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/stage3/register.hpp"
#include "kc/testing/negative_controls.hpp"
#include "src/small_m_weights_as_a_rung.hpp"

namespace kc::testing {
namespace {

constexpr const char* kSplitTwiceName = "nc_split_k_partials_added_twice";
constexpr const char* kSplitTwiceFlaw =
    "rung 14 with a flawed split-K reduction: the last CTA of each column block adds split 0's partial sums twice";

constexpr const char* kRankTwiceName = "nc_cluster_split_reads_rank_0_twice";
constexpr const char* kRankTwiceFlaw =
    "rung 16 with a flawed cluster reduction: rank 0's partial tile is added in place of the last rank's";

std::string control_id(const char* name) { return std::string("stage3/") + stage3::kHgemmOp + "/" + name; }

KernelEntry control_entry(const char* name, const char* flaw, int min_compute_capability) {
  KernelEntry entry = negative_control_entry(control_id(name), stage3::kHgemmOp, flaw, {DType::bf16});
  entry.min_compute_capability = min_compute_capability;
  entry.supports = &stage3::small_m_weights_as_a_shape_error;  // the rungs' shapes: M <= 64, K % 8 == 0
  return entry;
}

}  // namespace

std::vector<NegativeControl> small_m_gemm_controls() {
  return {{control_id(kSplitTwiceName), kSplitTwiceFlaw}, {control_id(kRankTwiceName), kRankTwiceFlaw}};
}

void register_small_m_gemm_controls(Registry& registry) {
  if (!registry.has_op(stage3::kHgemmOp)) registry.add_op(stage3::make_hgemm_op());
  KernelEntry twice = control_entry(kSplitTwiceName, kSplitTwiceFlaw, 80);
  auto rung14 = std::make_shared<stage3::SmallMWeightsAsARung>(&stage3::hgemm_14_small_m_weights_as_a_adds_a_split_twice);
  twice.launch = [rung14](const Problem& problem, Operands& operands, cudaStream_t stream) {
    rung14->run(problem, operands, stream);
  };
  registry.add_kernel(std::move(twice));

  KernelEntry rank = control_entry(kRankTwiceName, kRankTwiceFlaw, 90);
  rank.max_compute_capability = 90;  // sm_90a code, as the rung
  auto cache = std::make_shared<stage3::HopperLaunchCache>();
  auto rung16 = std::make_shared<stage3::SmallMWeightsAsARung>(
      [cache](const stage3::HgemmArgs& args, const stage3::SmallMWeightsAsAPlan& plan,
              const stage3::SmallMWeightsAsAWorkspace& workspace, cudaStream_t stream) {
        stage3::hgemm_16_small_m_cluster_split_reads_rank_0_twice(args, plan, workspace, stream, *cache);
      },
      &stage3::plan_small_m_cluster_split, false);
  rank.launch = [rung16](const Problem& problem, Operands& operands, cudaStream_t stream) {
    rung16->run(problem, operands, stream);
  };
  registry.add_kernel(std::move(rank));
}

}  // namespace kc::testing
