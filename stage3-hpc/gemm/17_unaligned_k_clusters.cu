// Rung 17 — rows that are not 128-byte aligned: rung 09 in clusters of two (sm_90a).
//
// Idea: a TMA box row of A or B is 64 bf16, 128 bytes. When K % 64 != 0 the rows of A and B (K
// elements each) do not start on 128-byte lines, so every box row straddles two lines of L2, and
// the copy engine asks L2 for it in more, smaller requests. Rung 09 then runs out of L2 bandwidth
// before the tensor cores run out of work (stage-3 README, rung 17: ncu's L2 requests and
// throughput at K = 4104 against K = 4160). Nothing in the kernel can
// realign the rows — the addresses are the caller's — but it can ask L2 for less: rung 08's
// clusters of two CTAs along M share each B tile through TMA multicast, so each B tile leaves L2
// once for two CTAs.
//
// What changed from rung 09: the cluster size, 1 -> 2 (WarpSpecializedConfig's kClusterM); the
// TMA-store epilogue, the persistent schedule, the 4 stages and the raster bands stay rung 09's.
// This is the configuration kc-hgemm-tune times as cluster2/stages4/pass128/band8 on aligned
// shapes, where rung 09's single CTAs measured a little faster. gemm() runs this rung where the
// rows of A and B are unaligned and those of C too (N % 8 != 0), where cuBLAS measured slower;
// where C's rows are aligned cuBLAS measured faster (kc/stage3/gemm.hpp, kCublasAlignedN).
//
// Layouts: A row-major M x K, B N x K, C row-major. Any M, N; K a multiple of 8.
// SASS to look for: rung 09's (UTMASTG.2D, HGMMA.64x256x16) plus rung 08's UTMALDG.2D.MULTICAST,
// the remote arrive on the peer's empty barrier and UCGABAR_ARV / UCGABAR_WAIT.
// Expected limiter: L2 bandwidth where the rows are unaligned (less of it than rung 09), tensor-core
// throughput where they are aligned.
//
// Run just this rung:  kc-bench --filter 'stage3/hgemm/(09|17)_' --shapes 4096x4096x4104,4096x4096x4160
#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {

void hgemm_17_unaligned_k_clusters(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  using Config = WarpSpecializedConfig</*kClusterM=*/2, EpilogueKind::tma_store, Identity, /*kStages=*/4,
                                       /*kStorePassColumns=*/128, /*kRasterBandTileRows=*/8>;
  launch_warp_specialized<Config>(args, Identity{}, Schedule::persistent, stream, cache);
}

}  // namespace kc::stage3
