// Rung 08 — persistent CTAs walking the work heaviest first.
//
// Idea: rungs 06-07 launch a CTA per 128 query rows of every (batch, head); each CTA sets up its
// barriers, loads its Q, fills the K/V ring from empty and drains it at the end, and under the
// causal mask the CTAs differ in work by up to Sk/128 tiles. A persistent kernel, as
// FlashAttention-3's code base schedules its tiles (a scheduling step, not one of the paper's
// three ideas), launches only as many CTAs as fit on the GPU at once (one an SM here: 225 KiB of
// shared memory) and lets each walk a list of work items (a query tile of a (batch, head)). Between two items the
// producer does not wait for the consumers: it fills the next item's first K/V stages while they
// finish the current one (the ring's stages and phases simply run on), and it reloads the Q tile
// as soon as every consumer warp has done its last S with it (a new barrier, q_empty) — while
// the consumers still run the last P V and store O. The items are ordered heaviest first (the
// last query tiles, which see the most keys, of every head) and dealt round-robin, so each CTA
// gets a similar mix of long and short items.
//
// What changed from rung 07: the grid (resident CTAs, HopperLaunchCache::resident_blocks,
// instead of one CTA per query tile); the loop over work items (flash_work_item) in the producer
// and the consumers, with the K/V counters carried across items
// (FlashWgmmaConsumer::run_overlapped_from); the q_empty barrier; the store names its (batch,
// head) instead of reading it from blockIdx. The consumers' mainloop is rung 07's.
//
// Expected limiter: rung 07's (the tensor cores behind the ping-pong waits), minus the fill and
// drain of the ring at each CTA's start and end and the tail of unequal CTAs; what remains per
// item is the wait for the next Q when an item is short.
//
// SASS to look for: rung 07's, plus the item loop around the producer's UTMALDG.4D and around
// the consumers' mainloop (two more SYNCS barriers: q_empty's arrive and wait); no LDL/STL.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter stage3/attention_fwd/08_persistent --param causal=1
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_08_persistent(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 08", FlashWgmmaShape<128>::kBlockRows);
  if (args.head_dim == 64)
    launch_flash_wgmma_persistent<T, 64>(args, stream, cache);
  else
    launch_flash_wgmma_persistent<T, 128>(args, stream, cache);
}

template void attention_fwd_08_persistent<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                        HopperLaunchCache&);
template void attention_fwd_08_persistent<__half>(const AttentionArgs<__half>&, cudaStream_t, HopperLaunchCache&);

}  // namespace kc::stage3
