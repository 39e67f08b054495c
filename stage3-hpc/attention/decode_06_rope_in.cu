// Decode rung 06 — rung 05 with the new tokens' RoPE and cache write inside: the decode step loses
// the kernel that rotated q and k and wrote the new K/V rows, and the attention reads Q and the new
// rows straight from the projection's output.
//
// Idea: at batch 1 and short contexts a decode step is a chain of small kernels, each paying a
// launch and a ramp, and the one between the QKV projection and the attention — rotate Q and K by
// the token's position, store K and V into the cache page — moves a few kilobytes (SmolLM2: 9 + 3
// heads of 64) and costs the step what any launch costs. Everything it does can happen where the
// attention already touches the same bytes:
//   Q    rung 05 copies the chunk's Q rows into shared memory (cp.async); here each thread loads
//        chunk c and chunk c + D/16 of a row (the two halves of 8 rotate_half pairs), rotates them
//        by the row's position L - Sq + t with the cos/sin table stage 2's RoPE reads, rounds to
//        bf16/f16 as the unfused RoPE stores q, and stores them into the swizzled Q tile.
//   K, V the new tokens are the last Sq keys of the sequence, inside the last split's last tile.
//        Where rung 05 copies a key row from its page, the rows of new keys are built from the
//        projection's output instead: the thread that copies chunk c of such a row loads its K
//        chunk and the partner chunk, rotates, and stores the result into the stage from
//        registers (V is copied as is). The CTA of the first row chunk also stores the row to its
//        page, for the steps after this one; a CTA never reads a row another CTA writes in the
//        same launch, so no ordering between CTAs is needed.
// The rotation is core::rotate_pair (kc/core/rope.cuh), the unfused kernels' function, on the
// same inputs, so Q, the cached rows and O come out bit for bit as RoPE + cache write + rung 05
// (tested).
//
// What changed from rung 05: a Rope parameter (decode_mma_split_kv.cuh's RopeIn, DecodeRopeArgs in
// decode_args.hpp): store_rotated_q in place of the Q copy (an empty cp.async group keeps the
// group count), new_token_chunk in copy_tile_pages for keys >= L - Sq. The prefetch before the
// wait, the splits, the merge: rung 05's.
//
// Expected limiter: as rung 05 — the K/V stream at long contexts, the chain of dependent loads at
// short ones. The rotation adds a dependent load of the angles and ~8 FMAs a pair to the Q load
// and to the (one or few) new rows; the step loses a launch (~3 us at batch 1 on the H200, the
// launch floor of the kernel it replaces).
//
// SASS to look for: rung 05's, minus the LDGSTS of Q (now LDG.E.128 of Q and of the angles, FMUL/
// FFMA of the rotation, F2FP packing to bf16/f16, STS.128 into the Q tile), and in the tile loop a
// branch around LDG.E.128 + STS.128 + STG.E.128 for the new rows.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter '^stage3/attention_decode_paged_rope/'
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/decode_mma_split_kv.cuh"
#include "kc/stage3/decode_args.hpp"

namespace kc::stage3 {

template <typename T>
void attention_decode_06_rope_in(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope, const DecodeSplitPlan& plan,
                                 const DecodeSplitWorkspace& workspace, cudaStream_t stream) {
  launch_rope_rung<RopeIn<T>>(args, rope, plan, workspace, stream, "decode rung 06");
}

template <typename T>
int attention_decode_06_ctas_per_sm(const DecodeArgs<T>& args) {
  require_decode_shape(args, "decode rung 06");  // a shape without tensors will do
  return mma_split_kv_ctas_per_sm<DecodeMerge::in_kernel, true, RopeIn<T>>(args);
}

template <typename T>
void attention_decode_06_position_off_by_one(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                             const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                             cudaStream_t stream) {
  launch_rope_rung<RopeIn<T, /*kPositionOffByOne=*/true>>(args, rope, plan, workspace, stream,
                                                          "decode rung 06 (negative control)");
}

#define KC_INSTANTIATE(T)                                                                                     \
  template void attention_decode_06_rope_in<T>(const DecodeArgs<T>&, const DecodeRopeArgs<T>&,                \
                                               const DecodeSplitPlan&, const DecodeSplitWorkspace&,           \
                                               cudaStream_t);                                                 \
  template int attention_decode_06_ctas_per_sm<T>(const DecodeArgs<T>&);                                      \
  template void attention_decode_06_position_off_by_one<T>(const DecodeArgs<T>&, const DecodeRopeArgs<T>&,    \
                                                           const DecodeSplitPlan&, const DecodeSplitWorkspace&, \
                                                           cudaStream_t);
KC_INSTANTIATE(__nv_bfloat16)
KC_INSTANTIATE(__half)
#undef KC_INSTANTIATE

}  // namespace kc::stage3
