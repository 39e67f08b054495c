// Decode rung 10 — rung 08 with the splits' hand-over to the merge ordered by one release/acquire
// atomic a CTA instead of by every thread's sequentially consistent fences.
//
// Idea: from rung 04 on, the split of a sequence that finishes last merges the others' partial O
// and LSE in the same launch (merge_if_last in decode_mma_split_kv.cuh). Its hand-over is the
// classic pattern: every thread stores its partials and runs __threadfence(), thread 0 counts the
// split in the group's arrival counter with a relaxed atomicAdd, and the CTA that sees the last
// count runs __threadfence() again before it reads the partials. __threadfence() is a fence.sc.gpu
// (MEMBAR.SC.GPU in the SASS), the strongest fence there is, run by every warp, twice in the last
// CTA — and that CTA is the end of the kernel's critical path whenever a sequence spans several
// splits (the decode step's attention at contexts above the engine's split floor). The PTX memory
// model asks for less: a barrier (bar.sync) orders every thread's stores before thread 0's next
// operation, and a release by thread 0 is cumulative — it makes visible the writes the barrier
// ordered before it, not only its own. So one fetch_add with memory_order_acq_rel at GPU scope
// (cuda::atomic_ref, libcu++) after a barrier releases the CTA's partials, and in the CTA that
// counts last it also acquires those of the splits that counted before it: it reads the value the
// earlier counts wrote one after another, and PTX's observation order runs through a chain of
// atomic read-modify-writes, so that acquire synchronizes with every earlier release. Every count
// releases (its split's partials) and acquires (any count may turn out to be the last). The
// barrier that passes `last` to the CTA orders its threads' reads after that acquire.
//
// What changed from rung 08: the Rope parameter RopeReleaseAcquireMerge (decode_mma_split_kv.cuh,
// rung 08's page walk with kReleaseAcquireMerge), which makes merge_if_last a barrier, thread 0's
// acq_rel count and the barrier that passes `last` on, with no __threadfence(). Splits, tiles,
// softmax, the merge's arithmetic and order: rung 08's, so the same bits (tested).
//
// Expected limiter: where one split holds each sequence (contexts up to the split floor) nothing
// changes — no merge runs. Above it, the hand-over's fences on the last CTA's path shrink to one
// MEMBAR.ALL.GPU: the step saves at most the difference once a layer, a small part of a decode
// step whose attention streams the K/V bytes.
//
// SASS to look for: rung 08's, with no MEMBAR.SC.GPU; one MEMBAR.ALL.GPU before the
// ATOM.E.ADD.STRONG.GPU (the release) and CCTL.IVALL after it (the acquire drops the SM's L1
// lines; the merge reads the partials with LDG.E.STRONG.GPU from L2 anyway); no LDL/STL.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter '^stage3/attention_decode_paged_rope/(08|10)'
//   build/ci/stage4-inference/kc-engine-bench --synthetic smollm2-135m --contexts 2048 --concurrency 1
//       --decode-rope-rung 10,08
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/decode_mma_split_kv.cuh"
#include "kc/stage3/decode_args.hpp"

namespace kc::stage3 {

template <typename T>
void attention_decode_10_release_acquire_merge(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                               const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                                               cudaStream_t stream) {
  launch_rope_rung<RopeReleaseAcquireMerge<T>>(args, rope, plan, workspace, stream, "decode rung 10");
}

template <typename T>
int attention_decode_10_ctas_per_sm(const DecodeArgs<T>& args) {
  require_decode_shape(args, "decode rung 10");  // a shape without tensors will do
  return mma_split_kv_ctas_per_sm<DecodeMerge::in_kernel, true, RopeReleaseAcquireMerge<T>>(args);
}

#define KC_INSTANTIATE(T)                                                                                        \
  template void attention_decode_10_release_acquire_merge<T>(const DecodeArgs<T>&, const DecodeRopeArgs<T>&,      \
                                                             const DecodeSplitPlan&, const DecodeSplitWorkspace&, \
                                                             cudaStream_t);                                       \
  template int attention_decode_10_ctas_per_sm<T>(const DecodeArgs<T>&);
KC_INSTANTIATE(__nv_bfloat16)
KC_INSTANTIATE(__half)
#undef KC_INSTANTIATE

}  // namespace kc::stage3
