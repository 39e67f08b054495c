// Rung 09 — three consumer warpgroups at D = 64: 192 query rows a CTA.
//
// Idea: at D = 64 a score costs half the tensor-core work it costs at D = 128 (4 D FLOP: 2 D for
// S, 2 D for P V) but the same softmax work (one exponential, the max and the sum), so each K/V
// tile that a consumer waits for, and each turn of the ping-pong, buys half as many FLOPs. Rung
// 07 at D = 64 holds, per consumer thread, O (32 FP32), S (64) and P (32 registers of bf16/fp16
// pairs): far below the 240 registers a consumer gets with two consumers. The register file
// allows a third consumer warpgroup instead: 24 + 3 x 160 registers a thread, x 128 threads,
// = 64512 of the 65536. FlashAttention-3 makes the same choice at D = 64 (192-row query tiles,
// three consumer warpgroups). With three consumers a K/V tile loaded once serves 192 query rows
// instead of 128 (two thirds of the K/V traffic into shared memory per FLOP), and the ping-pong
// has two other consumers' GEMMs to hide a consumer's softmax under instead of one.
//
// What changed from rung 07: at D = 64 the kernel's kConsumers, 2 -> 3 (FlashWgmmaShape<64, 3>):
// 512 threads, 160 registers a consumer (setmaxnreg), a 192-row Q tile (24 KiB) with the same
// 4-stage K/V ring of 128-key tiles, and the ping-pong's turn going round three named barriers
// (FlashWgmmaConsumer::run_overlapped_from). At D = 128 three consumers do not fit in the
// registers (O alone is 64 a thread), so D = 128 runs rung 07's kernel unchanged.
//
// Expected limiter: at D = 64 the exponentials (MUFU.EX2) and the tensor cores ask for about the
// same time per score tile, so the gain is in the waits that the third consumer fills (the turn
// of the ping-pong, a stage not yet landed); fewer CTAs (Sq / 192) and a partly empty last query
// tile when Sq is not a multiple of 192 (at Sq = 1024, 1152 rows of work for 1024) cost some back.
//
// SASS to look for (the D = 64 kernel): USETMAXREG.TRY_ALLOC.CTAPOOL with 160, BAR.SYNC and
// BAR.ARV with barrier ids 1, 2 and 3, HGMMA.64x128x16.F32 for S and HGMMA.64x64x16.F32 for P V;
// no LDL/STL (160 registers are enough for S, P and O of 64 rows).
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/0[79]' --shapes 4x32x32x4096x4096x64
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_09_three_consumers(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 09", FlashWgmmaShape<64, 3>::kBlockRows);
  if (args.head_dim == 64)
    launch_flash_wgmma<T, 64, FlashLoop::overlapped, 3>(args, stream, cache);
  else
    launch_flash_wgmma<T, 128, FlashLoop::overlapped>(args, stream, cache);
}

template void attention_fwd_09_three_consumers<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                             HopperLaunchCache&);
template void attention_fwd_09_three_consumers<__half>(const AttentionArgs<__half>&, cudaStream_t, HopperLaunchCache&);

}  // namespace kc::stage3
