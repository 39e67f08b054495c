// FP8 grouped GEMM, rung 02 — rung 01's walk on 128 x 192 tiles: the FP8 GEMM's rung 10 kernel (sm_90a).
//
// Idea: rung 01 is the FP8 GEMM's rung 09 kernel, and where the experts are large (thousands of
// tokens each) it is as fast as rung 09 is on one GEMM of that size. There the FP8 GEMM's ladder
// already found the faster kernel: rung 10, whose 128 x 192 tiles spread each K step's fixed work
// (the barrier waits, the stage's bookkeeping, A's share of the shared-memory reads) over 1.5 times
// the columns. This rung walks the grouped tile table with that kernel.
//
// What changed from rung 01 (fp8_gemm_kernel.cuh, Config::kGrouped on the step-by-step walk of
// Fp8BlockScaleWalk::wide_scales_in_stage): the tile is 128 x 192, so the host builds the tile
// table with 192-column tiles (ceil(N / 192) tile columns an expert); the producer writes the
// expert's two blocks of B's scales a 192-wide tile can touch (s_B[g][n block] and the next, or
// the expert's last block again where there is no next: those columns are not stored); the
// consumers walk rung 10's way (one `partial` set, each step waited for and promoted; B's two
// scales read by lane 0 and passed on); the epilogue is rung 01's (a 64-row half inside its expert
// by TMA store in 192-column passes, the others straight from the registers with the expert's rows
// as the edge). An expert's last tile column may reach past N into the next expert's rows of B (or
// past the last expert's, where TMA reads zeros): those columns are computed and never stored.
//
// Expected limiter: large experts: the tensor cores, as FP8 rung 10 at the same M, N, K. Small
// experts (a few tiles each): the tile count and the thrown-away work, which the wider tile makes
// worse where N is not a multiple of 192 (N = 14336 is 74 2/3 tiles: a third of the last tile
// column wasted) and where fewer, longer tiles leave the last wave emptier.
//
// SASS to look for: rung 10's — 4 QGMMA.64x192x32.F32.E4M3.E4M3 a step, four LDS of the stage's
// scales (B's two by lane 0, two SHFL), 160 FFMA of the promotion in its two copies, the producer's
// two LDG of B's scales and three UTMALDG.2D — plus rung 01's tile-table search (LDG of tile_starts
// and row_starts), VOTE.ALL on the store's choice, UTMASTG.2D and the guarded STG.E.U16; no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/fp8_grouped_gemm/02_wide_tiles
//                      kc-bench --filter 'stage3/fp8_grouped_gemm/0[12]_' --shapes 8x14336x4096
//                               --param tokens=8192 --param row_align=4   (one line)
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {

void fp8_grouped_gemm_02_wide_tiles(const Fp8GroupedGemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  launch_fp8_grouped_gemm<Fp8GroupedWideTiles, Fp8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
