// Rung 24 — rung 23 with the K/V tiles whose keys all exist copied without checks.
//
// Idea: under Nsight Compute, what rung 23 waits on next (after the fixed-latency dependencies of
// its HMMA and softmax chains) is the top of its long-scoreboard list: the register moves before
// its LDGSTS. Each chunk of the lean copy (copy_tile_async_lean) picks its source between the
// chunk's address and a stand-in for a missing row, with a predicate for the zero fill; under the
// register pressure of two MMA tiles at D = 128, ptxas computes those 16 addresses a tile into
// whatever registers are free and moves each into the one aligned pair every LDGSTS reads, and
// each move waits until the previous LDGSTS has read that pair. But only a block's last K/V tile
// can have missing keys. Rung 24 copies every other tile with copy_tile_async_lean's
// kAllRowsExist: one source pointer a call plus a pass of rows a chunk, no row count, no select, no
// zero fill.
//
// What changed from rung 23: the kernel's kWholeTileCopies (fa2_cp_async_kernel.cuh): in the loop,
// a tile that ends at or before key_end is copied whole; the last one (and the first, with Q) by
// rung 23's lean copy, zeros past key_end and all. The warp step is rung 23's.
//
// Expected limiter: rung 23's (the warp's issue of HMMA, LDSM and softmax, 255 registers); fewer
// instructions and stalls in the copies.
//
// SASS to look for (D = 128): rung 23's counts in the loop, with two copy paths (16 LDGSTS each);
// in the whole-tile path no SEL before the LDGSTS and no predicate on them.
//
// Run just this rung (next to rung 23):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/(23|24)' --shapes 4x16x16x4096x4096x128
#include "attention/fa2_cp_async_kernel.cuh"

namespace kc::stage3 {
namespace {

// Rung 23 (two tiles a warp, rung 16's softmax, the lean copies, 64-key tiles, fragments a step
// ahead) with whole tiles copied without checks.
template <typename T, int kHeadDim>
using Rung24 = Fa2CpAsyncRung<T, kHeadDim, 2,
                              /*kPacked=*/false, /*kLeanSoftmax=*/true, /*kFlawBaseNeverMoves=*/false,
                              /*kLeanCopy=*/true, /*kNarrowKeyTiles=*/false, /*kPrefetchFragments=*/true,
                              /*kWholeTileCopies=*/true>;

}  // namespace

template <typename T>
void attention_fwd_24_fa2_whole_tile_copies(const AttentionArgs<T>& args, cudaStream_t stream) {
  launch_lean_softmax_rung<Rung24>(args, stream, "attention rung 24");  // a scale that is not positive: rung 05
}

template void attention_fwd_24_fa2_whole_tile_copies<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t);
template void attention_fwd_24_fa2_whole_tile_copies<__half>(const AttentionArgs<__half>&, cudaStream_t);

}  // namespace kc::stage3
