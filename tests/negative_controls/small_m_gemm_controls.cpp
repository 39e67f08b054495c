// The small-M GEMM's deliberately wrong kernel: rung 14's kernel (stage3-hpc/gemm/
// 14_small_m_weights_as_a.cu) with one flaw in its split-K reduction — the last CTA of a column
// block adds split 0's partials twice. Everything else is the rung: the same plan, workspace and
// counters (stage3-hpc/src/small_m_weights_as_a_rung.hpp). The flaw shows wherever K is split
// over CTAs and hides where a column block has a single split (then nothing is reduced).
#include <memory>
#include <string>
#include <vector>

#include "kc/stage3/register.hpp"
#include "kc/testing/negative_controls.hpp"
#include "src/small_m_weights_as_a_rung.hpp"

namespace kc::testing {
namespace {

constexpr const char* kSplitTwiceName = "nc_split_k_partials_added_twice";
constexpr const char* kSplitTwiceFlaw =
    "rung 14 with a flawed split-K reduction: the last CTA of each column block adds split 0's partial sums twice";

std::string control_id() { return std::string("stage3/") + stage3::kHgemmOp + "/" + kSplitTwiceName; }

}  // namespace

std::vector<NegativeControl> small_m_gemm_controls() { return {{control_id(), kSplitTwiceFlaw}}; }

void register_small_m_gemm_controls(Registry& registry) {
  if (!registry.has_op(stage3::kHgemmOp)) registry.add_op(stage3::make_hgemm_op());
  KernelEntry entry;
  entry.id = control_id();
  entry.op = stage3::kHgemmOp;
  entry.rung = 0;
  entry.idea = std::string("NEGATIVE CONTROL: ") + kSplitTwiceFlaw;
  entry.dtypes = {DType::bf16};
  entry.report = "negative-controls";
  entry.min_compute_capability = 80;
  entry.supports = &stage3::small_m_weights_as_a_shape_error;  // the rung's shapes: M <= 64, K % 8 == 0
  auto rung = std::make_shared<stage3::SmallMWeightsAsARung>(&stage3::hgemm_14_small_m_weights_as_a_adds_a_split_twice);
  entry.launch = [rung](const Problem& problem, Operands& operands, cudaStream_t stream) {
    rung->run(problem, operands, stream);
  };
  registry.add_kernel(std::move(entry));
}

}  // namespace kc::testing
