// The FP8 grouped GEMM's deliberately wrong kernel: rung 01's kernel
// (stage3-hpc/quant/fp8/grouped_01_scales_in_stage.cu) with the bookkeeping mistake block scales
// add to a grouped kernel — expert g's products scaled with expert g + 1's weight scales (an
// offset into s_B one expert off; the last expert takes its own). It shows wherever an expert
// other than the last has rows, and hides where none does (one expert), which is why the op's
// conformance problems have several experts. Hopper only (FP8 WGMMA), as the rung.
#include <string>
#include <vector>

#include "kc/stage3/fp8_grouped_gemm.hpp"
#include "kc/testing/negative_controls.hpp"

namespace kc::testing {
namespace {

constexpr const char* kNeighboursScalesName = "nc_neighbours_weight_scales";
constexpr const char* kNeighboursScalesFlaw =
    "rung 01 scaling expert g's products with expert g + 1's weight scales (s_B one expert off; the last expert "
    "its own)";

std::string control_id() { return std::string("stage3/") + stage3::kFp8GroupedGemmOp + "/" + kNeighboursScalesName; }

}  // namespace

std::vector<NegativeControl> fp8_grouped_gemm_controls() { return {{control_id(), kNeighboursScalesFlaw}}; }

void register_fp8_grouped_gemm_controls(Registry& registry) {
  if (!registry.has_op(stage3::kFp8GroupedGemmOp)) registry.add_op(stage3::make_fp8_grouped_gemm_op());
  KernelEntry entry =
      negative_control_entry(control_id(), stage3::kFp8GroupedGemmOp, kNeighboursScalesFlaw, {DType::f8e4m3});
  entry.min_compute_capability = 90;  // sm_90a code, as the rung
  entry.max_compute_capability = 90;
  entry.supports = &stage3::fp8_grouped_gemm_rung_shape_error;  // the rung's: K % 16, rows % 4
  entry.launch = stage3::fp8_grouped_gemm_01_launch_with_neighbours_weight_scales();
  registry.add_kernel(std::move(entry));
}

}  // namespace kc::testing
