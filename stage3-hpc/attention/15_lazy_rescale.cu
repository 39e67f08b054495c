// Rung 15 — the softmax's base moves only when it must.
//
// Idea: the online softmax keeps each row's running maximum m and writes its probabilities as
// 2^(s - m); when a tile raises m, the sum and the O accumulators so far are multiplied by
// 2^(m_old - m_new). Rungs 06-14 do that multiply on every tile, factor 1 or not: at D = 128 it is
// 64 FMULs a thread a tile (O's 64 accumulators), one for every score — as many as rung 13 took
// out of the exponent. But m need not be the maximum: any base b works, so long as the sum and O
// are relative to the same b (O / sum and the LSE b + log2 sum do not depend on it) and no 2^(s - b)
// overflows. So a row keeps its base while the tile's maximum rises by at most 8 (log2 units):
// its probabilities then stay below 2^8 = 256 — far inside FP32, BF16 and FP16 (whose rounding of P
// is relative, so the same) — and its factor is exactly 1. Only a larger rise moves the base.
// On scores that settle after the first tiles (the running maximum of a row of independent random
// scores grows ever more slowly, like the square root of the log of the keys seen) the base moves
// in the first tile or two and then seldom, so a warp whose 16 rows all kept theirs skips O's
// multiply (a vote, one warp-uniform branch). The idea is FlashAttention-4's (on Blackwell, where the
// rescale sits on the critical path); here it is one more cut in the softmax's instruction count,
// which limits D = 64 and shares the issue slots with the WGMMAs' neighbours at D = 128.
//
// What changed from rung 14: softmax_probabilities' kLazyRescale (attention/fa2_mma.cuh; the
// threshold kLazyRescaleLog2 = 8) and FlashWgmmaConsumer::rescale_o, through the kernel's
// kLazyRescale. A NaN, an infinite or a first finite maximum moves the base as before, so
// non-finite inputs give rung 14's results.
//
// Expected limiter: rung 14's, with up to 64 (D = 128) or 32 (D = 64) FMULs a thread a tile fewer
// once the bases settle; short sequences gain least (the first tiles move the base).
//
// SASS to look for: rung 14's HGMMA counts; a VOTE.ANY before O's FMULs, and the FMULs behind a
// branch.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/1[45]_' --shapes 4x16x16x4096x4096x128
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_15_lazy_rescale(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 15", FlashWgmmaShape<64, 3>::kBlockRows);
  if (!(args.scale > 0.f)) {  // rung 13's softmax needs a positive scale; rung 12's kernels otherwise
    attention_fwd_12_added_descriptors(args, stream, cache);
    return;
  }
  if (args.head_dim == 64)
    launch_flash_wgmma<T, 64, FlashLoop::overlapped, 3, 128, true, true, true, true, true>(args, stream, cache);
  else
    launch_flash_wgmma<T, 128, FlashLoop::overlapped, 2, 128, true, true, true, true, true>(args, stream, cache);
}

template void attention_fwd_15_lazy_rescale<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                           HopperLaunchCache&);
template void attention_fwd_15_lazy_rescale<__half>(const AttentionArgs<__half>&, cudaStream_t, HopperLaunchCache&);

}  // namespace kc::stage3
