// Rung 12 of the GGUF GEMV — rung 07 with x staged once a cluster: four CTAs on neighbouring SMs
// each load and prologue a quarter of x and store it into all four CTAs' shared memory.
//
// Idea: rung 07 (its header) keeps x in every CTA's shared memory, and every CTA stages all of it
// from the L2 after the wait for the kernel ahead: M x K x 2 bytes, and with SwiGLU's prologue
// M x 2K x 2 bytes of [gate | up]. Every CTA of the link reads the same bytes. At M = 1 on the 8B
// shape's down projection (K = 14336) that is 57 KB a CTA, some 15 MB from the L2 for two CTAs on
// each of 132 SMs — against 36.7 MB of q4_1 weights from DRAM in the whole link, and while the
// consumers stage, the producer's ring is full and the weights' stream waits. Rung 11 moved the
// staging under the stream and paid in instructions every stage (measured slower). Hopper's
// thread-block clusters offer the other cut: CTAs launched together on one GPC can store into each
// other's shared memory (distributed shared memory: mapa + st.shared::cluster). So rung 12 launches
// the link in clusters of kStagingCluster = 4 CTAs and lets CTA r of a cluster stage only pieces
// [r/4, (r+1)/4) of each row of x — the loads, the prologue and the rounding of rung 07's stage_x —
// and store each result into the same place of x_rows in all four CTAs. The L2 serves x a quarter
// as often, and each CTA's consumers load, convert and store a quarter of the pieces (plus three
// remote 16-byte stores each). Two phases of the cluster barrier order it: the first (arrived at
// once by every thread, waited for before the first remote store) says every CTA of the cluster has
// started; the second (release/acquire) ends the staging, in place of rung 07's named barrier. The
// producer warp's threads take part in both, lane 0 once its ring is full, so the weights' stream
// starts as rung 07's does.
//
// What changed from rung 07: XStaging::bf16_cluster_shared (gemv_x_resident_frame.cuh): stage_x
// over the CTA's share, storing into every CTA (its kClusterShared form), the cluster barrier's
// phases, the squares of the RMSNorm prologue kept as one set of warp sums for each CTA of the
// cluster, and a launch in clusters
// (cudaLaunchKernelEx with a cluster dimension; the grid a whole number of clusters, as many as
// cudaOccupancyMaxActiveClusters says the GPU holds at once; a CTA past the last tile stages its
// share and leaves). The values of x in shared memory and every product are rung 07's, so with no
// prologue, and with SwiGLU, y is rung 07's bits (rung 06's: a GPU test holds it to that). With the
// RMSNorm prologue the row's squares are the same terms added in another order, within the op's
// bound.
//
// Expected limiter: the DRAM stream of the weights; the staging's L2 reads a quarter of rung 07's.
// What it costs: the remote stores (three of every 16-byte piece, over the SM-to-SM network), two
// cluster-barrier phases, and clusters placed a GPC at a time (fewer CTAs at once than rung 07 if a
// GPC's SMs do not divide into fours).
//
// Measured (stage-3 README, "Rung 12"): slower than rung 07. Clusters of 4 must fit a GPC, so fewer
// CTAs run at once than rung 07 runs (a second pass over K for some where the tiles were one a
// CTA); the cluster barrier's release is a GPU-scope fence in every consumer thread; and the
// staging's L2 reads it removes were a small part of the L2's traffic — the count missed.
//
// SASS to look for (sm_90a): rung 07's producer and programmatic launch (UBLKCP.S.G, SYNCS.*,
// PREEXIT, ACQBULK); UCGABAR_ARV and UCGABAR_WAIT (the cluster barrier's phases); the staging's
// LDG.E.128.CONSTANT, an STS.128 of each piece and three ST.E.128 — generic stores into the
// cluster's shared-memory window (ptxas forms mapa's address with a PRMT of the other CTA's rank
// into the local offset, over SR_SWINHI: no MAPA instruction); the release before the second
// phase's arrival (MEMBAR.ALL.GPU, CGAERRBAR), CCTL.IVALL after each wait (the acquire); LDS.128
// and HMMA.16816.F32.BF16 as rung 07; no LDL/STL. Hopper only, as rung 06.
//
// Run just this rung against rung 07:
//   kc-bench --filter 'stage3/gemv_gguf/(07|12)' --param layout=3 --param ggml_type=3
#include "gemv_x_resident_frame.cuh"

namespace kc::stage3 {

bool gemv_gguf_12_fits(GgufBlockType type, int m, int k) {
  return x_fits(type, m, k, XStaging::bf16_cluster_shared);
}

void gemv_gguf_12_link(const GgufGemvLinkArgs& args, cudaStream_t stream) {
  launch<XStaging::bf16_cluster_shared, false>(args, stream);
}

void gemv_gguf_12_x_cluster_staged(const GgufGemvArgs& args, cudaStream_t stream) {
  launch<XStaging::bf16_cluster_shared, false>(plain_link(args), stream);
}

void gemv_gguf_12_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream) {
  launch<XStaging::bf16_cluster_shared, true>(plain_link(args), stream);
}

}  // namespace kc::stage3
