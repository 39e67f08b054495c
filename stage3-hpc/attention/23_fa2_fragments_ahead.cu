// Rung 23 — rung 21 with each ldmatrix issued a step ahead of the MMAs that read it.
//
// Idea: in rung 21's Q K^T, S (64 FP32 registers a thread) and O (128) fill the registers, and
// ptxas keeps a single K fragment buffer: each LDSM.16.M88.4 of K is followed at once by the four
// HMMAs that read it, so every four HMMAs the warp waits out an ldmatrix (Nsight Compute's source
// view of rung 21 puts the short-scoreboard stalls on those HMMAs). FlashAttention-2's gemm loads
// the fragments of the next k-step before it issues the MMAs of this one. Rung 23 does the same
// in its own words: the MMAs are rung 21's, in rung 21's order, but before the MMAs of a step the
// warp issues the ldmatrix of the next step's K (or V) fragment into a second buffer, and the next
// slice's Q fragments where a slice opens. The registers for the second buffers come from the
// slices' shared-memory offsets: rung 21 holds one register for each of the eight XOR offsets of a
// K (and of a V) tile's slices at D = 128; xor_slice_offset (fa2_mma.cuh) computes the top bit of
// that XOR as an add of 128 bytes, an immediate of the LDSM, so four offsets serve eight slices.
//
// What changed from rung 21: Fa2Warp's kPrefetchFragments (fa2_mma.cuh: scores_prefetched,
// accumulate_pv_prefetched, WarpQ's kSplitXor), passed through Fa2CpAsyncRung. The softmax, the
// copies and the tile loop are rung 21's; so are the counts of HMMA and LDSM a tile.
//
// Expected limiter: the warp's issue of HMMA, LDSM and softmax in turn, with the LDSM latency
// under the previous step's HMMAs; the registers (255 a thread at D = 128: the second buffers
// cost 12, which the offsets pay back only in part; -Xptxas -v says how many bytes spill, and
// the SASS contract row bounds them).
//
// SASS to look for (D = 128): rung 21's counts (256 HMMA, 80 LDSM a K/V tile); in Q K^T each
// LDSM.16.M88.4 of K is followed by the HMMAs of the previous step, not its own; LDSM addresses
// with +0x80 immediates (the split XOR).
//
// Run just this rung (next to rung 21):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/(21|23)' --shapes 4x16x16x4096x4096x128
#include "attention/fa2_cp_async_kernel.cuh"

namespace kc::stage3 {
namespace {

// Rung 21 (two tiles a warp, rung 16's softmax, the lean copies, 64-key tiles) with the fragments
// loaded a step ahead.
template <typename T, int kHeadDim>
using Rung23 = Fa2CpAsyncRung<T, kHeadDim, 2,
                              /*kPacked=*/false, /*kLeanSoftmax=*/true, /*kFlawBaseNeverMoves=*/false,
                              /*kLeanCopy=*/true, /*kNarrowKeyTiles=*/false, /*kPrefetchFragments=*/true>;

}  // namespace

template <typename T>
void attention_fwd_23_fa2_fragments_ahead(const AttentionArgs<T>& args, cudaStream_t stream) {
  launch_lean_softmax_rung<Rung23>(args, stream, "attention rung 23");  // a scale that is not positive: rung 05
}

template void attention_fwd_23_fa2_fragments_ahead<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t);
template void attention_fwd_23_fa2_fragments_ahead<__half>(const AttentionArgs<__half>&, cudaStream_t);

}  // namespace kc::stage3
