// The FP8 GEMM's deliberately wrong kernels: rung 01's kernel (rung 04's for the window) with one
// flaw each (stage3-hpc/quant/fp8/fp8_gemm_flawed.cu) — the mistakes an FP8 GEMM makes in its
// bookkeeping, not in its data movement: never promoting the tensor cores' partial sums to FP32,
// applying a scale twice, reading the next K block's scales, never restarting a promotion window's
// sum, adding a split tile's first K piece twice (rung 12's kernel, which shows wherever its plan
// splits the last wave). Hopper only (FP8 WGMMA).
#include <memory>
#include <string>
#include <vector>

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/stage3/fp8_gemm.hpp"
#include "kc/stage3/split_last_wave_workspace.hpp"
#include "kc/testing/negative_controls.hpp"

namespace kc::testing {
namespace {

// The scaling a control runs with: both, or only the one its flaw lives in.
enum class Fp8ControlScaling { both, block_only, per_tensor_only };

struct Fp8Control {
  const char* name;
  const char* flaw;
  stage3::Fp8Flaw kind;
  Fp8ControlScaling scaling;
};

const Fp8Control kFp8Controls[] = {
    {"nc_no_fp32_promotion",
     "the tensor cores sum all of K: their partial sums are never promoted to FP32 registers",
     stage3::Fp8Flaw::no_promotion, Fp8ControlScaling::both},
    {"nc_scale_applied_twice", "block scaling: each activation scale multiplies the product twice",
     stage3::Fp8Flaw::scale_twice, Fp8ControlScaling::block_only},
    {"nc_next_blocks_scales", "block scaling: K block kb uses the scales of block kb + 1 (a group index off by one)",
     stage3::Fp8Flaw::wrong_scale_block, Fp8ControlScaling::block_only},
    {"nc_promotion_window_not_restarted",
     "rung 04, one scale per tensor: each promotion window's sum starts from the last window's, not from zero, "
     "so every earlier window is promoted again",
     stage3::Fp8Flaw::window_not_restarted, Fp8ControlScaling::per_tensor_only},
    {"nc_split_pieces_added_twice",
     "rung 12, block scaling: the consumer half that adds a split tile's K pieces adds piece 0 twice",
     stage3::Fp8Flaw::split_piece_added_twice, Fp8ControlScaling::block_only},
};

}  // namespace

std::vector<NegativeControl> fp8_gemm_controls() {
  std::vector<NegativeControl> list;
  for (const Fp8Control& c : kFp8Controls)
    list.push_back({std::string("stage3/") + stage3::kFp8GemmOp + "/" + c.name, c.flaw});
  return list;
}

void register_fp8_gemm_controls(Registry& registry) {
  if (!registry.has_op(stage3::kFp8GemmOp)) registry.add_op(stage3::make_fp8_gemm_op());
  for (const Fp8Control& c : kFp8Controls) {
    KernelEntry entry = negative_control_entry(std::string("stage3/") + stage3::kFp8GemmOp + "/" + c.name,
                                               stage3::kFp8GemmOp, c.flaw, {DType::f8e4m3});
    entry.min_compute_capability = 90;
    entry.max_compute_capability = 90;
    const Fp8ControlScaling scaling = c.scaling;
    const stage3::Fp8Flaw flaw = c.kind;
    entry.supports = [scaling, flaw](const Problem& p) -> std::string {
      if (std::string error = stage3::fp8_gemm_rung_shape_error(p); !error.empty()) return error;
      if (scaling == Fp8ControlScaling::block_only && p.param("scaling") != 1.0)
        return "this control's flaw is in the block scales: scaling=1 only";
      if (scaling == Fp8ControlScaling::per_tensor_only && p.param("scaling") != 0.0)
        return "this control's flaw is in the promotion window of one scale per tensor: scaling=0 only";
      // Rung 12's kernel loads s_A's rows by TMA: 16-byte rows of M floats (its launch refuses the rest).
      if (flaw == stage3::Fp8Flaw::split_piece_added_twice &&
          !stage3::fp8_scale_a_rows_fit_tma(static_cast<int>(p.dims[0])))
        return "this control runs rung 12's kernel, which needs M % 4 == 0";
      return {};
    };
    auto cache = std::make_shared<stage3::HopperLaunchCache>();
    auto workspace = std::make_shared<stage3::SplitLastWaveWorkspace>();  // rung 12's flaw only
    entry.launch = [flaw, cache, workspace](const Problem& problem, Operands& operands, cudaStream_t stream) {
      stage3::GroupedSplitWorkspace split;
      if (flaw == stage3::Fp8Flaw::split_piece_added_twice) split = workspace->reserve(stream);
      stage3::fp8_gemm_01_with_flaw(stage3::fp8_gemm_args(problem, operands), flaw, stream, *cache, &split);
    };
    registry.add_kernel(std::move(entry));
  }
}

}  // namespace kc::testing
