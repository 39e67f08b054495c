// int4 quantize rung 02 — the same bytes as rung 01, with one division a lane instead of one a
// value, and four 16-byte loads in flight a lane instead of one (sm_80 and newer).
//
// Idea: rung 01 spends most of its instructions on `w / scale`. An IEEE division is a reciprocal
// estimate, its refinement, a range check and a branch to a slow path: ten or more instructions,
// for every value, when the op's budget at the H200's bandwidth is about 20 instructions a value
// for everything (2 bytes read and half a byte written a value; the GGUF quantize's rung 02 header
// works the budget out). A quotient that is only going to be rounded to an integer does not need
// to be exact, only exact enough that the rounding comes out the same:
//   - r = 1 / scale, correctly rounded, once a lane; then w * r is within |w / scale| x 2^-24 of
//     the exact quotient Q, and the reference's fl(Q) within half an ulp of Q; |Q| < 32 for every
//     group with a scale (the half scale is (hi - lo) / 15 rounded, and a scale that rounds to a
//     subnormal half at worst halves it), so both are within 2^-19 of Q;
//   - rint of either is rint(Q) unless Q is within 2^-18 of a half-integer (x.5), where a rounding
//     of the quotient could cross it or land on it (rint then rounds half to even);
//   - so each value computes v = fma(w, r, 1.5 x 2^23 + zero): one rounding of w * r + zero to an
//     integer (numbers in [2^23, 2^24) are spaced 1 apart, round to nearest even), which is
//     rint(w * r) + zero whenever w * r is not a tie; and d = fma(w, r, -rint(w * r)), the
//     distance to that integer. |d| within 2^-16 of 0.5 marks a near-tie, and such a value is
//     quantized again with the reference's division (int4_quantize_value), its nibble replaced
//     in the chunk's word. Near-ties are not rare in real data: a weight is a bf16 (8 significant
//     bits) and the scale a half, and w = (k + 1/2) s exactly for a few values in a thousand of
//     uniform random weights. So the fix is per value, in a function called only for a chunk
//     that holds one: the common path has no branch, and a warp pays a few dozen instructions for
//     each near-tie value among its 1024 rather than re-running whole lanes (which, tried first,
//     left most lanes of a warp idle while a few divided). The conformance data has grids of
//     ties, and a negative control without the fix fails on them;
//   - v clamped to [1.5 x 2^23, 1.5 x 2^23 + 15] has the nibble in its low 4 bits and the
//     constant 0x4B400000 above it: eight of them folded by acc = acc x 16 + bits (one LEA each)
//     give the packed word plus 0x4B400000 x 0x11111111, subtracted once (all mod 2^32).
// The min and max fold runs on the bf16 pairs as loaded, two values an instruction, with the NaN-
// keeping min/max (a group holding a NaN or an Inf ends with a lane whose lo or hi is not finite;
// one ballot tells every lane of the group).
// What changed from rung 01: the arithmetic above, and the lane layout: a lane takes four 16-byte
// chunks of its group (32 values; G / 32 lanes a group, from one lane at G = 32 to 16 at G = 512),
// chunk j, j + L, j + 2L, j + 3L for lane j of L, so each load instruction of a warp reads
// consecutive 16-byte pieces and each 4-byte store writes consecutive words; at G = 32 a lane's
// four chunks are its whole group and it stores them as one 16-byte word. Groups past 512 values
// (a multiple of 128) take 16 lanes and two passes, as rung 01's do.
//
// Expected limiter: DRAM bandwidth: about 10 instructions a value (bf16 to float, an FFMA, two
// FMNMX, an FADD and an FFMA with a compare for the tie check, a LEA; the fold's half an HMNMX2 a
// value twice) against the budget of about 20, and 64 bytes of loads in flight a lane.
//
// What to look for: four LDG.E.128 a lane, VHMNMX.BF16_V2.NAN for the fold (sm_90; HMNMX2 on
// sm_80), MUFU.RCP with its refinement once a lane (not a value), per value an FFMA, an FADD, an
// FFMA and an FSETP.GE.OR, two FMNMX and a LEA or IMAD, a CALL to the near-tie fix behind one
// branch a chunk, VOTE.ANY for the group's validity, STG.E (STG.E.128 at G = 32); no local memory.
//
// Run just this rung:  kc-bench --filter stage3/quantize_int4/02
#include "quantize_int4_reciprocal.cuh"

namespace kc::stage3 {

void quantize_int4_02_reciprocal(const QuantizeInt4Args& a, cudaStream_t stream) {
  quantize_by_reciprocal<4, true>(a, stream);
}

void quantize_int4_02_without_tie_path(const QuantizeInt4Args& a, cudaStream_t stream) {
  quantize_by_reciprocal<4, false>(a, stream);
}

}  // namespace kc::stage3
