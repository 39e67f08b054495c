// Rung 08 — thread-block clusters with TMA multicast (sm_90a).
//
// Idea: two CTAs on neighbouring SMs (a cluster of 2 along M, launched with
// cudaLaunchAttributeClusterDimension) compute vertically adjacent 128 x 256 tiles, which need
// different A tiles but the same B tile. Each CTA loads only half of that B tile (128 x 64) and
// multicasts it (cp.async.bulk.tensor ... .multicast::cluster) into the shared memory of both CTAs,
// completing bytes on both CTAs' full barriers. L2 -> SM traffic for B halves; per CTA and K step,
// 16 + 16 KiB come from L2 instead of 16 + 32 KiB.
//
// What changed from rung 07: a stage may only be refilled when the consumers of *both* CTAs are
// done with it (each CTA's producer writes into both), so every consumer warp arrives on the empty
// barrier of each CTA in the cluster (mapa + mbarrier.arrive.shared::cluster), and the empty
// barriers count 2 x 8 arrivals. Barrier initialisation is published with a cluster barrier, and
// a final cluster barrier keeps a CTA alive until its peer can no longer touch its shared memory.
// The tile scheduler hands out 256 x 256 cluster tiles; when the number of tile rows is odd, the
// second CTA of the last strip computes on an in-bounds A box and writes nothing. The grid is the
// number of clusters that can be resident at once (cudaOccupancyMaxActiveClusters), times two.
//
// Layouts: A row-major M x K, B N x K. Any M, N; K a multiple of 8.
// SASS to look for: UTMALDG.2D.MULTICAST, the remote arrive (SYNCS.ARRIVE.TRANS64.RED.A1T0 ...
// on a mapa'd address), UCGABAR_ARV / UCGABAR_WAIT (cluster barrier), HGMMA.
// Expected limiter: tensor-core throughput; multicast trims L2 bandwidth pressure.
//
// Run just this rung:  kc-bench --filter stage3/hgemm/08_cluster_multicast
#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {

void hgemm_08_cluster_multicast(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  using Config = WarpSpecializedConfig<2, EpilogueKind::direct_store, Identity>;
  launch_warp_specialized<Config>(args, Identity{}, Schedule::persistent, stream,
                                  cache);
}

}  // namespace kc::stage3
