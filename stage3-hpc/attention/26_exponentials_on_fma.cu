// Rung 26 — a quarter of the softmax's exponentials on the FMA pipe (D = 64).
//
// Idea: at D = 64 a consumer warpgroup's K/V tile is 64 x 128 x 64 x 2 x 2 = 2.1 MFLOP on the
// tensor cores, about 512 clocks of an SM's 4096 bf16 FLOP a clock, and 64 x 128 = 8192
// exponentials, 512 clocks of its 16 MUFU results a clock: the exponentials take as long as the
// MMAs, so the ping-pong that hides one warpgroup's softmax under the other's MMAs has no slack,
// and MUFU, not the tensor cores, sets the pace. (At D = 128 the MMAs take twice as long and the
// exponentials hide.) The FMA pipe, 128 results a clock, sits nearly idle: FlashAttention-4's
// answer is to compute some of the exponentials there, as a polynomial. exp2_on_fma
// (attention/flash_common.cuh) costs about eight FP32 instructions and an integer shift-add for one
// MUFU.EX2, so the issue slots, not the FMA pipe, bound how many can move: counting ~4.5 issued
// instructions a score besides its exponential, one in four or five balances MUFU against issue.
// Here every fourth block of 8 keys (a quarter of the exponentials) goes to the FMA pipe.
//
// What changed from rung 15: kFmaExpEvery = 4 (softmax_probabilities in attention/fa2_mma.cuh,
// through FlashWgmmaConsumer and flash_wgmma_kernel); D = 128 runs rung 15 itself.
//
// Expected limiter: at D = 64 the issue slots of the softmax and the tensor cores, closer to each
// other; if MUFU was not the limiter after all, a little slower than rung 15 (more instructions).
//
// SASS to look for (D = 64): rung 15's, with a quarter fewer MUFU.EX2 (48 instead of 64 a tile and
// thread: 16 blocks x 2 rows x 2 keys) and for each moved exponential four FFMA, FADDs and an
// FMUL, the SHF / IADD of 2^n and an FSEL for the flush below 2^-126.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/(15|26)_' --shapes 4x32x32x4096x4096x64
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_26_exponentials_on_fma(const AttentionArgs<T>& args, cudaStream_t stream,
                                          HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 26", FlashWgmmaShape<64, 3>::kBlockRows);
  if (!(args.scale > 0.f) || args.head_dim != 64) {  // rung 15 at D = 128, and for other scales
    attention_fwd_15_lazy_rescale(args, stream, cache);
    return;
  }
  // <T, D, loop, consumers, keys a tile, kProducerSleeps, kDescriptorsAdded, kScaleInExponent,
  //  kRowlessConsumersLeave, kLazyRescale, kFmaExpEvery>: rung 15's D = 64 kernel, kFmaExpEvery = 4
  launch_flash_wgmma<T, 64, FlashLoop::overlapped, 3, 128, true, true, true, true, true, 4>(args, stream, cache);
}

template void attention_fwd_26_exponentials_on_fma<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                                  HopperLaunchCache&);
template void attention_fwd_26_exponentials_on_fma<__half>(const AttentionArgs<__half>&, cudaStream_t,
                                                           HopperLaunchCache&);

}  // namespace kc::stage3
