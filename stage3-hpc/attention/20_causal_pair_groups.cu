// Rung 20 — rung 19 with the causal items grouped by pair, heaviest first inside each group.
//
// Idea: rung 19 dealt a pair's query tiles together only without the mask; with it, it kept rung
// 08's order — every pair's heaviest query tile, then every pair's next — which balances the
// persistent CTAs' work but puts 132 different pairs in flight where there are more pairs than
// SMs, so a pair's K and V are read again a round later, after the L2 has let them go (the stage-3
// README's rung 19 section has what that order cost with the mask). Here the pairs
// are taken in groups whose K and V fit in 16 MiB (32 pairs at 1k keys and D = 128, 2 at 16k), and
// inside a group the items still run heaviest first with the pair fastest: the CTAs that run at
// once read a group's K and V, and each CTA, dealt items round-robin across the groups, still gets
// heavy and light ones. FlashAttention-3's scheduler for the causal case does much the same (its
// L2 swizzle of heads).
//
// What changed from rung 19: kCausalPairGroups (flash_work_item in attention/flash_work_order.hpp;
// the group budget kFlashPairGroupBytes); without the mask nothing.
//
// Expected limiter: rung 19's without the mask; with it, the per-item costs rung 18 tried to hide
// and the balance between the CTAs (a group's last items are its lightest).
//
// SASS to look for: rung 19's, with the groups' divisions (64-bit) in the item arithmetic.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/(15|19|20)_' --param causal=1 --shapes 16x16x16x1024x1024x128
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_20_causal_pair_groups(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 20", FlashWgmmaShape<64, 3>::kBlockRows);
  if (!(args.scale > 0.f)) {  // rung 15's consumers need a positive scale; rung 15 passes it on
    attention_fwd_15_lazy_rescale(args, stream, cache);
    return;
  }
  if (args.head_dim == 64)
    launch_flash_wgmma_persistent<T, 64, 3, true, true, true, true>(args, stream, cache);
  else
    launch_flash_wgmma_persistent<T, 128, 2, true, true, true, true>(args, stream, cache);
}

template void attention_fwd_20_causal_pair_groups<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                                 HopperLaunchCache&);
template void attention_fwd_20_causal_pair_groups<__half>(const AttentionArgs<__half>&, cudaStream_t,
                                                          HopperLaunchCache&);

}  // namespace kc::stage3
