// Rung 07 — FlashAttention-3's overlap: ping-pong between the consumer warpgroups and the softmax
// of one tile under the P V of the previous.
//
// Idea: in rung 06 a consumer's three steps per tile wait for each other: while it computes the
// softmax (exponentials on the MUFU unit, FP32 multiplies, shuffles) its tensor-core work is done,
// and while its WGMMAs run its exponent unit is idle. On an H100/H200 the exponentials are not
// cheap next to the WGMMAs: per 128 x 128 score tile at D = 128 the MMAs are 4 x 128 x 128 x 128
// = 8.4 MFLOP on a unit that does ~4000 FLOP/clock/SM, about 2k clocks, while 16k exponentials
// on 16/clock/SM (MUFU.EX2) are about 1k: a third of the time if they do not overlap. Two ways to
// overlap them, both from FlashAttention-3:
//   - Within a warpgroup: issue S = Q K^T of tile t, then O += P V of tile t - 1 (its P rounded
//     after the previous softmax), and compute tile t's softmax while that P V is still running;
//     wgmma.wait_group 1 waits for S only, wait_group 0 for P V. O cannot be rescaled by tile t's
//     new row maxima while P V accumulates into it, so the rescale moves to the next iteration,
//     under S of tile t + 1 and just before P V of tile t (the softmax step split in two:
//     softmax_probabilities, rescale_rows).
//   - Between the two consumer warpgroups (ping-pong): named barriers make them take turns
//     issuing WGMMAs, so one's GEMMs fill the tensor cores while the other computes its softmax.
// Everything else — the producer, TMA, the tile sizes, masks, causal skipping — is rung 06's.
//
// What changed from rung 06: the consumer mainloop (FlashWgmmaConsumer::run_overlapped in
// flash_wgmma_kernel.cuh): a prologue (S of tile 0 and its softmax), a loop that issues S(t) and
// P V(t - 1) together, an epilogue (the last P V); two named barriers between the consumers;
// P's registers held across one iteration (32 more live registers: S, P and O together). A
// stage is now held one iteration longer (its V until P V of the next iteration has finished),
// which is why the ring has 3 stages at D = 128 (rung 06 has the same ring).
//
// Expected limiter: the tensor cores, once the softmax hides under them; what is left are the
// waits at the ping-pong barrier and the producer when a stage is not ready.
//
// SASS to look for: rung 06's (UTMALDG.4D, SYNCS, HGMMA.64x128x16 for S and for P V at D = 128,
// WARPGROUP.ARRIVE, USETMAXREG), plus BAR.SYNC and BAR.ARV with barrier ids 1 and 2 (the
// ping-pong), and a WARPGROUP.DEPBAR.LE gsb0, 0x1 (wait_group 1) before the softmax's MUFU.EX2;
// no LDL/STL.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter stage3/attention_fwd/07_fa3_overlap --param causal=1
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_07_fa3_overlap(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 07", FlashWgmmaShape<128>::kBlockRows);
  if (args.head_dim == 64)
    launch_flash_wgmma<T, 64, FlashLoop::overlapped>(args, stream, cache);
  else
    launch_flash_wgmma<T, 128, FlashLoop::overlapped>(args, stream, cache);
}

template void attention_fwd_07_fa3_overlap<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                         HopperLaunchCache&);
template void attention_fwd_07_fa3_overlap<__half>(const AttentionArgs<__half>&, cudaStream_t, HopperLaunchCache&);

}  // namespace kc::stage3
