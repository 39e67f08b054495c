// Rung 19 — rung 18 with the query tiles of a (batch, head) pair dealt out together.
//
// Idea: rung 08's items (and rung 18's) put the (batch, head) pair fastest, so that under the
// causal mask the heaviest query tiles of every pair come first and each persistent CTA gets a
// fair mix of heavy and light items. Without the mask every item is as heavy as any other, and
// that order may only cost: where there are more pairs than SMs (256 at 1k keys and D = 128) the
// 132 CTAs that start together work on 132 different pairs, each K/V tile in flight is read by one
// CTA, and a pair's K and V are read again by its next query tile only a round later, after the
// other pairs' 60-odd MiB have gone through the L2. Rung 07's grid, one CTA per query tile with the
// query tile in blockIdx.x, had the CTAs that run at once share the K and V of a few pairs (8
// query tiles a pair at 1k keys: a K/V tile read by 8 CTAs at about the same time). So without the
// mask the items put the query tile fastest: item i is
// query tile `query_tiles - 1 - i % query_tiles` of pair i / query_tiles. With the mask they keep
// rung 18's order, which balances the CTAs' work.
//
// What changed from rung 18: kPairTilesTogether (flash_work_item in
// attention/flash_work_order.hpp); nothing else.
//
// Expected limiter: rung 18's; the difference, if any, without the mask at short sequences with
// many pairs (where the K/V of the pairs in flight outgrows what the L2 keeps) — this is the
// other half of the question rung 08's section left open.
//
// SASS to look for: rung 18's, with a branch on the mask in the item arithmetic.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/1[589]_' --shapes 16x16x16x1024x1024x128
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_19_pair_tiles_together(const AttentionArgs<T>& args, cudaStream_t stream,
                                          HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 19", FlashWgmmaShape<64, 3>::kBlockRows);
  if (!(args.scale > 0.f)) {  // rung 15's consumers need a positive scale; rung 15 passes it on
    attention_fwd_15_lazy_rescale(args, stream, cache);
    return;
  }
  if (args.head_dim == 64)
    launch_flash_wgmma_persistent<T, 64, 3, true, true, true>(args, stream, cache);
  else
    launch_flash_wgmma_persistent<T, 128, 2, true, true, true>(args, stream, cache);
}

template void attention_fwd_19_pair_tiles_together<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                                  HopperLaunchCache&);
template void attention_fwd_19_pair_tiles_together<__half>(const AttentionArgs<__half>&, cudaStream_t,
                                                           HopperLaunchCache&);

}  // namespace kc::stage3
