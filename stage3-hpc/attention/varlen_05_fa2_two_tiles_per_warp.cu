// attention_fwd_varlen, rung 05 — rung 05 on the packed variable-length form: one launch for a
// batch of sequences of different lengths, their tokens one after the other.
//
// Idea: continuous batching hands attention the new tokens of many sequences at once, each with
// its own number of queries (a whole prompt, a chunk of one, a single decoding token) and of keys
// (what it has cached, plus the new ones). Padding them to the longest into [B, H, S, D] wastes
// the padded rows' work and memory; one launch per sequence wastes launches and leaves the GPU
// half empty on short ones. FlashAttention's answer is the packed ("varlen") form: Q is
// [total_q, Hq, D], the sequences' rows one after the other, K and V [total_k, Hkv, D], and two
// int32 arrays of B + 1 cumulative offsets, cu_seqlens_q and cu_seqlens_k, say where each
// sequence starts (kc/stage3/attention_args.hpp has the layout, attention.hpp the definition).
// The grid is rung 05's sized by the longest sequence (max_seqlen_q, which AttentionArgs::q_len
// holds in this form): a block reads its sequence's offsets from global memory first, and a block
// past its sequence's last query tile leaves at once.
//
// What changed from rung 05: its kernel (fa2_cp_async_kernel.cuh) instantiated with kPacked, which
// adds one block of code in front of rung 05's: blockIdx.z names a sequence instead of a batch; its
// four offsets (cu_seqlens_q/k[b] and [b + 1]) give its rows' start in the packed tensors (the
// HeadView of a sequence: no batch stride) and its own Sq_b and Sk_b, which replace Sq and Sk for
// everything the block decides — the bottom-right causal mask of that sequence, the K/V tiles it
// visits, where the zero fill of a partial tile starts, which rows it stores; a block whose tile
// lies past the sequence's rows leaves. The query tiles run heaviest first within each sequence,
// as before. Nothing of rung 05's dense kernel changed (its parameter is AttentionParams, the
// fields without the offsets, and its machine code is what it was); this file compiles only the
// packed form. A sequence's last K/V tile stops at Sk_b with zeros (cp.async src-size 0), never
// reading the next sequence's keys, and so does its Q tile at Sq_b; a sequence with Sq_b = 0 runs
// no block, one with Sk_b = 0 writes O = 0 and LSE = -inf for its rows. LSE is each sequence's
// [Hq, Sq_b] block at cu_seqlens_q[b] . Hq (the dense [B, Hq, Sq] when the lengths are equal).
//
// Costs: the blocks of short sequences past their last tile still launch (a read of the offsets
// and an exit each): a batch of one long and many short sequences launches B x Hq x
// ceil(max_seqlen_q / 128) blocks (64 rows a block at D = 128) for much less work. The offsets are
// read before anything else, a dependent load at the start of every block.
//
// Expected limiter: rung 05's (the MMA and exp issue of each warp), on a grid that is as full as
// the batch's total length makes it.
//
// SASS to look for: rung 05's (LDGSTS.E.BYPASS.128, LDSM.16.M88.4 / LDSM.16.MT88.4, HMMA.16816.F32,
// MUFU.EX2, F2FP, no LDL/STL), plus the offsets' LDG.E before the mainloop and an EXIT ahead of
// it for blocks past their sequence.
//
// Run just this rung (its op, attention_fwd_varlen):
//   build/ci/bench/kc-bench --filter stage3/attention_fwd_varlen/05_fa2_two_tiles_per_warp
#include "attention/fa2_cp_async_kernel.cuh"

namespace kc::stage3 {
namespace {

// Rung 05's configuration (two 16-row MMA tiles per warp at D = 64, one at D = 128), kPacked.
template <typename T, int kHeadDim>
using VarlenRung05 = Fa2CpAsyncRung<T, kHeadDim, rung05_tiles_per_warp(kHeadDim), /*kPacked=*/true>;

}  // namespace

template <typename T>
void attention_fwd_varlen_05_fa2_two_tiles_per_warp(const AttentionArgs<T>& args, cudaStream_t stream) {
  launch_fa2_rung<VarlenRung05>(args, stream, "attention rung 05 (packed variable-length form)", true);
}

template void attention_fwd_varlen_05_fa2_two_tiles_per_warp<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&,
                                                                             cudaStream_t);
template void attention_fwd_varlen_05_fa2_two_tiles_per_warp<__half>(const AttentionArgs<__half>&, cudaStream_t);

}  // namespace kc::stage3
