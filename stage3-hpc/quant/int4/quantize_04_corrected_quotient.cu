// int4 quantize rung 04 — rung 02 with each value's quotient corrected instead of tested for a
// tie: the same bytes, no branch and no rare path (sm_80 and newer).
//
// Idea: rung 02 rounds w x (1 / scale) and re-does with the reference's division the values whose
// product lies near a half-integer, where the product's rounding could differ from the rounded
// quotient's. Such values are common (a bf16 weight and a half scale often divide to an exact
// half), and the lanes that hold one make the rest of their warp wait. Instead, correct the
// quotient itself, as a division's last step does: with r = 1 / scale correctly rounded,
//   q0 = w r,   rem = w - q0 scale (exact in one fused multiply-add),   q = q0 + rem r (rounded once),
// which is Markstein's correction: q is w / scale as IEEE division rounds it. For this op's
// operands (a bf16 w, a positive finite half scale) the host test checks it against the division
// for every pair whose quotient is at most 64 in magnitude (every pair a valid group can have):
// bit for bit down to |w / scale| = 2^-60, and always the same after rintf (below that the
// remainder underflows, and both round to 0). So rintf(q) is the reference's, with no test.
// rint and the zero point then take two additions, the clamp two min/max, the packing one integer
// multiply-add (int4_pack_corrected in kc/stage3/quantize_int4_args.hpp, which the test also runs
// against int4_quantize_value).
// What changed from rung 02: the per-value arithmetic only (the lane layout, the fold, the group's
// scale and zero point and the stores are rung 02's, in quantize_int4_reciprocal.cuh).
// Expected limiter: instruction issue as in rung 02, with every lane of a warp active: an FMUL, two
// FFMA, an FADD, two FMNMX and an IMAD a value, and no compare.
//
// What to look for: per value FMUL, FFMA, FFMA, FADD, FMNMX, FMNMX, IMAD (or LEA); no FSETP and no
// CALL in the packing (rung 02 has both); no local memory.
//
// Run just this rung:  kc-bench --filter stage3/quantize_int4/04
#include "quantize_int4_reciprocal.cuh"

namespace kc::stage3 {

void quantize_int4_04_corrected_quotient(const QuantizeInt4Args& a, cudaStream_t stream) {
  quantize_by_reciprocal<4, true, true>(a, stream);
}

}  // namespace kc::stage3
