// Rung 04 of the int4 GEMV — a link of the decode chain: the GGUF GEMV's rung 07 frame on 4-bit
// groups. x is kept in shared memory with the norm or the activation before the projection done on
// the way in, the weights are streamed before the previous kernel ends, the CTAs are persistent.
//
// Idea: rungs 01 and 02 read the groups close to a copy of the same bytes when they run alone
// (stage-3 README), but the engine's decode step is a chain of kernels, and there a lone GEMV pays
// what the GGUF GEMV's rung 07 header lists: the RMSNorm before q|k|v and gate|up and the SwiGLU
// before down run as kernels of their own, every launch waits for the kernel before it to end
// before it asks for its first byte, and short CTAs fill and drain their ring once each. In the
// engine's first measurement (stage-4 README) the 8B shape's step on int4 groups streamed its
// weights at well under half the rate of its fused bf16 step. Rung 07 answered those costs for the
// GGUF blocks; its frame (quant/gemv_x_resident_frame.cuh) takes the weights' format as a template
// parameter, and this rung is that frame on the int4 groups' prepared layout.
//
// What changed from rung 02: the frame, all of it rung 07's — x staged once into shared memory by
// the consumer warps (with the RMSNorm's weight or silu(gate) . up applied, the 1 / RMS factor on
// the finished sums), the ring carrying only quants and scale entries, the producer starting on the
// weights while the kernel before still runs (a programmatic dependent), as many CTAs as fit each
// taking tiles blockIdx.x, blockIdx.x + gridDim.x, ..., up to three weights sharing x in one
// launch, y += where the residual stream takes it. The chunk's arithmetic is rungs 01 and 02's
// (gemv_int4_groups.cuh: a group's blocks summed on the tensor cores, its scale and zero point
// applied once), and the chunks of a tile go to the same warps in the same order with the warps'
// sums added in the same order: without a prologue and with beta = 0 it writes rungs 01 and 02's
// bits (a GPU test holds it to that). Rows of x past M read row M - 1 instead of zeros, as in
// rung 07: those columns of the products are never stored.
//
// Expected limiter: the DRAM stream of the weights; what is left of the chain's costs is the
// staging of x (K x 2 bytes from the L2 per CTA, once), the last round of tiles and each tile's
// store through shared memory. x must fit next to the ring: M x (K + 8) x 2 bytes and 4 stages of
// 8 chunks (8.5 KB a stage at G >= 128) in 200 KiB; larger M x K is refused with kc::Error
// (gemv_int4_04_fits says which fit; the engine then runs the norm, the activation and rung 02).
//
// SASS to look for (sm_90a): UBLKCP.S.G and SYNCS.* in the producer; PREEXIT and ACQBULK; LDG.E.128
// then STS.128 in the consumers' staging; LDS.128 (quants and x) and LDS.64 (scale entries at
// G >= 128), HMMA.16816.F32.BF16 in their loop; BAR.SYNC among the consumers; no LDL/STL. Hopper
// only, as rung 02.
//
// The Format, the link's checks and its launch are in gemv_int4_x_resident.cuh, which rung 05
// shares with x in fp16; this file holds rung 04's entry points.
//
// Run just this rung: kc-bench --filter 'stage3/gemv_int4/0[24]' --shapes 1x4096x4096,1x14336x4096
#include "quant/int4/gemv_int4_x_resident.cuh"

namespace kc::stage3 {

bool gemv_int4_04_fits(int m, int k, int group_size) {
  return int4_x_fits(m, k, group_size, XStaging::bf16_as_read);
}

void gemv_int4_04_link(const Int4GemvLinkArgs& args, cudaStream_t stream) {
  launch_int4<XStaging::bf16_as_read, false>(args, stream);
}

void gemv_int4_04_x_resident(const Int4GemvArgs& args, cudaStream_t stream) {
  launch_int4<XStaging::bf16_as_read, false>(plain_int4_link(args), stream);
}

void gemv_int4_04_swapped_nibbles(const Int4GemvArgs& args, cudaStream_t stream) {
  launch_int4<XStaging::bf16_as_read, true>(plain_int4_link(args), stream);
}

}  // namespace kc::stage3
