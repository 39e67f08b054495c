// Rung 16 — FlashAttention-2 on mma.sync with the Hopper rungs' leaner softmax.
//
// Idea: rungs 13 and 15 took instructions out of the softmax of the Hopper kernel: the scale
// inside the exponent's FFMA (one FMUL a score fewer) and a base that moves only when a row's
// maximum rises by more than 8 (log2 units), so O's rescale — a multiply for every accumulator of
// O, every tile — is skipped where every factor of the warp's tile is 1. On mma.sync the same cuts
// weigh more. A warp of rung 04 at D = 128 holds, per 64-key tile, 32 scores a thread but 64 O
// accumulators: the rescale is twice as many FMULs as there are scores, and the same warp issues
// its 128 HMMAs, its ldmatrix loads and all of the softmax — there is no asynchronous tensor-core
// instruction to hide anything behind. Counting per thread and tile at D = 128 (analysis): rung
// 05's softmax is about 32 x 5 instructions (scale FMUL, FMNMX, FADD, MUFU.EX2, the sum's FADD)
// plus 64 rescale FMULs and 16 F2FP; here about 32 x 4 plus 16 F2FP and a vote.
//
// What changed from rung 05: Fa2Warp's kLeanSoftmax (attention/fa2_mma.cuh: softmax_probabilities
// with kScaleInExponent and kLazyRescale, then a warp vote before each tile's rescale), through
// the kernel's kLeanSoftmax (attention/fa2_cp_async_kernel.cuh). The tiles per warp are rung 05's
// (two at D = 64, one at D = 128). A scale that is not positive runs rung 05's kernels: the
// maximum of the raw scores is the scaled maximum only for a positive scale.
//
// Expected limiter: rung 05's — one warp issuing MMAs, ldmatrix and softmax in turn — with fewer
// instructions a tile; at D = 128 the cut is about a fifth of a warp's instructions a tile
// (analysis). This is the rung the mma.sync target (PyTorch's FlashAttention-2 backend at D = 128)
// is measured with next.
//
// SASS to look for: rung 05's HMMA, LDSM and LDGSTS counts; FFMA before MUFU.EX2 where rung 05 has
// FMUL then FADD; a VOTE.ANY a tile and a branch over O's FMULs; no LDL/STL.
//
// Run just this rung (next to rung 05):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/(05|16)' --shapes 4x16x16x4096x4096x128
#include "attention/fa2_cp_async_kernel.cuh"

namespace kc::stage3 {
namespace {

template <typename T, int kHeadDim>
using Rung16 = Fa2CpAsyncRung<T, kHeadDim, rung05_tiles_per_warp(kHeadDim), /*kPacked=*/false, /*kLeanSoftmax=*/true>;

}  // namespace

template <typename T>
void attention_fwd_16_fa2_lean_softmax(const AttentionArgs<T>& args, cudaStream_t stream) {
  launch_lean_softmax_rung<Rung16>(args, stream, "attention rung 16");  // a scale that is not positive: rung 05
}

template void attention_fwd_16_fa2_lean_softmax<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t);
template void attention_fwd_16_fa2_lean_softmax<__half>(const AttentionArgs<__half>&, cudaStream_t);

}  // namespace kc::stage3
