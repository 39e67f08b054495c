// Rung 04 — rung 03 with a cp.async double-buffered K/V pipeline and causal tile skipping.
//
// Idea: keep the tensor cores busy while the next K/V tile travels, and do no work the mask
// throws away. K and V live in two shared-memory buffers; while the warps compute tile t out of
// one, tile t + 1 is already on its way into the other by cp.async (global -> shared directly,
// no registers, no stall at issue; arch/sm80/cp_async.cuh). A block visits only the tiles its
// last query row sees: with the causal mask that is about half of them, and a block whose rows
// see no key at all (Sq > Sk) loads nothing and writes O = 0, LSE = -inf. Only tiles that reach
// past its first row's visible end (the diagonal tiles, and the partial tile at Sk) build the
// mask; the others run the same softmax without a compare per score (a template parameter).
// Blocks are launched heaviest first (the last query tiles see the most keys under the causal
// mask), so the long blocks do not form the tail of the grid.
//
// What changed from rung 03: cp.async with zero fill (src-size 0) past the block's last key
// instead of loads through registers; two K/V buffers and one commit group per tile, waited for
// with cp.async.wait_group 1 (the tile needed now has landed, the next may still be in flight);
// the K/V loop ends at the block's last visible key instead of Sk; the mask is applied on the
// tiles that need it only; reversed block order. Grouped-query heads are read in place as in
// every rung (kv head = h / (Hq / Hkv)): no copy of K or V per query head. The kernel is in
// fa2_cp_async_kernel.cuh, which rung 05 runs with two MMA tiles per warp instead of one.
//
// Shared memory: Q tile + 2 x (K, V) tiles of 64 x D: 40 KiB (D = 64), 80 KiB (D = 128), which
// needs the opt-in above 48 KiB.
//
// Expected limiter: the MMA and exp issue of one warp per 16 rows: with 4 warps and 64-row tiles
// the loads hide behind one tile's compute, but the softmax (MUFU.EX2, FMUL, shuffles) sits
// between the two MMA phases of a warp with nothing to overlap it within the warp; the next
// steps are larger tiles per warp and, on Hopper, warpgroup MMAs (wgmma) with producer warps.
//
// SASS to look for: LDGSTS.E.BYPASS.128 (K, V and Q tiles; 2 x D/16 per thread and tile), LDGDEPBAR and DEPBAR.LE
// (commit and wait), LDSM.16.M88.4, LDSM.16.MT88.4, HMMA.16816.F32.BF16 / HMMA.16816.F32, no
// LDG.E.128 of K or V; no LDL/STL.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter stage3/attention_fwd/04_fa2_cp_async --param causal=1
#include "attention/fa2_cp_async_kernel.cuh"

namespace kc::stage3 {
namespace {

// The kernel (fa2_cp_async_kernel.cuh) with one 16-row MMA tile per warp.
template <typename T, int kHeadDim>
using Rung04 = Fa2CpAsyncRung<T, kHeadDim, 1>;

}  // namespace

template <typename T>
void attention_fwd_04_fa2_cp_async(const AttentionArgs<T>& args, cudaStream_t stream) {
  launch_fa2_rung<Rung04>(args, stream, "attention rung 04");
}

template void attention_fwd_04_fa2_cp_async<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t);
template void attention_fwd_04_fa2_cp_async<__half>(const AttentionArgs<__half>&, cudaStream_t);

}  // namespace kc::stage3
