// Decode rung 03 — flash-decoding on the tensor cores: the group's query rows padded to an m16
// tile, S = Q.K^T and O += P.V on mma.sync, 64-key tiles of pages in a 3- or 4-stage cp.async
// pipeline, the tile's keys split over 4 warps.
//
// Idea: rung 02 reads each page once per group but then spends CUDA-core instructions on every
// K/V element: a dot product per (row, key) in FP32 FMAs on converted operands, a shuffle per
// (row, key) to broadcast P, an FMA per (row, key, column) for P.V. At Llama-3-8B's 4 rows a
// group that is 2 multiply-adds per K/V byte plus their conversions, LDS and shuffles, and a
// 32-key tile per stage leaves 16 KiB (D = 128) in flight per CTA. Both limits move here:
// (1) Tensor cores. The group's G x Sq rows (4 for Llama-3-8B, up to kDecodeMaxRowsPerCta = 32 a
//     CTA, as rung 02) are the M of m16n8k16 MMAs: one 16-row tile (two past 16 rows), rows past
//     the chunk zero. The prefill ladder's warp step does the rest (attention/fa2_mma.cuh's
//     Fa2Warp, used as is): K fragments by ldmatrix from a swizzled tile, the online softmax on
//     the accumulator fragments (masked keys -inf before the maximum), P rounded to bf16/f16 in
//     registers as the A operand of P.V, V fragments by ldmatrix.trans. 12 of the 16 rows of a
//     Llama-3-8B tile are padding: the tensor cores have far more throughput than a stream of
//     K/V bytes needs, and the m16 tile costs no extra bytes.
// (2) Bytes in flight. Little's law: bytes in flight = bandwidth x latency. The H200's HBM3e
//     (4.8 TB/s peak, somewhat less for a copy) at a loaded latency near 1 us needs about 4 MB in
//     flight, some 32 KB per SM of 132. A tile here is 64
//     keys of K and V: 32 KiB at D = 128, 16 KiB at D = 64. kStages = 3 stages at D = 128 (96 KiB +
//     the Q tile: two CTAs an SM on the H200) and 4 at D = 64 (64 KiB: three an SM) keep
//     kStages - 1 tiles travelling while one is computed: 64 KiB a CTA, over 100 KiB an SM, several
//     times what Little's law asks, so the loaded latency may grow well past 1 us before the
//     pipeline runs dry. A 64-key tile is 4, 2 or 1 pages of 16, 32 or 64 rows, gathered through
//     the block table; each 16-byte piece is one LDGSTS, keys at or past the split's (or the
//     sequence's) end are zero-filled and never read (the NaN rows past a length, the kNoBlock
//     slots), masked to -inf before the softmax, and a zero V row times a zero probability stays 0.
//     A thread copies D/16 rows of each tile; their block ids are loaded one iteration before their
//     copies are issued, so the table read (an L1/L2 hit, dependent on nothing) never stalls the
//     copies behind it.
// Warps: the 4 warps split the tile's keys, each with its own 16 rows x key slice and its own
// softmax state (max, sum, O accumulators): with one m16 tile, warp w owns keys 16w .. 16w + 15 of
// every tile; with two, warps w and w + 2 share m-tile w % 2 and own 32 keys each. Splitting keys
// (not whole tiles) keeps every warp on the same stage, so a stage is free once the tile's single
// __syncthreads has passed, and the pipeline depth is in tiles of the CTA, not per warp. After the
// last tile the warps' states are merged through shared memory (the stage buffers, reused) with
// the same rule the combine kernel uses across splits: m = max_w m_w, l = sum_w l_w 2^(m_w - m),
// O = sum_w O_w 2^(m_w - m) / l.
//
// Per 64-key tile, per warp (D = 128, one m16 tile, 16 keys): S: 8 ldmatrix.x4 of K and 16 HMMA;
// softmax: 8 scores, 2 row maxima (2 SHFL.BFLY each), 10 MUFU.EX2, 64 FMUL to rescale O; P.V: 8
// ldmatrix.x4.trans of V and 16 HMMA; copies: per thread 8 block ids (LDG), 16 LDGSTS.128 and
// their addresses. A few hundred instructions a warp per tile (the loop body holds both the masked
// and the unmasked softmax), about 1000 a CTA, against the ~1 us one SM needs to receive a 32 KiB
// tile at its share of DRAM bandwidth (about 2000 cycles, 8000 issue slots on 4 schedulers).
// Hopper's tensor cores run mma.sync at a fraction of WGMMA's rate, still far above what a stream
// of K/V needs.
//
// What changed from rung 02: the dot products and P.V on mma.sync (ldmatrix / ldmatrix.trans from
// swizzled tiles) instead of FP32 FMAs and shuffles; 64-key tiles in 3 or 4 stages instead of 32
// keys in 2; Q stays in registers (A fragments) instead of FP32 shared memory; P is rounded to
// bf16/f16 before P.V (the op's tolerance allows it, as for attention_fwd); warps split keys
// instead of rows, and merge at the end. The same grid (split x kv head [x row chunk] x
// sequence), plans, workspace, combine (decode_common.cuh's decode_combine_kernel) and
// programmatic-launch contract. The split count comes from plan_decode_splits_in_waves
// (decode_args.hpp): rung 03's CTAs are large and few fit an SM, so the splits are chosen to fill
// whole waves of resident CTAs (attention_decode_03_ctas_per_sm) rather than 4 CTAs an SM.
//
// Expected limiter: DRAM bandwidth at the decode shapes (batch >= 8, context >= 8k), with the
// pipeline deep enough that the loaded latency does not cap it. What could still hold it back:
// the tail of a grid of a few waves (a ragged batch's short sequences), the issue of the copies
// (16 LDGSTS and their address arithmetic per thread per tile), and at batch 1 the combine and
// the per-split prologue (Q, the first kStages - 1 tiles) against splits of 1k keys.
//
// Workspace: rung 02's, [B, Hq, Sq, splits, D] + [B, Hq, Sq, splits] floats
// (decode_split_workspace_floats), none for one split.
//
// Shared memory: kStages x (K and V tiles of 64 x D, swizzled, no padding) + the Q tile (16 or 32
// rows x D): 100 or 104 KiB at D = 128, 66 or 68 KiB at D = 64 (above the 48 KiB a launch gets
// without opting in). The merge after the last tile reuses the stages: 4 warps x 16 rows x (D + 8)
// floats + their maxima and sums.
//
// SASS to look for: mma_split_kv_kernel: LDGSTS.E.BYPASS.128 (pages and Q), LDGDEPBAR and
// DEPBAR.LE (commit and wait), LDSM.16.M88.4 (Q and K fragments), LDSM.16.MT88.4 (V fragments),
// HMMA.16816.F32.BF16 (bf16) or HMMA.16816.F32 (f16), MUFU.EX2, SHFL.BFLY (row maxima and sums),
// BAR.SYNC; no LDL/STL. decode_combine_kernel: as in rung 02 (the same kernel).
//
// Where the code is: the kernel and its launch live in decode_mma_split_kv.cuh, shared with rungs 04
// and 05 (DecodeMerge::combine_kernel here); this file checks the arguments and picks the instance.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter '^stage3/attention_decode_paged/03_mma_split_kv'
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/decode_mma_split_kv.cuh"
#include "kc/stage3/decode_args.hpp"

namespace kc::stage3 {

template <typename T>
void attention_decode_03_mma_split_kv(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                      const DecodeSplitWorkspace& workspace, cudaStream_t stream) {
  require_decode_args(args, "decode rung 03");
  require_decode_split_plan(args, plan, workspace, "decode rung 03");
  launch_mma_split_kv<DecodeMerge::combine_kernel>(args, plan, workspace, stream);
}

template <typename T>
int attention_decode_03_ctas_per_sm(const DecodeArgs<T>& args) {
  require_decode_shape(args, "decode rung 03");  // a shape without tensors will do
  return mma_split_kv_ctas_per_sm<DecodeMerge::combine_kernel>(args);
}

template void attention_decode_03_mma_split_kv<__nv_bfloat16>(const DecodeArgs<__nv_bfloat16>&,
                                                              const DecodeSplitPlan&, const DecodeSplitWorkspace&,
                                                              cudaStream_t);
template void attention_decode_03_mma_split_kv<__half>(const DecodeArgs<__half>&, const DecodeSplitPlan&,
                                                       const DecodeSplitWorkspace&, cudaStream_t);
template int attention_decode_03_ctas_per_sm<__nv_bfloat16>(const DecodeArgs<__nv_bfloat16>&);
template int attention_decode_03_ctas_per_sm<__half>(const DecodeArgs<__half>&);

}  // namespace kc::stage3
