// Rung 06 — warp specialization: a producer warpgroup feeds two consumer warpgroups (sm_90a).
//
// Idea: give loading and computing to different warps, so that neither waits for the other.
// Warpgroup 0 is the producer: it gives most of its registers back (setmaxnreg.dec to 40) and one
// of its threads does nothing but wait for a free stage (empty mbarrier), announce the bytes and
// issue the TMA copies. Warpgroups 1 and 2 are consumers: they take the registers
// (setmaxnreg.inc to 232), wait for a full stage, issue WGMMAs, and free each stage as soon as
// the WGMMAs reading it have completed — while the next step's WGMMAs already run
// (wgmma.wait_group 1, not 0). No __syncthreads in the K loop any more: the stage ring and its two
// barrier arrays (full/empty) are the only synchronization (pipeline.cuh).
//
// What changed from rung 05: a third warpgroup that only loads; consumers release stages through
// mbarriers instead of a block-wide barrier, and keep one K step of WGMMAs in flight. Same
// 128 x 256 x 64 tile, 4 stages, one tile per block in plain order, direct-store epilogue.
//
// Layouts: A row-major M x K, B N x K. Any M, N; K a multiple of 8.
// SASS to look for: USETMAXREG (setmaxnreg), UTMALDG.2D, SYNCS.ARRIVE.TRANS64 / SYNCS.PHASECHK,
// HGMMA.64x256x16.F32.BF16, WARPGROUP.DEPBAR.LE gsb0, 0x1.
// Expected limiter: tensor-core throughput inside a tile; between tiles, the block's tail (the
// epilogue of one tile does not overlap the next tile's loads: that is rung 07).
//
// Run just this rung:  kc-bench --filter stage3/hgemm/06_warp_specialized
#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {

void hgemm_06_warp_specialized(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  using Config = WarpSpecializedConfig<1, EpilogueKind::direct_store, Identity>;
  launch_warp_specialized<Config>(args, Identity{}, Schedule::one_tile_per_block,
                                  stream, cache);
}

}  // namespace kc::stage3
