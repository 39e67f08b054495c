// Decode rung 04 — rung 03 in one launch: the split that finishes last merges its group's splits,
// and a sequence that one split holds is written directly.
//
// Idea: rung 03 is two kernels. The splits write FP32 partials of O and their LSE; a combine
// kernel then merges them. In an engine's batch-1 decode step that second kernel runs once per
// layer, and it costs what any small kernel in a chain costs — the drain of the kernel before it,
// its own launch and ramp — whatever it computes: at 128 keys the combine merges one split and
// still takes its turn in the chain. Here the merge moves into the split kernel, as rung 14 of the
// GEMM ladder moves its split-K reduction: each split stores its partial, fences, and counts
// itself in its group's arrival counter (one atomicAdd by thread 0); the CTA whose count completes
// the group's used splits reads every partial back from L2 (ld.global.cg) and merges the group's
// rows — a warp per row, rung 03's combine (decode_common.cuh's merge_split_row), adding the splits
// in split order, so the bits do not depend on which CTA came last — then sets the counter back
// to zero for the next launch. No CTA waits for another. The splits a sequence uses are the
// ones that start inside it (ceil(L / keys_per_split), read from seq_lens on the device), so when
// one split holds the whole sequence there is nothing to merge: that CTA writes O and LSE itself,
// with no partial, no fence and no atomic, and the other splits of the table's width exit at once.
// A CUDA graph fixes the grid at capture (the table's width), while the context grows every step:
// the decision is made on the device, step by step.
//
// What changed from rung 03: the combine kernel is gone; per CTA a fence, an atomic and a barrier
// (__syncthreads_or), and in the last CTA of a group a merge of its rows (one warp per row, up to
// 32 rows x used splits x D floats read from L2); the workspace adds one counter per (sequence,
// kv head, row chunk). The kernel body, plans, partials and tiles are rung 03's
// (decode_mma_split_kv.cuh, DecodeMerge::in_kernel).
//
// Expected limiter: as rung 03 at batch >= 8 and long contexts (DRAM; the merge is one more
// pass over the partials, by fewer CTAs, instead of a kernel that reads them all). At batch 1 and
// short contexts — the engine's launch-bound decode step — one kernel fewer per layer in the
// chain: the step gets shorter by about the combine's share of it. What could make it slower: the
// last CTA of each group merges serially after its own split (where a combine kernel spread the
// rows over many CTAs), which shows when a group has many rows and many splits (32 rows at
// batch 1 with 64 splits: 32 rows x 64 partials x D floats by one CTA).
//
// SASS to look for: rung 03's (LDGSTS.E.BYPASS.128, LDSM.16.M88.4 and .MT88.4, HMMA.16816.F32.BF16,
// MUFU.EX2), plus MEMBAR.SC.GPU with CCTL.IVALL (each __threadfence), one ATOMG.E.ADD.STRONG.GPU
// (the count), BAR.RED.OR (__syncthreads_or), LDG.E.STRONG.GPU (the partial LSEs) and
// LDG.E.128.STRONG.GPU at D = 128 / LDG.E.64.STRONG.GPU at D = 64 (the partial rows, from L2),
// MUFU.RCP (the merge's 1 / sum); no combine kernel in the object; no LDL/STL.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter '^stage3/attention_decode_paged/04_fused_combine'
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/decode_mma_split_kv.cuh"
#include "kc/stage3/decode_args.hpp"

namespace kc::stage3 {

template <typename T>
void attention_decode_04_fused_combine(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                       const DecodeSplitWorkspace& workspace, cudaStream_t stream) {
  require_in_kernel_merge_args(args, plan, workspace, "decode rung 04");
  launch_mma_split_kv<DecodeMerge::in_kernel>(args, plan, workspace, stream);
}

template <typename T>
int attention_decode_04_ctas_per_sm(const DecodeArgs<T>& args) {
  require_decode_shape(args, "decode rung 04");  // a shape without tensors will do
  return mma_split_kv_ctas_per_sm<DecodeMerge::in_kernel>(args);
}

template <typename T>
void attention_decode_04_drops_last_split(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                          const DecodeSplitWorkspace& workspace, cudaStream_t stream) {
  require_in_kernel_merge_args(args, plan, workspace, "decode rung 04's negative control");
  launch_mma_split_kv<DecodeMerge::in_kernel_drops_last_split>(args, plan, workspace, stream);
}

#define KC_INSTANTIATE(T)                                                                                         \
  template void attention_decode_04_fused_combine<T>(const DecodeArgs<T>&, const DecodeSplitPlan&,                \
                                                     const DecodeSplitWorkspace&, cudaStream_t);                  \
  template int attention_decode_04_ctas_per_sm<T>(const DecodeArgs<T>&);                                          \
  template void attention_decode_04_drops_last_split<T>(const DecodeArgs<T>&, const DecodeSplitPlan&,             \
                                                        const DecodeSplitWorkspace&, cudaStream_t);
KC_INSTANTIATE(__nv_bfloat16)
KC_INSTANTIATE(__half)
#undef KC_INSTANTIATE

}  // namespace kc::stage3
