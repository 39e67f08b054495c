// The INT8 GEMM's deliberately wrong kernels: rung 01's kernel (rung 02's for the TMA box, rung
// 03's for the fragment rows) with one flaw each (stage3-hpc/quant/int8/int8_gemm_flawed.cu) — a K
// tail dropped (the last 128-deep K step never multiplied), the dequantizing epilogue's row and
// column scales swapped, the s32 TMA store's box column in the wrong unit (those three Hopper
// only: integer WGMMA), and the lower 8 rows of each mma.sync fragment dequantized with the upper
// rows' scale (sm_80 and later).
#include <memory>
#include <string>
#include <vector>

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/stage3/int8_gemm.hpp"
#include "kc/testing/negative_controls.hpp"

namespace kc::testing {
namespace {

struct Int8Control {
  const char* op;
  const char* name;
  const char* flaw;
  stage3::Int8Flaw kind;
  int min_compute_capability = 90;  // the Hopper rungs' kernels; rung 03's runs from sm_80 on
};

const Int8Control kInt8Controls[] = {
    {stage3::kInt8GemmOp, "nc_last_k_step_dropped",
     "the last 128-deep K step is loaded and released but never multiplied (a K tail dropped)",
     stage3::Int8Flaw::k_step_dropped},
    {stage3::kInt8GemmDequantOp, "nc_last_k_step_dropped",
     "the last 128-deep K step is loaded and released but never multiplied (a K tail dropped)",
     stage3::Int8Flaw::k_step_dropped},
    {stage3::kInt8GemmDequantOp, "nc_scales_swapped",
     "dequantizing, row m takes the weight scale s_B[m] and column n the activation scale s_A[n]",
     stage3::Int8Flaw::scales_swapped},
    {stage3::kInt8GemmOp, "nc_s32_box_column_halved",
     "rung 02, s32 out: each TMA store box is placed at its s32 column, not at the two-byte element the map "
     "counts (twice that), so boxes overwrite each other and half the columns are never written",
     stage3::Int8Flaw::s32_box_column_halved},
    {stage3::kInt8GemmDequantOp, "nc_fragment_rows_share_scale",
     "rung 03 (mma.sync), dequantizing: rows r + 8 of each 16 x 8 fragment are scaled by row r's s_A[r] "
     "(the lower half of the accumulator layout read as the upper)",
     stage3::Int8Flaw::fragment_rows_share_scale, 80},
};

}  // namespace

std::vector<NegativeControl> int8_gemm_controls() {
  std::vector<NegativeControl> list;
  for (const Int8Control& c : kInt8Controls) list.push_back({std::string("stage3/") + c.op + "/" + c.name, c.flaw});
  return list;
}

void register_int8_gemm_controls(Registry& registry) {
  if (!registry.has_op(stage3::kInt8GemmOp)) registry.add_op(stage3::make_int8_gemm_op());
  if (!registry.has_op(stage3::kInt8GemmDequantOp)) registry.add_op(stage3::make_int8_gemm_dequant_op());
  for (const Int8Control& c : kInt8Controls) {
    KernelEntry entry = negative_control_entry(std::string("stage3/") + c.op + "/" + c.name, c.op, c.flaw, {DType::i8});
    entry.min_compute_capability = c.min_compute_capability;
    if (c.min_compute_capability == 90) entry.max_compute_capability = 90;  // sm_90a code
    entry.supports = &stage3::int8_gemm_rung_shape_error;
    const stage3::Int8Flaw flaw = c.kind;
    auto cache = std::make_shared<stage3::HopperLaunchCache>();
    entry.launch = [flaw, cache](const Problem& problem, Operands& operands, cudaStream_t stream) {
      stage3::int8_gemm_with_flaw(stage3::int8_gemm_args(problem, operands), flaw, stream, *cache);
    };
    registry.add_kernel(std::move(entry));
  }
}

}  // namespace kc::testing
