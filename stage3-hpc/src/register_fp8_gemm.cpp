// Files the fp8_gemm op and its ladder with the registry (quant/fp8/: 01 TMA + FP8 WGMMA with FP32
// promotion per K step, 02 the same on 128 x 192 tiles, 03 + a TMA-store epilogue, 04 + a promotion
// every four K steps with one scale per tensor, 05 + a tile width chosen per shape, 06 + block scales
// loaded two K steps ahead, 07 + each step promoted while the next runs, 08 rung 06 in cluster pairs
// sharing B, 09 rung 07 with each step's scales brought into the stage by the producer, 10 those
// scales in the stage on 128 x 192 tiles with one partial set, 11 rung 09's or rung 10's kernel by
// the shape's waves, 12 rung 11 with the last wave's wide tiles split along K).
#include <memory>
#include <string>
#include <utility>

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/stage3/fp8_gemm.hpp"
#include "kc/stage3/register.hpp"
#include "kc/stage3/split_last_wave_workspace.hpp"

namespace kc::stage3 {

namespace {

// Rung 12 keeps its split's workspace beside its cache (split_last_wave_workspace.hpp).
struct Fp8SplitLastWave {
  HopperLaunchCache cache;
  SplitLastWaveWorkspace workspace;
  void operator()(const Fp8GemmArgs& args, cudaStream_t stream) {
    fp8_gemm_12_split_last_wave(args, workspace.reserve(stream), stream, cache);
  }
};

}  // namespace

void register_fp8_gemm_kernels(Registry& registry) {
  if (!registry.has_op(kFp8GemmOp)) registry.add_op(make_fp8_gemm_op());

  // sm_90a machine code (wgmma, setmaxnreg) runs on compute capability 9.0 only. Each rung owns its
  // cache of tensor maps and launch facts.
  const auto fp8_rung = [](const std::string& name, int rung_number, std::string idea) {
    KernelEntry rung = rung_entry(kFp8GemmOp, name, rung_number, std::move(idea), {DType::f8e4m3}, kFp8GemmReport, 90);
    rung.max_compute_capability = 90;
    rung.constraints = "K % 16 == 0";
    rung.supports = &fp8_gemm_rung_shape_error;
    rung.refuses = fp8_gemm_rung_refusals();
    return rung;
  };
  using Launch = void (*)(const Fp8GemmArgs&, cudaStream_t, HopperLaunchCache&);
  const auto add = [&registry, &fp8_rung](const std::string& name, int rung_number, std::string idea, Launch launch) {
    KernelEntry rung = fp8_rung(name, rung_number, std::move(idea));
    auto cache = std::make_shared<HopperLaunchCache>();
    rung.launch = [cache, launch](const Problem& problem, Operands& operands, cudaStream_t stream) {
      launch(fp8_gemm_args(problem, operands), stream, *cache);
    };
    registry.add_kernel(std::move(rung));
  };
  add("01_tma_wgmma", 1,
      "TMA + FP8 WGMMA m64n128k32, producer warp and two consumer warpgroups, persistent; each 128-deep K step "
      "summed on the tensor cores, then promoted into FP32 registers with its scales",
      &fp8_gemm_01_tma_wgmma);
  add("02_wide_tiles", 2,
      "rung 01 on 128x192 tiles (m64n192k32): B read from shared memory once for 1.5 times the columns",
      &fp8_gemm_02_wide_tiles);
  add("03_tma_store", 3,
      "rung 02 with the epilogue through shared memory and TMA stores (64x64 boxes, whole lines) instead of "
      "half-sector stores from the registers; four stages",
      &fp8_gemm_03_tma_store);
  add("04_promotion_window", 4,
      "rung 03 promoting every four K steps with one scale per tensor (one step queued behind the running one "
      "inside the window); block scales every step",
      &fp8_gemm_04_promotion_window);
  add("05_tile_per_shape", 5,
      "rung 04 on 128x192 or 128x128 tiles, whichever fills the last persistent wave better (the launch counts "
      "both widths' waves on the GPU's SMs)",
      &fp8_gemm_05_tile_per_shape);
  add("06_scales_ahead", 6,
      "rung 05 loading each K step's block scales two steps ahead of its promotion (across tiles) and "
      "multiplying them there; one scale per tensor runs rung 05",
      &fp8_gemm_06_scales_ahead);
  add("07_promote_behind", 7,
      "rung 06 with two partial sets: each K step's WGMMAs issued before the step before is promoted "
      "(wgmma.wait_group 1); one scale per tensor runs rung 05",
      &fp8_gemm_07_promote_behind);
  add("08_cluster_pairs", 8,
      "rung 06 in clusters of two CTAs sharing each B tile: each loads half and TMA multicasts it to both (a "
      "quarter less L2 traffic a step); one scale per tensor runs rung 05",
      &fp8_gemm_08_cluster_pairs);
  add("09_scales_in_stage", 9,
      "rung 07 with each K step's scales brought into the stage by the producer (A's 128 by TMA, B's by its "
      "thread) on the same full barrier, read by the consumers with LDS; M % 4 != 0 runs rung 07, one scale per "
      "tensor rung 05",
      &fp8_gemm_09_scales_in_stage);
  add("10_wide_scales_in_stage", 10,
      "rung 09's scales in the stage on 128x192 tiles, with the step-by-step walk (one partial set, each step "
      "waited for and promoted); M % 4 != 0 runs rung 09's fallback, one scale per tensor rung 05",
      &fp8_gemm_10_wide_scales_in_stage);
  add("11_scales_in_stage_per_shape", 11,
      "rung 09's 128x128 kernel or rung 10's 128x192 one, whichever the launch estimates fills the persistent "
      "waves better (rung 05's count); M % 4 != 0 runs rung 09's fallback, one scale per tensor rung 05",
      &fp8_gemm_11_scales_in_stage_per_shape);
  {
    // Its launch keeps a workspace beside its cache (Fp8SplitLastWave above).
    KernelEntry rung = fp8_rung("12_split_last_wave", 12,
                                "rung 11 with the last wave's 128x192 tiles split along K over the idle SMs where it "
                                "would leave half the grid or more idle (the grouped GEMM's rung 06 plan), the pieces' "
                                "sums added by the last consumer half; M % 4 != 0 runs rung 09's fallback, one scale "
                                "per tensor rung 05");
    auto state = std::make_shared<Fp8SplitLastWave>();
    rung.launch = [state](const Problem& problem, Operands& operands, cudaStream_t stream) {
      (*state)(fp8_gemm_args(problem, operands), stream);
    };
    registry.add_kernel(std::move(rung));
  }

  // The activations' quantization for block scaling, in the same report (sm_80 and later).
  if (!registry.has_op(kFp8QuantizeOp)) registry.add_op(make_fp8_quantize_op());
  KernelEntry quantize = rung_entry(kFp8QuantizeOp, "01_half_warp_per_block", 1,
                                    "half a warp per 1x128 piece: 16-byte loads, a max by four shuffles, paired "
                                    "e4m3 conversions, 8-byte stores",
                                    {DType::bf16}, kFp8GemmReport, 80);
  quantize.constraints = "K % 16 == 0";
  quantize.supports = &fp8_quantize_shape_error;
  quantize.refuses = {"5x100 bf16"};
  quantize.launch = [](const Problem& problem, Operands& operands, cudaStream_t stream) {
    fp8_quantize_01_half_warp_per_block(fp8_quantize_args(problem, operands), stream);
  };
  registry.add_kernel(std::move(quantize));
}

}  // namespace kc::stage3
