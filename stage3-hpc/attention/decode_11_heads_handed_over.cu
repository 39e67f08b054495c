// Decode rung 11 — rung 10 that starts on a kv head as soon as the q|k|v projection ahead of it has
// written that head's rows, instead of when the whole projection has finished.
//
// Idea: in a decode step the attention launches as a programmatic dependent of the layer's q|k|v
// projection (rung 12 of the GEMM ladder, with the RMSNorm inside). Its CTAs start while the
// projection runs, copy their cached pages into the ring (rung 07), and then wait —
// griddepcontrol.wait — until every block of the projection has finished and its writes are
// flushed. That wait is the whole grid's: the kv head whose columns were done first waits for the
// last block of all, and then for the grid's completion to travel back to the dependent. But a CTA
// of kv head h needs only h's rows: its query heads' columns of q and its columns of k and v. So
// the projection counts them (Gemm::ColumnCounts: each block, once its outputs are stored, adds
// its columns to the counter of their kv head with a release at GPU scope), and the CTA's thread 0
// reads its head's counter with acquire semantics until it reaches (group + 2) x D, the head's
// columns in q, k and v; a barrier then orders the CTA's reads of Q and the new rows after that
// acquire (decode_mma_split_kv.cuh's wait_for_head_rows). A CTA whose split holds no key has
// nothing to wait for and leaves at once (rung 09's early leave, in rung 10's grid).
//
// Why this is safe without the grid wait. The dependent launch starts the attention only after
// every projection block has started (each calls launch_dependents first thing), so the blocks
// being waited on hold their SMs already: no CTA can wait for a block that has no SM to run on.
// Everything else the grid wait guarded — the attention's output O and the splits' workspace,
// which the previous layer's o projection and attention read — is free too: a projection block
// counts only after its own wait for the kernel ahead of it, and that chain runs back through the
// previous layer's o projection. And the kernel after the attention, which waits for the attention
// alone, may overwrite what the projection read (the o projection adds into the residual stream):
// every projection block counts as its last act, every kv head has a CTA that waits for its count
// (split 0 of each sequence), so no attention grid ends before every projection block is past its
// reads. The counters are the caller's: zero before the projection (the engine zeroes a step's
// counters once, before its first layer), and never reset by the kernels.
//
// What changed from rung 10: the Rope parameter RopeHeadsHandedOver (kHeadsHandedOver), which
// swaps the wait after the first tiles' copies for wait_for_head_rows and lets a CTA without keys
// leave first, given DecodeRopeArgs::heads_written; without counters it waits as rung 10 does.
// Splits, tiles, softmax, merge: rung 10's, so the same bits (tested).
//
// Expected limiter: what the wait costs in a decode step — measured for Llama-3.2-1B at 128 keys in
// docs/notes/2026-12-07-stage4-attention-link-breakdown-h100-5fe1a70.md — shrinks to the time
// between a head's last column and the step's last column, plus one L2 round trip; the
// projection's time and the attention's own work are unchanged. In the engine it measured slower
// than rung 10, and the early leave is most of why (stage-3 README, decode rung 11; the note
// docs/notes/2026-12-07-stage4-decode-rung11-h100-2fa8b22.md): not the default. Alone (kc-bench) there is no
// projection to hand over: its entry passes counters that say every head is written already, so
// what it measures is rung 10 with one acquire in place of the grid wait.
//
// SASS to look for: rung 10's, with no ACQBULK (griddepcontrol.wait) on the path with counters:
// a loop around LDG.E.STRONG.GPU of the counter, CCTL.IVALL after it (the acquire), then BAR.SYNC;
// the ACQBULK stays on the path without counters; no LDL/STL.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter '^stage3/attention_decode_paged_rope/1[01]'
//   build/ci/stage4-inference/kc-engine-bench --synthetic llama-3.2-1b --contexts 128,2048 --concurrency 1
//       --decode-rope-rung 11,10
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "attention/decode_mma_split_kv.cuh"
#include "kc/stage3/decode_args.hpp"

namespace kc::stage3 {
namespace {

template <typename T>
void require_hand_over_args(const DecodeRopeArgs<T>& rope, const char* rung) {
  if (rope.heads_written == nullptr) return;
  require(reinterpret_cast<std::uintptr_t>(rope.heads_written) % alignof(unsigned) == 0,
          "{}: heads_written must be 4-byte aligned device memory; got {}", rung,
          static_cast<const void*>(rope.heads_written));
  require(rope.heads_written_target >= 1,
          "{}: heads_written_target = 0 would let every CTA read its rows before the projection writes them; pass "
          "the count that says a kv head's rows are written ((q_heads / kv_heads + 2) x head_dim for a q|k|v "
          "projection counted by kv head)",
          rung);
}

}  // namespace

template <typename T>
void attention_decode_11_heads_handed_over(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                           const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                           cudaStream_t stream) {
  require_hand_over_args(rope, "decode rung 11");
  launch_rope_rung<RopeHeadsHandedOver<T>>(args, rope, plan, workspace, stream, "decode rung 11");
}

template <typename T>
void attention_decode_11_waits_for_head_zero(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                             const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                             cudaStream_t stream) {
  require_hand_over_args(rope, "decode rung 11 (waits for head 0)");
  launch_rope_rung<RopeHeadsHandedOver<T, /*kWaitsForHeadZero=*/true>>(args, rope, plan, workspace, stream,
                                                                        "decode rung 11 (waits for head 0)");
}

template <typename T>
int attention_decode_11_ctas_per_sm(const DecodeArgs<T>& args) {
  require_decode_shape(args, "decode rung 11");  // a shape without tensors will do
  return mma_split_kv_ctas_per_sm<DecodeMerge::in_kernel, true, RopeHeadsHandedOver<T>>(args);
}

#define KC_INSTANTIATE(T)                                                                                          \
  template void attention_decode_11_heads_handed_over<T>(const DecodeArgs<T>&, const DecodeRopeArgs<T>&,            \
                                                         const DecodeSplitPlan&, const DecodeSplitWorkspace&,       \
                                                         cudaStream_t);                                             \
  template void attention_decode_11_waits_for_head_zero<T>(const DecodeArgs<T>&, const DecodeRopeArgs<T>&,          \
                                                           const DecodeSplitPlan&, const DecodeSplitWorkspace&,     \
                                                           cudaStream_t);                                           \
  template int attention_decode_11_ctas_per_sm<T>(const DecodeArgs<T>&);
KC_INSTANTIATE(__nv_bfloat16)
KC_INSTANTIATE(__half)
#undef KC_INSTANTIATE

}  // namespace kc::stage3
