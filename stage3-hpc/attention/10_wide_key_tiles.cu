// Rung 10 — 256-key tiles at D = 64: the other way to spend the registers.
//
// Idea: rung 09 spends the registers rung 07 leaves unused at D = 64 on a third consumer. The other
// way is a wider K/V tile: with two consumers of 240 registers a thread, S over 256 keys (128
// FP32 values a thread), its P (64 registers) and O (32) fit together. cuDNN's SDPA kernel at
// D = 64 on the H100 runs 64 x 256 x 64 tiles in three warpgroups of 128 threads (its name and
// launch in ncu: stage-3 README). Per K/V tile a consumer then does twice the work for the same
// fixed costs — one wait for the stage, one turn of the ping-pong, one WGMMA wait, one rescale of
// O, one pair of shuffles for the row maxima — and S is issued as one m64n256k16 WGMMA a k16 step
// instead of one m64n128k16: half as many WGMMA instructions per FLOP.
//
// What changed from rung 07, two things that go together: at D = 64 the K/V tile, 128 -> 256 keys
// (FlashWgmmaShape<64, 2, 256>: S on wgmma m64n256k16, 4 a tile; P V in 16 k16 steps; a ring of 3
// stages of 32 KiB K and V tiles, 208 KiB with Q), and the consumer's loop, FlashLoop::ping_pong
// (FlashWgmmaConsumer::run_serial<true>: rung 06's loop): rung 07's turns between the two
// consumers, but not its overlap inside the warpgroup. That overlap issues S of tile t while P V of tile t - 1 still reads
// P from registers, so it holds S (128 registers a thread at 256 keys), P (64) and O (32) at once;
// with rung 07's loop ptxas spilled 36 values a thread around the WGMMAs. Without it S is dead once
// P is rounded, and each tile takes two turns: issue S, let the other consumer issue, wait for S
// and compute the softmax, then issue P V. cuDNN's kernel shows the same pattern in ncu: most of its
// consumers' stalls wait for all of their own WGMMAs (WARPGROUP.DEPBAR.LE gsb0, 0x0), a few for a
// named barrier. D = 128 runs rung 07's kernel (S, P and O of 256 keys at D = 128 would need 256
// registers a thread).
//
// Expected limiter: rung 07's at D = 64 — the tensor cores and the exponentials ask for about the
// same time — with half the fixed costs per score, less the softmax that no longer hides under the
// consumer's own P V (only under the other consumer's WGMMAs). Under the causal mask a 256-key tile
// crosses the diagonal of a 128-row query tile with more masked work, and at Sk = 1024 a CTA has 4
// tiles instead of 8.
//
// SASS to look for (the D = 64 kernel): 4 HGMMA.64x256x16.F32 for S and 16 HGMMA.64x64x16.F32 for
// P V, all in the loop; WARPGROUP.DEPBAR.LE gsb0, 0x0 only (no wait_group 1); BAR.SYNC / BAR.ARV
// on barriers 1 and 2; USETMAXREG.TRY_ALLOC with 240; no LDL/STL.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/(07|09|10)' --shapes 4x32x32x4096x4096x64
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_10_wide_key_tiles(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 10", FlashWgmmaShape<64, 2, 256>::kBlockRows);
  if (args.head_dim == 64)
    launch_flash_wgmma<T, 64, FlashLoop::ping_pong, 2, 256>(args, stream, cache);
  else
    launch_flash_wgmma<T, 128, FlashLoop::overlapped>(args, stream, cache);
}

template void attention_fwd_10_wide_key_tiles<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                            HopperLaunchCache&);
template void attention_fwd_10_wide_key_tiles<__half>(const AttentionArgs<__half>&, cudaStream_t, HopperLaunchCache&);

}  // namespace kc::stage3
