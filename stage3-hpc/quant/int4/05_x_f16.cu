// Rung 05 of the int4 GEMV — rung 04 with x as the tensor cores want it: the GGUF GEMV's rung 08
// on 4-bit groups.
//
// Idea: rung 04's chunk costs a warp, at M = 1 and G = 128, 16 HMMA for 4 blocks: two k16 products
// a block against x for c = sum x (128 + q), and two more against ones for S = sum x, which the
// zero point needs (acc += s c - (128 + z) s S). Half of its tensor-core work is the sums of x —
// the same for every one of the weight's rows. The GGUF rung 08 (quant/08_gemv_gguf_x_f16.cu,
// whose header has the argument) forms those sums once per launch while it stages x, and stores x
// in fp16 so that a nibble pair decodes with one LOP3 straight into the fp16 value 1024 + q (or
// 1024 + 16 q, the nibble 4 bits up, against x divided by 16); the accumulator then starts from
// minus 1024 times the block's sum of stored x, so the products give sum q x directly. The groups'
// quants are q4_1's nibble words byte for byte, so rung 08's staging of x for q4_1 is this rung's
// as it is.
//
// What changed from rung 04: x in shared memory as fp16, each row scaled by a power of two (rung
// 08's XStaging::f16_scaled; the store undoes the scale), with each block's {start, S} formed in
// the staging; the chunk's arithmetic (Int4F16Chunks in gemv_int4_x_resident.cuh): per group the
// blocks' products chained in FP32 from the sum of their starts (one FADD an output a block), c =
// sum q x, then acc += s c - z s S — at M = 1 and G = 128, 8 HMMA and 4 FFMA a chunk where rung 04
// spends 16 HMMA and 4 FFMA. Not rung 04's bits: fp16 x with a per-row power-of-two scale holds
// every bf16 value of x exactly unless it is 2^28 times smaller than its row's largest, and the
// sums are added in another order.
//
// Expected limiter: the DRAM stream, as rung 04; at M = 1 the consumers' instructions a chunk
// fall, which matters where a CTA takes several tiles (the decode chain's projections on 132 SMs,
// rung 08's finding for q4_1). x and its sums take M x (K + 8) x 2 + M x K / 32 x 16 bytes next to
// the ring; more is refused (gemv_int4_05_fits).
//
// SASS to look for (sm_90a): rung 04's producer, programmatic launch and staging, SHFL.BFLY in the
// staging (row maxima, block sums), HMMA.16816.F32 on fp16 in the loop (no HMMA.16816.F32.BF16),
// LOP3.LUT for the decode; no LDL/STL. Hopper only.
//
// Run just this rung: kc-bench --filter 'stage3/gemv_int4/0[45]' --shapes 1x4096x4096,1x14336x4096
#include "quant/int4/gemv_int4_x_resident.cuh"

namespace kc::stage3 {

bool gemv_int4_05_fits(int m, int k, int group_size) { return int4_x_fits(m, k, group_size, XStaging::f16_scaled); }

void gemv_int4_05_link(const Int4GemvLinkArgs& args, cudaStream_t stream) {
  launch_int4<XStaging::f16_scaled, false>(args, stream);
}

void gemv_int4_05_x_f16(const Int4GemvArgs& args, cudaStream_t stream) {
  launch_int4<XStaging::f16_scaled, false>(plain_int4_link(args), stream);
}

void gemv_int4_05_swapped_nibbles(const Int4GemvArgs& args, cudaStream_t stream) {
  launch_int4<XStaging::f16_scaled, true>(plain_int4_link(args), stream);
}

}  // namespace kc::stage3
