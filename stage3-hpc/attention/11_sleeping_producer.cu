// Rung 11 — the producer waits asleep.
//
// Idea: the producer is one thread that issues the TMA copies of the K/V ring and otherwise waits
// for the consumers to free a stage. sm90::mbarrier_wait polls: mbarrier.try_wait returns after a
// short, system-dependent time, and the loop tries again. ncu's instruction counts of rung 07 next
// to cuDNN's kernel (stage-3 README, "Where rung 07's time goes at D = 128") put that one try_wait
// and the branch back to it among rung 07's most executed instructions, where cuDNN's kernel
// executes few try_waits in all. The producer's warp shares a scheduler with consumer warps, and a warpgroup's WGMMAs wait for its
// slowest warp, so every slot the poll takes can delay all four. mbarrier.try_wait takes a
// suspend-time hint: with one the thread sleeps in the barrier until the phase completes (or the
// hint's time passes) instead of coming back to poll.
//
// What changed from rung 09: the producer's wait for a free stage, sm90::mbarrier_wait ->
// sm90::mbarrier_wait_asleep (arch/sm90/mbarrier.cuh; the kernel's kProducerSleeps). The
// consumers' waits, which are short and rare, still poll. The kernels are rung 09's: three
// consumer warpgroups at D = 64, rung 07's two at D = 128.
//
// Expected limiter: rung 09's (rung 07's at D = 128), with the consumers' share of the issue slots
// on the producer's scheduler back.
//
// SASS to look for: the producer's retry path, SYNCS.PHASECHK.TRANS64.TRYWAIT, then
// NANOSLEEP.SYNCS with the hint and a blocking SYNCS.PHASECHK.TRANS64, and in ncu its executed
// count far below rung 07's; the consumers' code unchanged.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/(07|09|11)' --shapes 4x16x16x4096x4096x128
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_11_sleeping_producer(const AttentionArgs<T>& args, cudaStream_t stream,
                                        HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 11", FlashWgmmaShape<64, 3>::kBlockRows);
  if (args.head_dim == 64)
    launch_flash_wgmma<T, 64, FlashLoop::overlapped, 3, 128, true>(args, stream, cache);
  else
    launch_flash_wgmma<T, 128, FlashLoop::overlapped, 2, 128, true>(args, stream, cache);
}

template void attention_fwd_11_sleeping_producer<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                               HopperLaunchCache&);
template void attention_fwd_11_sleeping_producer<__half>(const AttentionArgs<__half>&, cudaStream_t,
                                                        HopperLaunchCache&);

}  // namespace kc::stage3
