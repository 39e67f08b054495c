// Decode rung 08 — rung 07 with each thread's page addresses worked out once a CTA instead of once
// a row: the page walk made cheap.
//
// Idea: at batch 1 and short contexts rung 07 is a chain of instructions, not a stream of bytes: a
// handful of CTAs (one a kv head) each copy a few tiles and compute them, and a warp's time is
// the instructions it issues one after another. Its SASS shows where they go: every row of every
// tile a thread copies is located from scratch — the block id, then
// ((block x kv_heads + kv_head) x block_size + row) x D, in 64 bits from runtime sizes, then the
// swizzle — dozens of instructions a pair of cp.async, and at D = 128 a thread copies 8 rows of
// each of the 3 tiles it starts before the wait. Most of that does not change from row to row.
// TileCopy hands a thread chunk c of the rows r0 + kRowStep i of a tile (kRowStep = 8 at D = 128,
// 16 at D = 64); a block holds 16, 32 or 64 keys and a tile starts on a block boundary, so row
// r0 + kRowStep i is in the block of key key0 + kRowStep i (the same for every thread of the CTA:
// a broadcast load of its id), at row r0 + (kRowStep i mod block_size) of it, and its stage offset
// is swizzled_offset(r0, c) plus a constant (the swizzle reads row mod 8 = r0 mod 8). The thread's
// first row, the block's bytes and the in-block mask are worked out once (PageWalk in
// decode_mma_split_kv.cuh); a copy is then one 32 x 32 -> 64-bit product, a mask and an add for its
// address, with the stage offset an immediate.
//
// What changed from rung 07: the Rope parameter RopePageWalk (decode_mma_split_kv.cuh):
// page_walk_for once, load_walk_block_ids and copy_walk_tile instead of load_block_ids and
// copy_tile_pages (before the wait and in the loop). Splits, tiles, the new rows after the wait,
// softmax, merge: rung 07's, in the same order — so the same bits (tested).
//
// Expected limiter: at short contexts what is left of the chain — Q and the new rows after the
// wait, the tiles' arithmetic, the merge — and the instruction fetches of a kernel run once; at
// long contexts, as rung 07, the K/V stream.
//
// SASS to look for: rung 07's (LDGSTS.E.BYPASS.128 between PREEXIT and the one ACQBULK, then
// LDSM / HMMA.16816.F32), with far fewer instructions between the LDGSTS: an IMAD.WIDE.U32 by the
// block's bytes for each pair where rung 07 has chains of IMAD.WIDE.U32 / IMAD.HI and shifts; no
// LDL/STL.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter '^stage3/attention_decode_paged_rope/08'
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/decode_mma_split_kv.cuh"
#include "kc/stage3/decode_args.hpp"

namespace kc::stage3 {

template <typename T>
void attention_decode_08_page_walk(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                   const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                   cudaStream_t stream) {
  launch_rope_rung<RopePageWalk<T>>(args, rope, plan, workspace, stream, "decode rung 08");
}

template <typename T>
int attention_decode_08_ctas_per_sm(const DecodeArgs<T>& args) {
  require_decode_shape(args, "decode rung 08");  // a shape without tensors will do
  return mma_split_kv_ctas_per_sm<DecodeMerge::in_kernel, true, RopePageWalk<T>>(args);
}

template <typename T>
void attention_decode_08_one_page_per_tile(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                           const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                           cudaStream_t stream) {
  launch_rope_rung<RopePageWalk<T, /*kOnePagePerTile=*/true>>(args, rope, plan, workspace, stream,
                                                               "decode rung 08 (negative control)");
}

#define KC_INSTANTIATE(T)                                                                                     \
  template void attention_decode_08_page_walk<T>(const DecodeArgs<T>&, const DecodeRopeArgs<T>&,               \
                                                 const DecodeSplitPlan&, const DecodeSplitWorkspace&,          \
                                                 cudaStream_t);                                                \
  template int attention_decode_08_ctas_per_sm<T>(const DecodeArgs<T>&);                                      \
  template void attention_decode_08_one_page_per_tile<T>(const DecodeArgs<T>&, const DecodeRopeArgs<T>&,       \
                                                         const DecodeSplitPlan&, const DecodeSplitWorkspace&,  \
                                                         cudaStream_t);
KC_INSTANTIATE(__nv_bfloat16)
KC_INSTANTIATE(__half)
#undef KC_INSTANTIATE

}  // namespace kc::stage3
