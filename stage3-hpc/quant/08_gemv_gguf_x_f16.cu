// Rung 08 of the GGUF GEMV — x in shared memory as the tensor cores want it: fp16 scaled per row,
// the block sums of x formed once, the nibbles decoded without shifts.
//
// Idea: rung 07's loop is now the block arithmetic (its header): a block and lane cost 8 LOP3
// and 6 shifts for the nibbles, 4 HMMA of which two multiply x by ones — the block's sum of x,
// the same in every tile the CTA takes — and 6 FFMA for the scales, two of them forming
// m - 128 d. x is in shared memory for the whole kernel, so it can be put in whatever form makes
// the products cheapest, once a CTA:
//   - fp16 instead of bf16. With 10 mantissa bits a nibble decodes into fp16 1024 + q with one
//     LOP3 (mask 0x000F000F, bias 0x6400) where it lies, and the nibble 4 bits up into 1024 + 16 q
//     with the other mask (0x00F000F0) and no shift: one shift a word of 8 nibbles, not three.
//     The factor 16 is taken out of x: the k of pairs 1 and 3 of every 8 are stored divided by
//     16. fp16 holds only up to 65504, so each row is scaled by a power of two that puts its
//     largest |x| in [2^14, 2^15) (exact: a bf16 value loses nothing in fp16 until it is 2^28
//     times smaller than the row's largest), and the store multiplies the row back.
//   - The sums of each block of x, once: the products of rungs 05-07 against ones go, and the
//     accumulator of a block's product starts from minus its offset (1024 times the sum of the
//     stored values, plus 8 times the block's sum of x in q4_0) instead of zero, so the product
//     is the sum of q x itself: acc += d c (q4_0, q8_0) or d c + m s (q4_1).
// Per block and lane: 2 shifts and 8 LOP3, 2 HMMA, 2 to 4 half-to-float conversions and 2 to 4
// FFMA (q4_0 / q4_1 at M = 1). Everything else is rung 07's (gemv_x_resident_frame.cuh): the ring,
// the persistent CTAs, the prologues, the links of up to three weights, beta, the programmatic
// launch. The bits differ from rung 07's (a different rounding of the same sums); the op's
// reference holds it to the op's tolerance.
//
// Expected limiter: as rung 07, with about a fifth fewer instructions a chunk in the q4 loops.
// The extra staging (a second pass over x and the quad sums) is once a CTA.
//
// SASS to look for (sm_90a): rung 07's (UBLKCP.S.G, SYNCS.*, PREEXIT, ACQBULK, LDG.E.128 then
// STS.128, a named BAR.SYNC); HMMA.16816.F32 (fp16 inputs, not .BF16), 8 a chunk; SHFL.BFLY in
// the staging (the quads' sums); no LDL/STL. Hopper only.
//
// Run just this rung: kc-bench --filter stage3/gemv_gguf/0[78] --param layout=3 --param ggml_type=3
#include "gemv_x_resident_frame.cuh"

namespace kc::stage3 {

bool gemv_gguf_08_fits(GgufBlockType type, int m, int k) { return x_fits(type, m, k, XStaging::f16_scaled); }

void gemv_gguf_08_link(const GgufGemvLinkArgs& args, cudaStream_t stream) {
  launch<XStaging::f16_scaled, false>(args, stream);
}

bool gemv_gguf_08_ctas_take_several_tiles(const GgufGemvLinkArgs& args) {
  bool several = false;
  launch<XStaging::f16_scaled, false>(args, nullptr, &several);
  return several;
}

void gemv_gguf_08_x_f16(const GgufGemvArgs& args, cudaStream_t stream) {
  launch<XStaging::f16_scaled, false>(plain_link(args), stream);
}

void gemv_gguf_08_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream) {
  launch<XStaging::f16_scaled, true>(plain_link(args), stream);
}

}  // namespace kc::stage3
