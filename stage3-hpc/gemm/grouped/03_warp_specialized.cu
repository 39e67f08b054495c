// Grouped GEMM, rung 03 — every expert's tiles on the GEMM ladder's Hopper kernel (sm_90a).
//
// Idea: rung 02 put every expert's tiles in one grid but ran each on rung 03's mma.sync body,
// which the GEMM ladder left behind at rung 04: on Mixtral-sized experts (thousands of rows, 14336
// x 4096 weights) the layer is compute-bound and needs WGMMA, TMA and warp specialization to
// approach the tensor cores' peak, as cuBLAS's per-expert GEMMs do. So this rung hands the same
// tile table (grouped_gemm_args.hpp: each expert's 128 x 256 tiles end to end, prefix sums of rows
// and tiles) to the persistent kernel of rung 07 (warp_specialized_gemm.cuh with
// GroupedWarpSpecializedConfig, launched by launch_grouped_warp_specialized): one CTA per SM loops
// over tiles, its producer warp issues the TMA loads of the next tile while its two consumer
// warpgroups finish the current one.
//
// What changed from the GEMM ladder's rung 07, in the kernel (each under Config::kGrouped):
//   - the walk: tile `linear` is found in the tile table (grouped_tile_at, a binary search over
//     G + 1 prefix sums) instead of by the grouped raster order; its A rows start at the expert's
//     first row, its B rows at the expert's weight (B is G x N x K, one G.N x K matrix to TMA);
//   - the loads: a tile that runs past the expert's last row loads the next expert's tokens
//     (TMA reads any rows inside A; past the last token it reads zeros), and a tile that runs past
//     N loads the next expert's weight rows: neither is ever stored;
//   - the epilogue: direct stores at the expert's first row of C, with M = the expert's rows, so the
//     edge guards keep every store inside the expert.
// What changed from grouped rung 02: the kernel (TMA + WGMMA, persistent, warp-specialized,
// instead of cp.async + mma.sync, one block per tile).
//
// Expected limiter: as rung 07 on large experts (the tensor cores), plus one partial tile row per
// expert; on small experts (DeepSeek-like, a few dozen rows each) reading B, as for every rung.
// The tile order (expert after expert, tile rows fastest) keeps one expert's weight panel in use
// by the CTAs that run at once.
//
// SASS to look for: rung 07's mainloop unchanged (UTMALDG, SYNCS, HGMMA.64x256x16.F32.BF16), the
// binary search (a short loop of LDG.E and ISETP) at the start of each tile, no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/grouped_gemm/03_warp_specialized
#include "kc/stage3/grouped_gemm_args.hpp"
#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {

void grouped_gemm_03_warp_specialized(const GroupedGemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  launch_grouped_warp_specialized<GroupedWarpSpecializedConfig>(args, stream, cache, "rung 03");
}

}  // namespace kc::stage3
