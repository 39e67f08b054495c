// Rung 11 of the GGUF GEMV — rung 07 with x staged in step with the weights: each consumer warp
// stages only the slice of x its own chunk multiplies, a stage ahead, during the CTA's first tile.
//
// Idea: rung 07 (its header) stages all of x into shared memory before its consumers take the
// first stage of weights: after the wait for the kernel ahead, every consumer thread loads its
// pieces of x (M x K x 2 bytes, with SwiGLU's prologue M x 2K x 2 bytes of [gate | up]) from the L2,
// applies the prologue and stores them, and the consumers meet at a barrier. Meanwhile the
// producer has filled the ring's four stages and waits for one to free: the weights' stream
// stands still for the whole staging, in every CTA at once. Where a link's CTAs run one tile each
// — the 8B shape's down projection at K = 14336 takes 256 tiles, one a CTA — the staging of 57 KB a
// CTA from the L2 is a fixed cost in front of a stream of 16 columns x 14336 weights, and the whole
// GPU's DRAM stream waits for it. But a consumer warp never reads more of x than its own chunks:
// chunk c of a tile (128 k of every row) goes to warp c % 8, in every tile. So rung 11 lets each
// warp stage exactly those slices, during its first tile: before it multiplies stage t it stores
// the slice of its chunk of stage t (loaded one stage earlier, in registers) and issues the loads
// of its next chunk's slice, which are in flight under stage t's products. Only the warp reads
// what it stored, so a __syncwarp orders it, not a barrier of the consumers; the producer's stream
// never waits for x. From the second tile on, x is in shared memory as in rung 07.
//
// What changed from rung 07: XStaging::bf16_in_step (gemv_x_resident_frame.cuh): no stage_x and
// barrier before the loop; load_x_slice / store_x_slice in the first tile's stages. The values of
// x in shared memory and every product are rung 07's, so with no prologue, and with SwiGLU, y is
// rung 07's bits (rung 06's: a GPU test holds it to that). With the RMSNorm prologue each warp adds
// its slices' squares into its own sum of the row, and the store adds the warps' sums as rung 07
// does: the same terms in another order, within the op's bound.
//
// Expected limiter: the DRAM stream of the weights, from the first stage on. What it costs: the
// slice's registers (one 16-byte piece, and the prologue's second operand, for each of 4 kRowGroups
// row pairs a lane; one pair at M = 1, whose instances ask for two CTAs an SM as rung 07's get)
// across each first-tile stage, and a load a stage in the first tile for every consumer warp.
// Where CTAs run several tiles, x is staged during the first of them only.
//
// Measured (stage-3 README, "Rung 11"): slower than rung 07. The stall at the staging is real, but
// the slices add instructions to every first-tile stage — every stage, where CTAs run one tile —
// and a CTA's ring turns over only as fast as its consumers: the prediction missed the consumers.
//
// SASS to look for (sm_90a): rung 07's producer and programmatic launch (UBLKCP.S.G, SYNCS.*,
// PREEXIT, ACQBULK); in the consumers' loop, the next slice's LDG.E.128.CONSTANT just before the
// ring's SYNCS.PHASECHK wait, and this slice's stores (ptxas may split a 16-byte store of x into
// four STS) behind a __syncwarp (BRA.DIV and a NOP); no BAR.SYNC between ACQBULK and the loop (the
// one left is the store's named barrier); LDS.128 and HMMA.16816.F32.BF16 as rung 07; no LDL/STL.
// Hopper only, as rung 06.
//
// Run just this rung against rung 07:
//   kc-bench --filter 'stage3/gemv_gguf/(07|11)' --param layout=3 --param ggml_type=3
#include "gemv_x_resident_frame.cuh"

namespace kc::stage3 {

bool gemv_gguf_11_fits(GgufBlockType type, int m, int k) { return x_fits(type, m, k, XStaging::bf16_in_step); }

void gemv_gguf_11_link(const GgufGemvLinkArgs& args, cudaStream_t stream) {
  launch<XStaging::bf16_in_step, false>(args, stream);
}

void gemv_gguf_11_x_in_step(const GgufGemvArgs& args, cudaStream_t stream) {
  launch<XStaging::bf16_in_step, false>(plain_link(args), stream);
}

void gemv_gguf_11_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream) {
  launch<XStaging::bf16_in_step, true>(plain_link(args), stream);
}

}  // namespace kc::stage3
