// FP8 GEMM rung 11 — rung 09 or rung 10, whichever tile width fills the persistent waves better (sm_90a).
//
// Idea: rung 05's, again. Rungs 09 and 10 bring the block scales into the stage on 128 x 128 and
// 128 x 192 tiles; neither is faster at every shape. The wide tile spreads each K step's fixed work
// over more columns, so where both widths fill their last wave it wins; but at 2048² its 176 tiles
// take a full wave and a second a third full (132 SMs), while the narrow tile's 256 take two waves
// 97% full, each of them shorter. The launch counts both before it runs, as rung 05 does for rung
// 04's kernels.
//
// What changed from rungs 09 and 10: only the launch. For block scales that TMA can bring into the
// stage (M % 4 == 0, s_A 16-byte aligned) it estimates each width's time as its waves x the time of
// one of its tiles, a 128-wide tile costing kNarrowTileTime of a 192-wide one, and launches rung
// 09's kernel when the narrow estimate is the lower, else rung 10's. Both kernels are the measured
// ones, unchanged (fp8_gemm_kernel.cuh; fp8_persistent_waves is rung 05's count).
//
// Layouts and limits: rung 09's. Anything else (and one scale per tensor) runs rung 09, which runs
// rung 07, then rung 05. Expected limiter: the tensor cores, with fewer of them idle in the last
// wave. SASS to look for: the two kernels of rungs 09 and 10 — 8 QGMMA.64x128x32.F32.E4M3.E4M3 and
// 256 FFMA in rung 09's, 4 QGMMA.64x192x32.F32.E4M3.E4M3 in rung 10's, LDS of the scales in both,
// no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/fp8_gemm/11_scales_in_stage_per_shape --param scaling=1
//                      kc-bench --filter 'stage3/fp8_gemm/(09|10|11)_' --param scaling=1
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {
namespace {

using NarrowTiles = Fp8GemmConfig<128, /*promotion interval*/ 4, /*store pass columns*/ 64, /*stages*/ 6,
                                  Fp8BlockScaleWalk::scales_in_stage>;  // rung 09
using WideTiles = Fp8GemmConfig<192, /*promotion interval*/ 4, /*store pass columns*/ 192, /*stages*/ 4,
                                Fp8BlockScaleWalk::wide_scales_in_stage>;  // rung 10

// The time of a rung-09 tile in units of a rung-10 tile's, both running whole waves (calibrated at
// 8192³ from the two rungs' times beside the same baseline: stage-3 README, rung 11).
constexpr double kNarrowTileTime = 0.77;

}  // namespace

bool fp8_scales_in_stage_narrow_tiles_win(const Fp8GemmArgs& args, HopperLaunchCache& cache) {
  check_fp8_gemm_args(args);  // before the occupancy queries of the estimate
  const double wide = fp8_persistent_waves<WideTiles, Fp8Scaling::block>(args, cache);
  const double narrow = fp8_persistent_waves<NarrowTiles, Fp8Scaling::block>(args, cache) * kNarrowTileTime;
  return narrow < wide;
}

void fp8_gemm_11_scales_in_stage_per_shape(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  if (args.scaling != Fp8Scaling::block || !fp8_scale_a_rows_take_tma(args)) {
    fp8_gemm_09_scales_in_stage(args, stream, cache);
    return;
  }
  if (fp8_scales_in_stage_narrow_tiles_win(args, cache))
    launch_fp8_gemm<NarrowTiles, Fp8Scaling::block, Fp8Flaw::none>(args, stream, cache);
  else
    launch_fp8_gemm<WideTiles, Fp8Scaling::block, Fp8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
