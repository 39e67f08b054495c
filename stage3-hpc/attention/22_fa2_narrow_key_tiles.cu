// Rung 22 — rung 21 with 32-key K/V tiles: S of two MMA tiles fits beside O without spills.
//
// Idea: rung 21's warp holds, at D = 128, O of two 16-row tiles (128 FP32 registers a thread) and
// S of a 64-key tile for both (64), and ptxas spills what is left of the loop's state. A 32-key
// tile halves S (32 registers): the kernel then fits in 255 registers with nothing in local memory
// (-Xptxas -v). FlashAttention-2 makes the same trade on the GPUs of compute capability 8.6/8.9,
// where its non-causal D = 128 kernel takes 128 x 32 blocks. The price: every K/V tile's fixed
// work — the cp.async wait and the block barrier, each row's maximum (two quad shuffles), the
// rescale's vote and factors — now comes once every 32 keys instead of 64, and a tile's MMAs are
// half as many to hide it behind.
//
// What changed from rung 21: Fa2Shape's kBlockKeys = 32 (attention/fa2_mma.cuh), through
// Fa2CpAsyncRung's kNarrowKeyTiles, at both head dimensions. Nothing else: the same kernel,
// copies and softmax.
// Shared memory at D = 128: Q 32 KiB + 2 x (K, V) of 8 KiB = 64 KiB (two blocks an SM, as the
// registers allow). A scale that is not positive runs rung 05's kernels.
//
// Per warp and K/V tile at D = 128 (analysis): S 2 x 32 HMMA fed by 16 LDSM of K and 16 of Q (Q is
// re-read every tile, so its share of the LDSM grows), P V 2 x 32 HMMA fed by 16 LDSM.T of V: 48
// LDSM for 128 HMMA, 0.375 a HMMA (rung 21: 0.31).
//
// Expected limiter: the warp's issue of HMMA, LDSM and softmax in turn, as rung 21, with twice
// the tiles' fixed work a key and no spills; whichever of the two costs more decides between them.
//
// SASS to look for (D = 128): per K/V tile 128 HMMA.16816.F32.BF16, 48 LDSM (K, Q and V's
// LDSM.16.MT88.4), 8 LDGSTS.E.BYPASS.128; no LDL/STL.
//
// Run just this rung (next to rungs 16 and 21):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/(16|21|22)' --shapes 4x16x16x4096x4096x128
#include "attention/fa2_cp_async_kernel.cuh"

namespace kc::stage3 {
namespace {

// Rung 21 (two tiles a warp at both head dimensions, rung 16's softmax, the lean copies) with
// 32-key K/V tiles.
template <typename T, int kHeadDim>
using Rung22 = Fa2CpAsyncRung<T, kHeadDim, 2,
                              /*kPacked=*/false, /*kLeanSoftmax=*/true, /*kFlawBaseNeverMoves=*/false,
                              /*kLeanCopy=*/true, /*kNarrowKeyTiles=*/true>;

}  // namespace

template <typename T>
void attention_fwd_22_fa2_narrow_key_tiles(const AttentionArgs<T>& args, cudaStream_t stream) {
  launch_lean_softmax_rung<Rung22>(args, stream, "attention rung 22");  // a scale that is not positive: rung 05
}

template void attention_fwd_22_fa2_narrow_key_tiles<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t);
template void attention_fwd_22_fa2_narrow_key_tiles<__half>(const AttentionArgs<__half>&, cudaStream_t);

}  // namespace kc::stage3
