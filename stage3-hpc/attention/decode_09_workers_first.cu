// Decode rung 09 — rung 08 in a grid turned round: the CTAs that hold keys start first, and the
// ones that hold none leave before the wait.
//
// Idea: in a decode step captured as a CUDA graph the grid is sized once for the longest context
// the step may see (the table's width, kc-engine-bench's --max-model-len), and the plan cuts that
// into splits that fill the GPU's CTA slots (plan_decode_splits_in_waves). At batch 1 and a short
// context few of those splits hold keys: with the Llama-3.2-1B shape (8 kv heads) and a table of
// 8448 keys, 44 splits of 192 keys make a grid of 352 CTAs, of which the 8 of split 0 work at 128
// keys and 16 at 129 to 384. Rungs 02 to 08 launch splits x groups, split the fast index: the
// working CTAs are 0, 44, 88, ... 308, and the GPU starts CTAs in index order, as SMs free up —
// behind a q | k | v projection whose blocks fill every SM, kv head 7's worker starts after 300
// CTAs that have nothing to do. And those CTAs do not leave at once: they wait for the kernel
// ahead (the wait comes before rung 04's test of an empty split), each holding its 67 KB of
// shared memory, and the o projection behind waits for all of them.
//
// What changed from rung 08: the Rope parameter RopeWorkersFirst (decode_mma_split_kv.cuh) — the
// grid is groups x splits (split_index, group_index: the partial slots, the arrival counters and
// the merge use them in place of blockIdx.x and .y), and a CTA whose split starts past its
// sequence's length returns before the wait (split 0 of a sequence without keys stays, to write its
// empty rows). Tiles, rotation, cache write, softmax, merge: rung 08's, so the same bits (tested).
// Rung 08's plans, workspace, arguments and contract.
//
// Expected limiter: at short contexts, as rung 08, the chain of one CTA per kv head — Q and the
// new rows after the wait, the tiles, the merge — now with its CTAs among the first started; at
// long contexts, when every split works, the K/V stream as rung 08 (the order does not matter
// there).
//
// SASS to look for: rung 08's, plus an early EXIT before the ACQBULK of the wait; S2R of
// SR_CTAID.Y for the split where rung 08 reads SR_CTAID.X; no LDL/STL.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter '^stage3/attention_decode_paged_rope/(08|09)'
//   build/ci/stage4-inference/kc-engine-bench --synthetic llama-3.2-1b --contexts 128 --concurrency 1
//       --decode-rope-rung 09,08
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/decode_mma_split_kv.cuh"
#include "kc/stage3/decode_args.hpp"

namespace kc::stage3 {

template <typename T>
void attention_decode_09_workers_first(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                       const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                       cudaStream_t stream) {
  launch_rope_rung<RopeWorkersFirst<T>>(args, rope, plan, workspace, stream, "decode rung 09");
}

template <typename T>
int attention_decode_09_ctas_per_sm(const DecodeArgs<T>& args) {
  require_decode_shape(args, "decode rung 09");  // a shape without tensors will do
  return mma_split_kv_ctas_per_sm<DecodeMerge::in_kernel, true, RopeWorkersFirst<T>>(args);
}

template <typename T>
void attention_decode_09_partials_in_rung08_slots(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                               const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                               cudaStream_t stream) {
  launch_rope_rung<RopeWorkersFirst<T, /*kPartialsInRung08Slots=*/true>>(args, rope, plan, workspace, stream,
                                                                        "decode rung 09 (negative control)");
}

#define KC_INSTANTIATE(T)                                                                                      \
  template void attention_decode_09_workers_first<T>(const DecodeArgs<T>&, const DecodeRopeArgs<T>&,            \
                                                     const DecodeSplitPlan&, const DecodeSplitWorkspace&,       \
                                                     cudaStream_t);                                             \
  template int attention_decode_09_ctas_per_sm<T>(const DecodeArgs<T>&);                                       \
  template void attention_decode_09_partials_in_rung08_slots<T>(const DecodeArgs<T>&, const DecodeRopeArgs<T>&,    \
                                                             const DecodeSplitPlan&, const DecodeSplitWorkspace&, \
                                                             cudaStream_t);
KC_INSTANTIATE(__nv_bfloat16)
KC_INSTANTIATE(__half)
#undef KC_INSTANTIATE

}  // namespace kc::stage3
