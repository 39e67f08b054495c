// FP8 GEMM rung 06 — rung 05 loading the block scales two K steps ahead of their promotion (sm_90a).
//
// Idea: with block scaling each K step's promotion multiplies the step's sum by s_A x s_B, four
// scales a thread loaded from global memory (L2: s_A is [K/128, M] floats, s_B [N/128, K/128]).
// Rungs 01-05 issue the loads of step k + 1 just after step k's WGMMAs and form the products at
// once, so the warp stops on those products until the loads return: a load from L2 under a full
// stream of TMA traffic takes longer than a K step's WGMMAs (a 128-deep step of a 128 x 128 tile is
// 4.2 MFLOP: 512 cycles of the SM's FP8 tensor cores), and the tensor cores wait for the promotion
// behind it. ncu's source view of rung 05's block-scaled kernel shows it: the FMUL after the LDGs
// holds the most stall samples of the kernel, all long-scoreboard (stage-3 README). Every tile's
// first step also waits for its loads, with nothing in flight.
//
// What changed from rung 05 (block scaling only; one scale per tensor runs rung 05 as it is):
// the consumer loads the four factors of a step's scales (s_A for its two rows, s_B for the tile's
// one or two blocks of columns) two K steps before that step's promotion, as plain registers, and
// multiplies them at the promotion. The loads follow the CTA's walk of tiles, not one tile: in the
// last two steps of a tile they fetch the first two of the next (Fp8ScaleLookahead in
// fp8_gemm_kernel.cuh), so no tile starts on a load. Tiles, stages, the promotion and the epilogue
// are rung 05's; the launch picks the tile width as rung 05 does.
//
// Layouts and limits: rung 01's. Expected limiter: the tensor cores, idle now only while a consumer
// promotes (as with one scale per tensor promoted every step: rung 03's per-tensor column).
// SASS to look for: the LDG.E.CONSTANTs of the scales issued a loop iteration before the FMULs that
// use them; 4 QGMMA a K step and 96 (n192) or 64 (n128) FFMA a promotion, as in rung 05; no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/fp8_gemm/06_scales_ahead --param scaling=1
//                      kc-bench --filter 'stage3/fp8_gemm/0[56]' --param scaling=1 --shapes 4096x4096x4096
#include "fp8_tile_per_shape.cuh"

namespace kc::stage3 {

void fp8_gemm_06_scales_ahead(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  if (args.scaling != Fp8Scaling::block) {
    fp8_gemm_05_tile_per_shape(args, stream, cache);
    return;
  }
  using WideTiles = Fp8GemmConfig<192, /*promotion interval*/ 4, /*store pass columns*/ 192, /*stages*/ 4,
                                  /*scale steps ahead*/ 2>;
  using NarrowTiles = Fp8GemmConfig<128, /*promotion interval*/ 4, /*store pass columns*/ 128, /*stages*/ 6,
                                    /*scale steps ahead*/ 2>;
  launch_fp8_tile_per_shape<WideTiles, NarrowTiles, Fp8Scaling::block>(args, stream, cache);
}

}  // namespace kc::stage3
