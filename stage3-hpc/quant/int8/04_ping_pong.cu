// INT8 GEMM rung 04 — the two consumer warpgroups on tiles of their own, taking turns (sm_90a).
//
// Idea: in rungs 01-02 both consumers share a 128 x 256 tile, so both finish its K loop together
// and both leave the tensor cores for its epilogue; for that time the SM's tensor cores idle. A
// profile (stage-3 README) found rung 02's tensor pipe idle more often than cuBLASLt's, not for
// lack of bandwidth, and cuBLASLt's kernel computing a 128 x 128 tile per warpgroup. Give each
// consumer whole tiles of its own, the
// two taking alternate tiles of the CTA's walk: the producer loads the tiles' K steps in walk order
// as before, so a consumer's first stages land once the other is finishing its K loop, and its
// WGMMAs run while the other converts and stores (CUTLASS calls the schedule ping-pong). The
// epilogue's time hides behind the other consumer's mainloop instead of stopping both.
//
// What changed from rung 01: a consumer's tile is 128 x 128 (two m64 halves, four
// wgmma m64n128k32 s8 each a K step: 64 + 64 accumulators a thread), a stage is 32 KiB (six of
// them) and is read and freed by one consumer (the ring's empty barriers count four warps), a
// consumer steps its pipeline state over the other's tiles, and the two K loops take turns in walk
// order through two named barriers (without the turn a consumer could wait on a stage two uses
// ahead of its barrier, whose parity then reads as complete: int8_gemm_kernel.cuh). The epilogue
// is rung 01's direct stores, per half.
//
// Layouts and limits: rung 01's. Expected limiter: the tensor cores, with the epilogue hidden.
// Measured, it is level with rung 02, not ahead (the stage-3 README's INT8 chapter).
// SASS to look for: IGMMA.64x128x32.S8.S8 (8 a K step), UTMALDG.2D, no LDL/STL.
//
// Run just this rung:  kc-bench --filter 'stage3/int8_gemm(_dequant)?/04_ping_pong'
//                      kc-bench --filter 'stage3/int8_gemm/0[24]' --shapes 8192x8192x8192
#include "int8_gemm_kernel.cuh"

namespace kc::stage3 {

void int8_gemm_04_ping_pong(const Int8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  dispatch_int8_gemm_output(args, [&](auto output) {
    launch_int8_gemm_pingpong_output<decltype(output)::value>(args, stream, cache);
  });
}

}  // namespace kc::stage3
