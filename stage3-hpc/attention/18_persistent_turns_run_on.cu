// Rung 18 — rung 15 in persistent CTAs, with the ping-pong running on from one item to the next.
//
// Idea: a CTA of rung 15 computes one query tile and exits; the next CTA on that SM starts from
// nothing — its barriers, its Q tile and first K/V tile fetched with the tensor cores idle, then a
// first tile whose S runs alone (no P V to overlap yet), and at its end a last P V and the store of
// O with nothing else to issue. That cost is per CTA, not per key, so it weighs most where a query
// tile sees few keys: at 1k keys a CTA has 8 K/V tiles, at 16k 128. Rung 08 made the CTAs
// persistent (one an SM, walking work items) so that the producer loads the next item's Q and
// first K/V tiles while the consumers finish the current one — but each item still began with the
// ping-pong's turns opened afresh: the first consumer could not issue the next item's first S
// until the last consumer had issued its last P V and stored its rows. Here the turns run on: the
// last consumer passes its last turn of an item on (it opens the turns only before the CTA's first
// item, and keeps its last pass only in the CTA's last one), so the first consumer issues the next
// item's S — its Q already in shared memory — while the others' last P V runs and they store O.
//
// What changed from rung 15 (and rung 08): rung 08's persistent kernel
// (flash_wgmma_persistent_kernel in attention/flash_wgmma_kernel.cuh) with rung 15's consumers
// and producer (kLeanConsumers: the producer waits asleep, descriptors moved by addition, the
// scale inside the exponent, the lazy base), three consumer warpgroups at D = 64 as rungs 09-15,
// and kTurnsRunOn (FlashWgmmaConsumer::run_overlapped_from). The items are rung 08's: heaviest
// first, the (batch, head) pair fastest. Consumers whose rows all lie past Sq do not leave (rung
// 14's step): in a persistent CTA they have other items to come.
//
// Expected limiter: rung 15's within an item; the gain, if any, at short sequences (1k-2k keys),
// where a CTA's start and end are a larger share of its work. Rung 08 lost to rung 07 at 1k with
// D = 128 on the H200 for reasons its section leaves to a profile; rung 19 changes the items'
// order, the other suspect.
//
// SASS to look for: rung 15's (HGMMA.64x128x16 and 64x64x16 at D = 64 / 64x128x16 at D = 128,
// VOTE.ANY before O's FMULs, NANOSLEEP.SYNCS in the producer, USETMAXREG); the item loop around
// them, BAR.ARV / BAR.SYNC for the turns; no LDL/STL.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/1[58]_' --shapes 8x16x16x2048x2048x128
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_18_persistent_turns_run_on(const AttentionArgs<T>& args, cudaStream_t stream,
                                              HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 18", FlashWgmmaShape<64, 3>::kBlockRows);
  if (!(args.scale > 0.f)) {  // rung 15's consumers need a positive scale; rung 15 passes it on
    attention_fwd_15_lazy_rescale(args, stream, cache);
    return;
  }
  if (args.head_dim == 64)
    launch_flash_wgmma_persistent<T, 64, 3, true, true, false>(args, stream, cache);
  else
    launch_flash_wgmma_persistent<T, 128, 2, true, true, false>(args, stream, cache);
}

template void attention_fwd_18_persistent_turns_run_on<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&,
                                                                      cudaStream_t, HopperLaunchCache&);
template void attention_fwd_18_persistent_turns_run_on<__half>(const AttentionArgs<__half>&, cudaStream_t,
                                                               HopperLaunchCache&);

}  // namespace kc::stage3
