// Rung 17 — 176-key tiles at D = 128 without the mask.
//
// Idea: every K/V tile costs a consumer the same fixed work whatever its width: waiting for the
// tile's full barriers and for its turn in the ping-pong, passing the turn on, the WGMMA fences
// and commits, the quad shuffles of each row's maximum, the exponentials of the rescale factors,
// releasing the stage. A wider tile spreads that over more keys. At D = 128 a consumer of rung 15
// holds O (64 FP32 registers), S of 128 keys (64) and P (32) in its 240; 176 keys take S to 88
// and P to 44, which still fits, where 256 would not (rung 10 had to drop the overlap inside a
// warpgroup for 256 keys at D = 64). 176 is FlashAttention-3's own tile for D = 128 without the
// mask. The ring holds two stages instead of three (Q and two stages of 176-key K and V tiles are
// 208 KiB; a third would not fit in the SM's 227): the price of the wider tile.
//
// With the causal mask rung 17 runs rung 15: the mask's diagonal crosses a 176-key tile at more
// rows than a 128-key one, and FlashAttention-3 keeps 128 there. At D = 64 it runs rung 15 too.
//
// What changed from rung 15: FlashWgmmaShape's kBlockKeys = 176 (kStages 2), S's WGMMA
// m64n176k16 (sm90::wgmma_m64n176k16_ss, arch/sm90/wgmma_narrow.cuh), P V in 11 k16 slices. The
// rest is rung 15's kernel (its knobs all on).
//
// Expected limiter: rung 15's at D = 128 (the tensor cores, with the softmax under the other
// consumer's WGMMAs), with about a quarter less fixed work a key; against that, one stage less of
// the ring to hide the loads.
//
// SASS to look for: HGMMA.64x176x16.F32 for S (8 a tile) and HGMMA.64x128x16.F32 for P V (11 a
// tile); no LDL/STL (the wider S must still fit in 240 registers).
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/1[57]_' --shapes 4x16x16x4096x4096x128
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_17_wide_key_tiles_d128(const AttentionArgs<T>& args, cudaStream_t stream,
                                          HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 17", FlashWgmmaShape<64, 3>::kBlockRows);
  if (args.causal || args.head_dim != 128 || !(args.scale > 0.f)) {  // rung 15's kernels (or rung 12's)
    attention_fwd_15_lazy_rescale(args, stream, cache);
    return;
  }
  launch_flash_wgmma<T, 128, FlashLoop::overlapped, 2, 176, true, true, true, true, true>(args, stream, cache);
}

template void attention_fwd_17_wide_key_tiles_d128<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                                 HopperLaunchCache&);
template void attention_fwd_17_wide_key_tiles_d128<__half>(const AttentionArgs<__half>&, cudaStream_t,
                                                          HopperLaunchCache&);

}  // namespace kc::stage3
