// Decode rung 05 — rung 04 with its first pages on the way before the kernel ahead has finished:
// the split's length, block table and first pages of cached keys are asked for before the wait.
//
// Idea: in an engine's decode step the attention runs as a programmatic dependent
// (kc/core/dependent_launch.hpp) of the kernel that rotates q and k and writes the new token's
// K/V rows into the cache. Rungs 03 and 04 do nothing before core::wait_for_previous_grids(), so
// each CTA starts its chain of dependent memory reads only when that kernel is done: the
// sequence's length, then the block table, then the pages — three round trips to DRAM before the
// first tile is in shared memory, and at short contexts (a few tiles a split) that chain is most of
// the kernel. Almost none of it depends on the kernel ahead: the lengths and the block table are
// the caller's bookkeeping, copied to the GPU before the step's chain of kernels, and every cached
// row older than the sequence's new tokens was written by earlier steps. Only Q, the new tokens'
// K/V rows and the outputs belong to the chain. So rung 05 reads the length and table and asks the
// L2 for the pages of its first kStages - 1 tiles of older keys (cp.async.bulk.prefetch.L2, one per
// page and K or V, at most 3 x 64 keys a CTA) before the wait, exactly as stage 3's rung 12 asks
// for its weights; after the wait it runs rung 04 unchanged, and its copies find those lines in L2.
// A prefetch moves nothing into the CTA and orders nothing: the data the CTA computes with is still
// read after the wait, so a new row written late by the kernel ahead is read as written.
//
// The contract this adds (PagedDecodeAttention documents it): block_table, seq_lens and the cached
// rows before each sequence's new tokens are not written by the kernel this one launches behind.
// Launched the ordinary way (kc-bench, no ProgrammaticLaunchScope) the wait returns at once and the
// prefetch only runs just ahead of the copies: the rung should time as rung 04.
//
// What changed from rung 04: the wait moved below split_work() and prefetch_first_pages()
// (decode_mma_split_kv.cuh, kEarlyPages); nothing else.
//
// Expected limiter: as rung 04 standalone. In the engine's step, the first tiles' DRAM latency
// overlaps the kernel ahead; what remains after the wait is an L2 round trip per tile instead of a
// DRAM one at short contexts.
//
// SASS to look for: rung 04's, plus UBLKPF.L2 (the bulk prefetch, sm_90a; nothing on sm_80) and
// the LDG of the length and the table before ACQBULK (the wait).
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter '^stage3/attention_decode_paged/05_early_pages'
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/decode_mma_split_kv.cuh"
#include "kc/stage3/decode_args.hpp"

namespace kc::stage3 {

template <typename T>
void attention_decode_05_early_pages(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                     const DecodeSplitWorkspace& workspace, cudaStream_t stream) {
  require_in_kernel_merge_args(args, plan, workspace, "decode rung 05");
  launch_mma_split_kv<DecodeMerge::in_kernel, /*kEarlyPages=*/true>(args, plan, workspace, stream);
}

template <typename T>
int attention_decode_05_ctas_per_sm(const DecodeArgs<T>& args) {
  require_decode_shape(args, "decode rung 05");  // a shape without tensors will do
  return mma_split_kv_ctas_per_sm<DecodeMerge::in_kernel, true>(args);
}

#define KC_INSTANTIATE(T)                                                                                    \
  template void attention_decode_05_early_pages<T>(const DecodeArgs<T>&, const DecodeSplitPlan&,             \
                                                   const DecodeSplitWorkspace&, cudaStream_t);               \
  template int attention_decode_05_ctas_per_sm<T>(const DecodeArgs<T>&);
KC_INSTANTIATE(__nv_bfloat16)
KC_INSTANTIATE(__half)
#undef KC_INSTANTIATE

}  // namespace kc::stage3
