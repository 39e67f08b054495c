// Decode rung 07 — rung 06 with its first tiles copied into shared memory before the wait for the
// kernel ahead: after the wait the CTA reads only Q and the new tokens' rows, in one round trip.
//
// Idea: at batch 1 and short contexts the decode attention is a chain of dependent reads, not a
// stream of bytes. Rung 06 after its wait: Q's rows (a round trip), then the block ids of its
// first tiles (another), then their pages (a third: from L2, where rung 05's prefetch put them),
// and in the tile that holds the new token, that token's K/V rows (a fourth) — then the arithmetic
// of a few tiles. Only Q and the new rows are the kernel ahead's output. Everything else — the
// length, the block table, every cached row older than the new tokens — was written before the
// step began (an engine's earlier steps), so rung 07 copies those rows into the ring's stages with
// cp.async *before* the wait, not merely into L2: all kStages stages (3 tiles of 64 keys at
// D = 128, 4 at D = 64: the whole split at short contexts), the new tokens' rows left out. After
// the wait a thread loads its chunk of the new rows and its share of Q together (except in the
// D = 64 instance with two m16 tiles of rows, where holding the chunk across Q's rotation spilled
// on sm_80: there Q comes first), rotates both, and stores them into the tiles; then the tiles are computed as in rung 06, and later tiles (long
// contexts) stream through the ring as before. In an engine's step the copies overlap the tail of
// the QKV projection (a programmatic launch); launched the ordinary way (kc-bench) the wait
// returns at once and the rung should time as rung 06, a round trip or two shorter.
//
// The contract grows with it (decode_args.hpp, PagedDecodeAttention): rung 05 only asked L2 for
// the older rows early — a hint, harmless if a row changed later — while rung 07 computes with
// what it copied before the wait, so those rows must not be written by any kernel of the chain it
// is launched in. The engine's decode steps hold it: each step starts after the last one has
// finished, and within a step only this kernel writes a cache row (the new tokens').
//
// What changed from rung 06: the Rope parameter RopePagesFirst (decode_mma_split_kv.cuh):
// copy_first_tiles_before_wait before the wait (instead of prefetch_first_pages), then
// store_q_and_new_rows_after_wait (instead of store_rotated_q and the first tiles' copies), and a
// loop whose first iteration issues nothing (tile kStages - 1 is already in its stage). Splits,
// tiles, softmax, merge: rung 06's, in the same order — so the same bits (tested).
//
// Expected limiter: at short contexts, what is left after the wait — one round trip for Q and the
// new rows, the tiles' arithmetic and the merge; the copies before it overlap the kernel ahead in
// the engine. At long contexts, rung 06's: the K/V stream.
//
// SASS to look for: LDGSTS.E.BYPASS.128 (the first tiles' rows) between PREEXIT (the early start)
// and ACQBULK (the one wait), no UBLKPF (no prefetch), then rung 06's LDG.E.128 of Q, the new
// rows and the angles, and its HMMA.16816.F32 / LDSM tile step; no LDL/STL.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter '^stage3/attention_decode_paged_rope/07'
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/decode_mma_split_kv.cuh"
#include "kc/stage3/decode_args.hpp"

namespace kc::stage3 {

template <typename T>
void attention_decode_07_pages_before_wait(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                           const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                           cudaStream_t stream) {
  launch_rope_rung<RopePagesFirst<T>>(args, rope, plan, workspace, stream, "decode rung 07");
}

template <typename T>
int attention_decode_07_ctas_per_sm(const DecodeArgs<T>& args) {
  require_decode_shape(args, "decode rung 07");  // a shape without tensors will do
  return mma_split_kv_ctas_per_sm<DecodeMerge::in_kernel, true, RopePagesFirst<T>>(args);
}

template <typename T>
void attention_decode_07_new_rows_from_cache(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                             const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                             cudaStream_t stream) {
  launch_rope_rung<RopePagesFirst<T, /*kNewRowsFromCache=*/true>>(args, rope, plan, workspace, stream,
                                                                   "decode rung 07 (negative control)");
}

#define KC_INSTANTIATE(T)                                                                                          \
  template void attention_decode_07_pages_before_wait<T>(const DecodeArgs<T>&, const DecodeRopeArgs<T>&,            \
                                                         const DecodeSplitPlan&, const DecodeSplitWorkspace&,       \
                                                         cudaStream_t);                                             \
  template int attention_decode_07_ctas_per_sm<T>(const DecodeArgs<T>&);                                           \
  template void attention_decode_07_new_rows_from_cache<T>(const DecodeArgs<T>&, const DecodeRopeArgs<T>&,          \
                                                           const DecodeSplitPlan&, const DecodeSplitWorkspace&,     \
                                                           cudaStream_t);
KC_INSTANTIATE(__nv_bfloat16)
KC_INSTANTIATE(__half)
#undef KC_INSTANTIATE

}  // namespace kc::stage3
