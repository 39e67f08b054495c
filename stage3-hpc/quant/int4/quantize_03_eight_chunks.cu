// int4 quantize rung 03 — rung 02 with eight 16-byte chunks a lane instead of four (sm_80 and newer).
//
// Idea: rung 02 cut the work per value to about nine instructions, but each lane still pays for
// its group once: the address arithmetic, the shuffles that combine the lanes' min and max, and
// three IEEE divisions (the scale (hi - lo) / 15, the zero point -lo / scale, the reciprocal
// 1 / scale), each a reciprocal estimate, its refinement and a range check. Over rung 02's 32
// values a lane that is several instructions a value on top of the nine. A lane holding 64
// values spends it over twice as many: G / 64 lanes a group (one at G = 64, two at G = 128, eight
// at G = 512; G = 32 keeps rung 02's one lane of four chunks), and 128 bytes of loads in flight a
// lane instead of 64.
// What changed from rung 02: the chunks a lane holds (the template argument of the shared kernel
// in quantize_int4_reciprocal.cuh); the bytes are the same.
// Expected limiter: DRAM bandwidth, if the extra 16 registers of held values do not cost more in
// occupancy (fewer warps to hide the load latency) than the amortized work saves.
//
// What to look for: rung 02's SASS with eight LDG.E.128 a lane and eight packing runs, and its
// register count (cuobjdump --dump-resource-usage) against rung 02's.
//
// Run just this rung:  kc-bench --filter stage3/quantize_int4/03
#include "quantize_int4_reciprocal.cuh"

namespace kc::stage3 {

void quantize_int4_03_eight_chunks(const QuantizeInt4Args& a, cudaStream_t stream) {
  quantize_by_reciprocal<8, true>(a, stream);
}

}  // namespace kc::stage3
