// The int4 quantize op's deliberately wrong kernel: rung 02 (stage3-hpc/quant/int4/
// quantize_02_reciprocal.cu) without its exact path near ties. Every value is then w x (1 / scale)
// rounded, which differs from the reference's rint(w / scale) where the quotient is a half and the
// reciprocal is inexact (a scale of 3/8, 5/8 or 6/8: the conformance data's grid groups). The
// exact comparison of the bytes must fail some conformance problem.
#include <string>
#include <utility>
#include <vector>

#include "kc/stage3/quantize_int4.hpp"
#include "kc/testing/negative_controls.hpp"

namespace kc::testing {
namespace {

constexpr const char* kName = "nc_without_tie_path";
constexpr const char* kFlaw =
    "every value rounded from w x (1 / scale), also where w / scale is a half and the rounded reciprocal moves it "
    "off the tie";

}  // namespace

std::vector<NegativeControl> quantize_int4_controls() {
  return {{std::string("stage3/") + stage3::kQuantizeInt4Op + "/" + kName, kFlaw}};
}

void register_quantize_int4_controls(Registry& registry) {
  if (!registry.has_op(stage3::kQuantizeInt4Op)) registry.add_op(stage3::make_quantize_int4_op());
  KernelEntry entry = negative_control_entry(std::string("stage3/") + stage3::kQuantizeInt4Op + "/" + kName,
                                             stage3::kQuantizeInt4Op, kFlaw, {DType::bf16});
  entry.min_compute_capability = 80;
  entry.supports = &stage3::quantize_int4_shape_error;
  entry.launch = [](const Problem& problem, Operands& operands, cudaStream_t stream) {
    stage3::quantize_int4_02_without_tie_path(stage3::quantize_int4_args(problem, operands), stream);
  };
  registry.add_kernel(std::move(entry));
}

}  // namespace kc::testing
