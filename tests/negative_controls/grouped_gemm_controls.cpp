// The grouped GEMM's deliberately wrong implementations: cuBLAS GemmEx once per expert, as the
// op's peer runs it, with one routing mistake each — the bookkeeping a grouped kernel gets wrong,
// not the arithmetic. Each hides on some problems (one expert, uniform routing), which is why the
// op's conformance problems have several experts, skew and shuffled routings. And rung 07's kernel
// with its split-K reduction flawed (nc_split_pieces_added_twice), which shows wherever rung 07's
// plan splits the last wave's tiles along K and hides where it does not.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kc/common/blas.hpp"
#include "kc/stage3/grouped_gemm.hpp"
#include "kc/testing/negative_controls.hpp"

namespace kc::testing {
namespace {

enum class GroupedFlaw { previous_experts_rows, next_experts_weights, uniform_routing };

struct GroupedControl {
  const char* name;
  const char* flaw;
  GroupedFlaw kind;
};

const GroupedControl kGroupedControls[] = {
    {"nc_writes_at_previous_experts_rows",
     "expert g's output written at the first row of expert g - 1 (a row offset read one entry early)",
     GroupedFlaw::previous_experts_rows},
    {"nc_uses_next_experts_weights", "expert g's rows multiplied by expert g + 1's weights (B offset one expert off)",
     GroupedFlaw::next_experts_weights},
    {"nc_assumes_uniform_routing", "rows split evenly over the experts, whatever the routing says",
     GroupedFlaw::uniform_routing},
};

void run_flawed(GroupedFlaw flaw, cublasHandle_t handle, const Problem& problem, Operands& operands,
                cudaStream_t stream) {
  using stage3::bf16;
  const std::int64_t experts = problem.dims[0], n = problem.dims[1], k = problem.dims[2];
  const std::vector<std::int64_t> counts =
      flaw == GroupedFlaw::uniform_routing
          ? stage3::expert_token_counts(experts, static_cast<std::int64_t>(problem.param("tokens")), 0.0, 0)
          : stage3::grouped_gemm_counts(problem);
  const std::vector<int> starts = stage3::group_row_starts(counts);
  for (std::int64_t g = 0; g < experts; ++g) {
    const auto expert = static_cast<std::size_t>(g);
    if (counts[expert] == 0) continue;
    const auto row = static_cast<std::size_t>(starts[expert]);
    const auto out_row =
        flaw == GroupedFlaw::previous_experts_rows && g > 0 ? static_cast<std::size_t>(starts[expert - 1]) : row;
    const auto weight = static_cast<std::size_t>(flaw == GroupedFlaw::next_experts_weights ? (g + 1) % experts : g);
    cublas_gemm_ex(handle, stream, {counts[expert], n, k}, DType::bf16, DType::bf16, 1.f,
                   operands["A"].data<bf16>() + row * k, operands["B"].data<bf16>() + weight * n * k,
                   BLayout::n_by_k, 0.f, operands["C"].data<bf16>() + out_row * n);
  }
}

}  // namespace

constexpr const char* kPieceTwiceName = "nc_split_pieces_added_twice";
constexpr const char* kPieceTwiceFlaw =
    "rung 07 with a flawed split of the last wave: the consumer half that adds a tile's K pieces adds piece 0 twice";

std::vector<NegativeControl> grouped_gemm_controls() {
  std::vector<NegativeControl> list;
  for (const GroupedControl& c : kGroupedControls)
    list.push_back({std::string("stage3/") + stage3::kGroupedGemmOp + "/" + c.name, c.flaw});
  list.push_back({std::string("stage3/") + stage3::kGroupedGemmOp + "/" + kPieceTwiceName, kPieceTwiceFlaw});
  return list;
}

void register_grouped_gemm_controls(Registry& registry) {
  if (!registry.has_op(stage3::kGroupedGemmOp)) registry.add_op(stage3::make_grouped_gemm_op());
  // One cuBLAS handle for the three, made on the first launch (registering needs no GPU).
  auto handle = std::make_shared<std::unique_ptr<CublasHandle>>();
  for (const GroupedControl& c : kGroupedControls) {
    KernelEntry entry = negative_control_entry(std::string("stage3/") + stage3::kGroupedGemmOp + "/" + c.name,
                                               stage3::kGroupedGemmOp, c.flaw, {DType::bf16});
    const GroupedFlaw flaw = c.kind;
    entry.launch = [flaw, handle](const Problem& problem, Operands& operands, cudaStream_t stream) {
      if (!*handle) *handle = std::make_unique<CublasHandle>();
      run_flawed(flaw, (*handle)->get(), problem, operands, stream);
    };
    registry.add_kernel(std::move(entry));
  }

  KernelEntry twice = negative_control_entry(std::string("stage3/") + stage3::kGroupedGemmOp + "/" + kPieceTwiceName,
                                             stage3::kGroupedGemmOp, kPieceTwiceFlaw, {DType::bf16});
  twice.min_compute_capability = 90;  // sm_90a code, as the rung
  twice.max_compute_capability = 90;
  twice.supports = &stage3::grouped_gemm_tiles_shape_error;  // the rung's shapes: K % 8 == 0
  twice.launch = stage3::grouped_gemm_07_launch_adding_a_piece_twice();
  registry.add_kernel(std::move(twice));
}

}  // namespace kc::testing
