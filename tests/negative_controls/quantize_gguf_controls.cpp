// The GGUF quantize op's deliberately wrong kernel: rung 01
// (stage3-hpc/quant/quantize_gguf_01_quad_per_block.cu) with the nibble order of q4 blocks swapped —
// element j + 16 in the low nibble of qs[j], element j in the high one. The blocks then decode to
// other weights (gemv_gguf reads element j from the low nibble), and the exact comparison of the
// bytes must fail every q4_0 and q4_1 problem (q8_0 has no nibbles: there it passes).
#include <string>
#include <utility>
#include <vector>

#include "kc/stage3/quantize_gguf.hpp"
#include "kc/testing/negative_controls.hpp"

namespace kc::testing {
namespace {

constexpr const char* kName = "nc_swapped_nibbles";
constexpr const char* kFlaw = "q4 blocks with their nibbles swapped: element j + 16 in the low nibble of qs[j], j in the high";

}  // namespace

std::vector<NegativeControl> quantize_gguf_controls() {
  return {{std::string("stage3/") + stage3::kQuantizeGgufOp + "/" + kName, kFlaw}};
}

void register_quantize_gguf_controls(Registry& registry) {
  if (!registry.has_op(stage3::kQuantizeGgufOp)) registry.add_op(stage3::make_quantize_gguf_op());
  KernelEntry entry = negative_control_entry(std::string("stage3/") + stage3::kQuantizeGgufOp + "/" + kName,
                                             stage3::kQuantizeGgufOp, kFlaw, {DType::bf16});
  entry.min_compute_capability = 80;
  entry.supports = &stage3::quantize_gguf_shape_error;
  entry.launch = [](const Problem& problem, Operands& operands, cudaStream_t stream) {
    stage3::quantize_gguf_01_swapped_nibbles(stage3::quantize_gguf_args(problem, operands), stream);
  };
  registry.add_kernel(std::move(entry));
}

}  // namespace kc::testing
