// Rung 06 — Hopper: TMA + WGMMA, a producer warp and two consumer warpgroups.
//
// Idea: on an H100/H200 the tensor cores' full rate is reachable only through WGMMA
// (wgmma.mma_async), which a whole warpgroup (4 warps) issues asynchronously on operands in
// shared memory; mma.sync stays short of it even fed from registers (kc-mma-sync-peak measures the
// gap: stage-3 README), and the FA2 rungs 03-05, which also feed it through ldmatrix, stop further
// below. The GEMM ladder's Hopper rungs (gemm/04-09) showed
// the recipe; this rung applies it to attention:
//   - TMA copies whole K and V tiles (128 keys x D) into a ring of shared-memory stages, completing
//     on mbarriers: no thread spends an instruction on a load, and the tiles arrive in exactly the
//     128-byte-swizzled layout WGMMA reads. The tensor maps view Q, K and V as [D, S, H, B], so a
//     tile past a head's last row reads zeros, never the next head.
//   - Warp specialization: warpgroup 0 gives most of its registers away (setmaxnreg) and one of its
//     threads issues every copy, waiting only for a stage to be released; warpgroups 1 and 2 take
//     240 registers each and own 64 query rows apiece (one m64 WGMMA row block).
//   - S = Q K^T is WGMMA m64n128k16 with both operands in shared memory (D/16 of them a tile);
//     the online softmax runs on the accumulators in registers (their per-warp layout is
//     mma.sync's, so rung 03's softmax code runs unchanged: online_softmax_tile); P is rounded to
//     bf16/f16 in registers and is the A operand of O += P V, m64n{D}k16 with A from registers and
//     B = V read "transposed" (V's contiguous dimension is D, the N of that product).
//
// What changed from rung 05: TMA + mbarriers instead of cp.async + __syncthreads; a producer warp
// instead of every thread copying; WGMMA (one instruction: 64 x 128 x 16 for S) instead of
// mma.sync (16 x 8 x 16) + ldmatrix; 128 query rows and 128 keys a tile; causal tile skipping and
// heaviest-first order as in rung 04; grouped-query heads read in place (the K/V coordinates use
// the kv head). The kernel is in flash_wgmma_kernel.cuh (FlashWgmmaConsumer::run_serial).
//
// Shared memory: Q (128 x D) + 3 stages (D = 128) or 4 (D = 64) of K and V tiles of 128 x D:
// 224 KiB at D = 128 (all but 3 KiB of what a block may have), 144 KiB at D = 64, plus the
// barriers and the 1 KiB alignment slack.
//
// Expected limiter: within a consumer every step waits for the previous one — S's WGMMAs, then the
// softmax (MUFU.EX2, FMUL, shuffles) with the tensor cores idle, then P V's WGMMAs with the
// exponent unit idle. The two consumers overlap each other only by chance. FlashAttention-3's
// answer (ping-pong scheduling of the two warpgroups and the overlap of one tile's softmax with
// the next tile's Q K^T inside a warpgroup) is the next rung.
//
// SASS to look for: UTMALDG.4D (the producer's copies), SYNCS (mbarrier waits and arrivals),
// HGMMA.64x128x16.F32.BF16 (S: both operands from shared memory), HGMMA.64x128x16.F32.BF16 or
// .64x64x16 with an R operand (P V, A from registers), WARPGROUP.ARRIVE / WARPGROUP.DEPBAR (the
// fences and waits), USETMAXREG, MUFU.EX2, F2FP; no LDGSTS, no LDSM, no HMMA, no LDL/STL.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter stage3/attention_fwd/06_tma_wgmma --param causal=1
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_06_tma_wgmma(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 06", FlashWgmmaShape<128>::kBlockRows);
  if (args.head_dim == 64)
    launch_flash_wgmma<T, 64, FlashLoop::serial>(args, stream, cache);
  else
    launch_flash_wgmma<T, 128, FlashLoop::serial>(args, stream, cache);
}

template void attention_fwd_06_tma_wgmma<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                       HopperLaunchCache&);
template void attention_fwd_06_tma_wgmma<__half>(const AttentionArgs<__half>&, cudaStream_t, HopperLaunchCache&);

}  // namespace kc::stage3
