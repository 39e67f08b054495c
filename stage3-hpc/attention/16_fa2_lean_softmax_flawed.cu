// Rung 16's kernel with one flaw, for a negative control: the softmax keeps the first finite base
// of each row for good, whatever the rise of the row's maximum (kFlawBaseNeverMoves). Any base
// gives the right answer while no probability overflows, so random scores, which settle within a
// few units of their first maximum, pass with it; scores that climb by more than FP32's range
// (2^128) along a row overflow to Inf and NaN. AttentionLadderGpu.RisingScoresMoveTheSoftmaxBaseCorrectly
// checks that its rising problem catches this kernel and that the random one does not: the reason
// that test exists beside the conformance problems. Not a rung: it is not registered.
#include "attention/fa2_cp_async_kernel.cuh"

namespace kc::stage3 {
namespace {

template <typename T, int kHeadDim>
using Rung16WithAFixedBase = Fa2CpAsyncRung<T, kHeadDim, rung05_tiles_per_warp(kHeadDim),
                                            /*kPacked=*/false, /*kLeanSoftmax=*/true, /*kFlawBaseNeverMoves=*/true>;

}  // namespace

template <typename T>
void attention_fwd_16_with_a_base_that_never_moves(const AttentionArgs<T>& args, cudaStream_t stream) {
  require(args.scale > 0.f, "the flawed rung 16 runs positive scales only");
  launch_fa2_rung<Rung16WithAFixedBase>(args, stream, "attention rung 16 with a base that never moves");
}

template void attention_fwd_16_with_a_base_that_never_moves<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&,
                                                                          cudaStream_t);
template void attention_fwd_16_with_a_base_that_never_moves<__half>(const AttentionArgs<__half>&, cudaStream_t);

}  // namespace kc::stage3
