// Rung 09 — the epilogue through shared memory with a TMA store (sm_90a).
//
// Idea: in rungs 04-08 every consumer thread writes its own 4-byte pairs to C: each warp store
// touches 8 rows x 16 bytes, half-used 32-byte sectors, and 64 four-byte store instructions per
// thread per tile (each in its own guarded block). Instead, the consumers write their BF16
// results into shared memory (64 x 64 boxes in the 128-byte swizzle, so the writes are
// bank-conflict-free), fence the generic proxy against the async proxy (fence.proxy.async), meet
// at a named barrier, and one thread hands each box to TMA (cp.async.bulk.tensor
// global.shared::cta), which writes whole lines and clips at the edges of C.
// The stores complete in the background (bulk async-groups) while the warpgroup goes on; only the
// next use of the buffer waits for them to have read it (cp.async.bulk.wait_group.read).
//
// What changed from rung 07: the epilogue alone (store_accumulators_tma in epilogue_tma_store.cuh);
// the raster band stays rung 07's 8 tile rows. kc-hgemm-tune times rung 07's configuration beside
// this one in the same run (docs/benchmarks/h200/hgemm_tune.json), which separates the epilogue
// from the band: the README's rung 09 section gives the figures.
// A consumer's 64 x 256 result leaves in two passes of 64 x 128 through a 16 KiB buffer, so the
// epilogue takes 32 KiB of shared memory and the pipeline keeps its 4 stages of 48 KiB.
// The configuration (TmaStoreConfig in warp_specialized_config.cuh: cluster size, stages, store
// pass width, raster band) is the one kc-hgemm-tune (gemm/tune/hgemm_tune.cu) measures against
// its alternatives; rung 10 shares it.
// TMA needs rows of C to be a multiple of 16 bytes: when N % 8 != 0 this rung falls back to rung
// 07's direct stores.
//
// Layouts: A row-major M x K, B N x K, C row-major. Any M, N; K a multiple of 8.
// SASS to look for: UTMASTG.2D, UTMACMDFLUSH, FENCE.VIEW.ASYNC.S, BAR.SYNC with a named barrier,
// plus everything of rung 07.
// Expected limiter: tensor-core throughput.
//
// Run just this rung:  kc-bench --filter stage3/hgemm/09_tma_store
#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {

void hgemm_09_tma_store(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  using Config = TmaStoreConfig<Identity>;
  launch_warp_specialized<Config>(args, Identity{}, Schedule::persistent, stream,
                                  cache);
}

}  // namespace kc::stage3
