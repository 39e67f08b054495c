// Rung 27 — rung 10's 256-key tiles at D = 64, with rung 15's consumers.
//
// Idea: cuDNN's D = 64 kernel on an H100 runs 256-key tiles (its name says 64x256x64; the ncu note
// docs/notes/2026-12-06-stage3-attention-cudnn-d64-launch-h100-291b6b4.md), where rungs 15 and 19
// run 128. Rung 10 tried that tile against rung 07 and lost: S, P and O of 256 keys fill a
// consumer's 240 registers, so it keeps the ping-pong between the two consumers but gives up the
// overlap inside a warpgroup. Since then rungs 11-15 made every tile cheaper — the producer asleep,
// descriptors moved by addition, the scale inside the exponent's FFMA, the softmax's base moved
// only when it must. Here rung 10's kernel gets them all: a tile's fixed work (the row maxima and
// sums, the rescale's vote, the barrier waits and the turns) spread over twice the keys.
//
// What changed from rung 10: flash_wgmma_kernel's kProducerSleeps, kDescriptorsAdded,
// kScaleInExponent, kRowlessConsumersLeave and kLazyRescale on rung 10's shape
// (FlashWgmmaShape<64, 2, 256>, FlashLoop::ping_pong); D = 128 runs rung 15.
//
// Expected limiter: the ping-pong alone — each consumer's softmax must hide under the other's
// MMAs, with no overlap inside a warpgroup — against rung 15's three consumers with both overlaps;
// which wins at D = 64 is the question this rung asks.
//
// SASS to look for (D = 64): rung 10's 4 HGMMA.64x256x16 for S and 16 HGMMA.64x64x16 for P V a
// tile, rung 15's NANOSLEEP.SYNCS and VOTE.ANY; no spills.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/(10|15|27)_' --shapes 4x32x32x4096x4096x64
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_27_wide_tiles_lean_softmax(const AttentionArgs<T>& args, cudaStream_t stream,
                                              HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 27", FlashWgmmaShape<64, 3>::kBlockRows);
  if (!(args.scale > 0.f) || args.head_dim != 64) {  // rung 15 at D = 128, and for other scales
    attention_fwd_15_lazy_rescale(args, stream, cache);
    return;
  }
  // <T, D, loop, consumers, keys a tile, kProducerSleeps, kDescriptorsAdded, kScaleInExponent,
  //  kRowlessConsumersLeave, kLazyRescale>: rung 10's shape with rung 15's five knobs
  launch_flash_wgmma<T, 64, FlashLoop::ping_pong, 2, 256, true, true, true, true, true>(args, stream, cache);
}

template void attention_fwd_27_wide_tiles_lean_softmax<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&,
                                                                      cudaStream_t, HopperLaunchCache&);
template void attention_fwd_27_wide_tiles_lean_softmax<__half>(const AttentionArgs<__half>&, cudaStream_t,
                                                               HopperLaunchCache&);

}  // namespace kc::stage3
