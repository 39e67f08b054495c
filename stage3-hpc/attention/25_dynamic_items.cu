// Rung 25 — rung 20 with each CTA taking its next work item when it is ready for one.
//
// Idea: the persistent rungs 08 and 18-20 deal item b + k . gridDim.x to CTA b, fixed before the
// launch. That balances the CTAs' work only while neighbouring items weigh about the same: rung
// 08's order (every pair's heaviest query tile, then every pair's next) leaves the busiest CTA
// 3-6% above the mean under the causal mask, but rung 20's groups run heavy to light every few
// hundred items, and a CTA dealt items a fixed stride apart meets the heavy ends more often than
// another: counting a query tile's K/V tiles as its work, the busiest CTA gets 1.26-1.30 times the
// mean at 1k-16k keys (D = 128, the papers' shapes; tests/attention_work_order_test.cpp counts
// it), about what rung 20 lost to rung 15 with the mask. Here a CTA starts on item blockIdx.x
// and then takes the next item not yet taken, gridDim.x + atomicAdd(counter, 1), whenever its
// producer is ready to load one (FlashAttention-3's dynamic persistent scheduler): a CTA that
// finishes early takes more, and the CTAs that run at once still walk one group's K and V.
//
// What changed from rung 20: kDynamicItems (flash_wgmma_persistent_kernel →
// flash_persistent_dynamic in attention/flash_wgmma_kernel.cuh): the producer warp takes the items
// (the next one once it has issued the current one's last K/V copy, so the atomic's round trip
// hides behind the consumers' last tiles) and hands each to the consumers through a slot of shared
// memory with two mbarriers of its own (item_full, item_empty), the end too (no item). The counters
// live in the launch cache, a pair per stream (HopperLaunchCache::work_counters); the last CTA to
// finish sets them back to zero. Without the mask the same kernel runs rung 19's order.
//
// Expected limiter: with the mask, rung 15's per-tile work again, plus what the persistent CTAs
// save (the next item's Q and first K/V tiles load under the current item's last tiles); the
// atomic costs one L2 round trip an item, hidden. Without the mask rung 19's (level with it).
//
// SASS to look for: rung 20's, plus two ATOMG.E.ADD (the next item; the finished count), the
// SHFL.IDX that gives the producer warp the item, the consumers' REDUX.OR that puts it in a uniform
// register (read as a plain value, the stages' arithmetic left the uniform datapath: 88 R2UR and
// 16 BRA.DIV divergence checks before the warpgroup instructions, against rung 20's 30 and 0), and
// the hand-over's STS / LDS around its two mbarriers. No spills.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/(15|20|25)_' --param causal=1 --shapes 8x16x16x2048x2048x128
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_25_dynamic_items(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 25", FlashWgmmaShape<64, 3>::kBlockRows);
  if (!(args.scale > 0.f)) {  // rung 15's consumers need a positive scale; rung 15 passes it on
    attention_fwd_15_lazy_rescale(args, stream, cache);
    return;
  }
  // <T, D, consumers, kLeanConsumers, kTurnsRunOn, kPairTilesTogether, kCausalPairGroups, kDynamicItems>
  if (args.head_dim == 64)
    launch_flash_wgmma_persistent<T, 64, 3, true, true, true, true, true>(args, stream, cache);
  else
    launch_flash_wgmma_persistent<T, 128, 2, true, true, true, true, true>(args, stream, cache);
}

template void attention_fwd_25_dynamic_items<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                            HopperLaunchCache&);
template void attention_fwd_25_dynamic_items<__half>(const AttentionArgs<__half>&, cudaStream_t, HopperLaunchCache&);

}  // namespace kc::stage3
