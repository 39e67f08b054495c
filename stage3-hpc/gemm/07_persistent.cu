// Rung 07 — a persistent kernel with a tile scheduler and a grouped raster order (sm_90a).
//
// Idea: launch only as many blocks as fit on the GPU at once (132 on an H100/H200: one per SM)
// and let each loop over output tiles (tile = blockIdx.x, blockIdx.x + gridDim.x, ...). Block
// setup (barrier init, register reallocation) is paid once, and — the real gain — the producer
// starts loading the next tile's stages while the consumers are still writing the previous tile's
// results, so the epilogue hides behind the mainloop. The order in which tiles are handed out is
// grouped (gemm_layout.hpp: grouped_tile): bands of 8 tile rows are walked column by column, so
// the ~132 tiles in flight at once read about 8 row-panels of A and ~17 column-panels of B,
// which stay resident in the 60 MiB L2. Rung 06's plain grid hands tiles out column-major (m
// fastest): a wave runs down whole tile columns and reads every row-panel of A. On an
// 8192 x 14336 output that is 64 + 3 = 67 panels per wave against 8 + 17 = 25 (gemm_layout_test
// counts them).
//
// What changed from rung 06: the grid (resident blocks instead of one block per tile) and the
// raster order; the kernel is the same (its tile loop ran once per block in rung 06).
//
// Layouts: A row-major M x K, B N x K. Any M, N; K a multiple of 8. SASS as rung 06.
// Expected limiter: tensor-core throughput; the partial last wave (tiles % 132) on small problems.
//
// Run just this rung:  kc-bench --filter stage3/hgemm/07_persistent
#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {

void hgemm_07_persistent(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  using Config = WarpSpecializedConfig<1, EpilogueKind::direct_store, Identity>;
  launch_warp_specialized<Config>(args, Identity{}, Schedule::persistent, stream,
                                  cache);
}

}  // namespace kc::stage3
