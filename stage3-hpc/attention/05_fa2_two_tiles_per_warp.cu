// Rung 05 — rung 04 with two 16-row MMA tiles per warp at D = 64: 128 query rows per block.
//
// Idea: in rung 04 a warp owns 16 query rows, one m16n8k16 tile, so each K fragment it loads with
// ldmatrix feeds one MMA of S = Q K^T and each V fragment one MMA of O += P V: half an LDSM per
// HMMA, and the shared-memory read port, not the tensor cores, sets the pace of the inner loops.
// Here a warp owns 32 rows, two MMA tiles stacked in M, and issues every K and V fragment to both:
// the same ldmatrix feeds two HMMAs. That is FlashAttention-2's launch configuration for D = 128
// (128 query rows per block, 4 warps, 64-key K/V tiles). Each K/V tile a block loads also serves
// twice the rows, halving the K/V traffic from L2 per query row.
//
// What changed from rung 04: Fa2Shape<D, 2> instead of Fa2Shape<D, 1> — the same kernel
// (fa2_cp_async_kernel.cuh: cp.async double buffer, causal tiles skipped, the mask on the tiles
// that need it, heaviest blocks first, grouped-query heads read in place, O = 0 and LSE = -inf for
// rows that see no key) on the warp step of fa2_mma.cuh with two tiles: per warp two sets of O
// accumulators, S and row states (a thread holds 4 rows: lane/4 + 8r), the K and V fragment loops
// issuing one MMA per tile, a Q tile of 128 rows. Nothing else.
//
// D = 128 stays at one tile per warp (rung 04's kernel), because two do not fit in 255 registers
// without spills. Two tiles of O are 128 FP32 registers and S 64 more; two tiles' Q fragments
// (64) cannot stay beside them, so with two tiles at D = 128 the warp re-reads Q's fragments from
// the Q tile slice by slice in every K/V tile (Fa2Shape::kQInRegisters, as FlashAttention-2's
// D = 128 kernel keeps Q in shared memory). Even then ptxas spills (-Xptxas -v: 124 bytes on
// sm_80, 220 on sm_90a; the per-chunk row indices of the cp.async copies, reloaded once per K/V
// tile): the loop-invariant copy arithmetic that rung 04 keeps in spare registers has no room.
// Leaner copy arithmetic (row i = i . threads / chunks per row + tid / chunks per row, no signed
// division per chunk) takes that to 8 bytes on sm_90a (one value, outside the loop) and 64 on
// sm_80, but it is TileCopy, shared with rungs 03 and 04, whose code it changes (ptxas then holds
// rung 04's D = 64 kernel to 128 registers, with spills). Setting kRung05TilesAtHeadDim128
// (fa2_cp_async_kernel.cuh, shared with rung 05's packed variable-length form) to 2 builds the
// two-tile D = 128 kernel as it stands.
//
// Per warp and K/V tile at D = 64 (analysis): 16 LDSM (K) + 16 LDSM.T (V) against 2 x (32 + 32)
// HMMA: 0.25 LDSM per HMMA (rung 04: 0.5); Q's 8 LDSM once. 2 x 64 MUFU.EX2.
// Shared memory at D = 64: Q tile of 128 x 64 + 2 x (K, V) of 64 x 64: 48 KiB (the opt-in
// threshold is above it); D = 128: as rung 04, 80 KiB.
// Costs: a causal diagonal is a 128 x 128 triangle, so the MMAs wasted on masked scores double
// (analysis, Sq = Sk = 4096: about 3% of the causal work instead of 1.5%); NaN or Inf in a row of
// V reaches every row of the 128-row block that loads its tile and does not see it (0 x NaN inside
// the MMA), as in rung 04 for 64 rows.
//
// Expected limiter: tensor-core and exp issue within a warp — the softmax (MUFU.EX2, FMULs, the
// quad shuffles) of the two tiles still sits between a warp's two MMA phases with nothing of the
// same warp to overlap it; other warps' MMAs are what hides it. The next step is Hopper's
// warpgroup MMAs (wgmma) fed by TMA.
//
// SASS to look for (D = 64): LDGSTS.E.BYPASS.128, LDGDEPBAR, DEPBAR.LE; LDSM.16.M88.4 (K; Q once)
// and LDSM.16.MT88.4 (V), each followed by two HMMAs that read the same B registers (two tiles);
// HMMA.16816.F32.BF16 / HMMA.16816.F32; MUFU.EX2; F2FP pack of P; no LDL/STL. D = 128: rung 04's.
//
// Run just this rung (next to rung 04):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/0[45]' --param causal=1
#include "attention/fa2_cp_async_kernel.cuh"

namespace kc::stage3 {
namespace {

// The kernel (fa2_cp_async_kernel.cuh) with two 16-row MMA tiles per warp; at D = 128 one (see
// above: two spill).
template <typename T, int kHeadDim>
using Rung05 = Fa2CpAsyncRung<T, kHeadDim, rung05_tiles_per_warp(kHeadDim)>;

}  // namespace

template <typename T>
void attention_fwd_05_fa2_two_tiles_per_warp(const AttentionArgs<T>& args, cudaStream_t stream) {
  launch_fa2_rung<Rung05>(args, stream, "attention rung 05");
}

template void attention_fwd_05_fa2_two_tiles_per_warp<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&,
                                                                      cudaStream_t);
template void attention_fwd_05_fa2_two_tiles_per_warp<__half>(const AttentionArgs<__half>&, cudaStream_t);

}  // namespace kc::stage3
