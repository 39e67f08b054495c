// Rung 21 — rung 16 with two 16-row MMA tiles a warp at D = 128 too: FlashAttention-2's block.
//
// Idea: rung 05 gave a warp two 16-row MMA tiles at D = 64, so that every K and V fragment it loads
// with ldmatrix feeds two HMMAs instead of one, but left D = 128 at one tile because two spilled
// (05_fa2_two_tiles_per_warp.cu says where: the per-chunk row indices of the cp.async copies). At
// one tile a warp issues half an LDSM per HMMA; FlashAttention-2's own kernel for D = 128 on this
// GPU is the two-tile block (128 query rows, 4 warps, 64-key K/V tiles, Q in shared memory).
// Two changes make room: the copies' addresses are computed once a call (copy_tile_async_lean in
// fa2_mma.cuh: a thread's chunks of a tile are whole rows apart, so one pointer, one shared offset
// and one row count serve them all, where TileCopy computes a row and a chunk per chunk), and the
// rows' visible ends are computed where they are used (the masked tiles and the store) instead of
// held across the loop.
//
// What changed from rung 16: Fa2CpAsyncRung's kLeanCopy (fa2_cp_async_kernel.cuh: copy_fa2_tile
// and the row ends) and two tiles a warp at D = 128 (Fa2Shape<128, 2>: O 128 FP32 registers and S
// 64 a thread, Q's fragments read from the Q tile slice by slice for each K/V tile, WarpQ's
// kHeld = false). D = 64 is rung 16's shape with the lean copies. Rungs 03-05, 16 and the packed
// form compile to the same SASS as before. A scale that is not positive runs rung 05's kernels.
//
// Per warp and K/V tile at D = 128 (analysis): S 2 x 64 HMMA fed by 32 LDSM of K and 16 of Q (8 a
// tile x 2), P V 2 x 64 HMMA fed by 32 LDSM.T of V: 80 LDSM for 256 HMMA, 0.31 a HMMA where rung 16
// issues 64 for 128 (0.5). Shared memory: Q 32 KiB + 2 x (K, V) 64 KiB = 96 KiB, two blocks an SM.
//
// Expected limiter: the warp's issue of HMMA, LDSM and softmax in turn, with fewer LDSM a HMMA;
// the registers: 255 a thread, where ptxas may spill the loop's invariants (-Xptxas -v says how
// many bytes; the SASS contract row bounds them).
//
// SASS to look for (D = 128): per K/V tile 256 HMMA.16816.F32.BF16, LDSM.16.M88.4 (K and Q) and
// LDSM.16.MT88.4 (V), LDGSTS.E.BYPASS.128 whose shared addresses are one register plus an
// immediate (+0x800 a chunk at D = 128: 8 rows), FFMA before MUFU.EX2 and a VOTE.ANY (rung 16's
// softmax).
//
// Run just this rung (next to rung 16):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/(16|21)' --shapes 4x16x16x4096x4096x128
#include "attention/fa2_cp_async_kernel.cuh"

namespace kc::stage3 {
namespace {

// Two tiles a warp at both head dimensions, rung 16's softmax, the lean copies.
template <typename T, int kHeadDim>
using Rung21 = Fa2CpAsyncRung<T, kHeadDim, 2,
                              /*kPacked=*/false, /*kLeanSoftmax=*/true, /*kFlawBaseNeverMoves=*/false,
                              /*kLeanCopy=*/true>;

}  // namespace

template <typename T>
void attention_fwd_21_fa2_two_tiles_d128(const AttentionArgs<T>& args, cudaStream_t stream) {
  launch_lean_softmax_rung<Rung21>(args, stream, "attention rung 21");  // a scale that is not positive: rung 05
}

template void attention_fwd_21_fa2_two_tiles_d128<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t);
template void attention_fwd_21_fa2_two_tiles_d128<__half>(const AttentionArgs<__half>&, cudaStream_t);

}  // namespace kc::stage3
