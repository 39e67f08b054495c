// kc/stage3/attention_ops.hpp — the public attention entries of stage 3: prefill attention over
// contiguous K/V, and decode attention over a paged KV cache.
//
// Stage 4 (and anything else outside this stage) calls attention through this header, never
// through a rung, as it calls the GEMM through kc/stage3/gemm.hpp and the memory-bound ops through
// kc/stage2/ops.hpp. What each computes, the layouts and the masks are the ops' definitions:
// kc/stage3/attention.hpp (attention_fwd) and kc/stage3/attention_decode.hpp
// (attention_decode_paged); the argument structs are the rungs' (kc/stage3/attention_args.hpp,
// kc/stage3/decode_args.hpp). Each entry
//   1. checks its arguments and throws kc::Error naming the argument and the rule before any
//      CUDA call (the rung's own checks: head dimension 64 or 128, Hq a multiple of Hkv,
//      16-byte aligned tensors and strides, block size 16/32/64, ...);
//   2. launches the rung measured fastest on this GPU for the shape (the stage-3 README's
//      attention chapter) and returns its kc-bench id ("stage3/attention_fwd/15_lazy_rescale"),
//      so a caller can report what ran.
// Launches are asynchronous on `stream`; a launch the runtime refuses throws kc::CudaError.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string_view>
#include <tuple>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/stage3/attention_args.hpp"
#include "kc/stage3/decode_args.hpp"

namespace kc::stage3 {

// attention_fwd (prefill): O and LSE from Q, K and V with the strides of `args`. Rungs on compute
// capability 9.0 with sm_90a code in the build (the tensor maps they build are cached per device, a
// bounded number of them), at both head dimensions: with the causal mask 25 up to 2048 keys (rung
// 15's consumers in persistent CTAs that take their next (query tile, head) item when they are
// ready for one, from a counter per stream) and 15 beyond (TMA + WGMMA, FlashAttention-3's overlap,
// the producer asleep while it waits, descriptors moved by addition, the scale inside the
// exponent's FFMA, consumers without rows leaving, the softmax's base moved only when it must),
// without it 19 (rung 15's consumers in persistent CTAs that deal a (batch, head) pair's query
// tiles together); 05 elsewhere (FlashAttention-2 on mma.sync with a cp.async K/V pipeline).
// T: __nv_bfloat16 or __half.
// Thread-safe to call; kernels run on `stream` as usual.
//
// The packed variable-length form (args.cu_seqlens_q and cu_seqlens_k set; the layout is in
// kc/stage3/attention_args.hpp and attention.hpp): many sequences of their own lengths in one
// launch, q_len and kv_len the longest (max_seqlen_q, max_seqlen_k). Rung: 15's packed kernel on
// Hopper with sm_90a code and a positive scale ("stage3/attention_fwd_varlen/15_lazy_rescale"),
// 05's elsewhere ("stage3/attention_fwd_varlen/05_fa2_two_tiles_per_warp"). Checked before any
// CUDA call: both offset arrays set, B >= 1, the longest lengths >= 1, Hq a multiple of Hkv, D 64
// or 128, the batch strides 0, the alignment of tensors and strides. Not checked (the offsets are
// on the device): that they start at 0, never decrease, give no sequence more than q_len / kv_len
// rows and stay within the tensors — validate_cu_seqlens below checks a host copy.
template <typename T>
std::string_view attention_forward(const AttentionArgs<T>& args, cudaStream_t stream);

// The packed form's offsets from per-sequence lengths: {0, l_0, l_0 + l_1, ...}, B + 1 values.
// kc::Error for a negative length or a total above INT32_MAX (the offsets are int32).
std::vector<std::int32_t> cu_seqlens_from_lengths(const std::vector<std::int32_t>& lengths);

// Checks B + 1 offsets on the host (a copy of what cu_seqlens_q or cu_seqlens_k hold): the first
// is 0, none is below the one before, no sequence (a difference) has more than max_len rows.
// kc::Error naming `name`, the sequence and its offsets. B >= 1, max_len >= 0.
void validate_cu_seqlens(const std::int32_t* cu_seqlens, std::int64_t batch, std::int64_t max_len,
                         std::string_view name);

// attention_decode_paged: one to kMaxDecodeQueries new tokens per sequence against its pages.
// Holds what the decode rungs keep between calls — the GPU's SM count and the CTAs an SM holds,
// which their split of the context reads, and the FP32 workspace of the splits' partial outputs —
// for one device: create one per device and keep it. Not thread-safe. The split depends on batch,
// heads and the table's width (max_blocks), never on the lengths, which live on the device; call
// reserve() with the largest arguments before capturing calls in a CUDA graph, so that no call in
// the graph allocates.
class PagedDecodeAttention {
 public:
  // The rung run() launches.
  enum class Rung {
    // decode_05_early_pages (the default): rung 04 with its first pages asked into L2 before it
    // waits for the kernel ahead (programmatic launches). Its contract: block_table, seq_lens and
    // the cached rows before each sequence's new tokens are not written by the kernel it launches
    // behind — the caller's bookkeeping, set before the step's chain of kernels.
    early_pages,
    // decode_04_fused_combine: rung 03 in one launch — the split that finishes last merges its
    // group, and a sequence one split holds is written directly.
    fused_combine,
    // decode_03_mma_split_kv: flash-decoding on tensor cores — a group's query rows against
    // 64-key tiles on mma.sync, the pages streamed by a 3-4 stage cp.async pipeline, the context
    // cut into splits that fill whole waves of resident CTAs, merged by a combine kernel.
    mma_split_kv,
    // decode_02_split_kv: the same splits and combine on CUDA cores (FFMA from shared memory).
    split_kv,
  };

  // Touches no GPU: the SM count of the current device is read on the first reserve() or run().
  PagedDecodeAttention() = default;

  // Grows the workspace to what run() needs for `args` (no launch), and asks the GPU once for the
  // CTAs an SM holds of the kernel run() will launch for them (an occupancy query, not a launch).
  template <typename T>
  void reserve(const DecodeArgs<T>& args);

  // Launches rung() and returns its kc-bench id ("stage3/attention_decode_paged/05_early_pages").
  // The registry's entries for rungs 02 to 05 are this, with the rung set. Checked on the host
  // before any CUDA call (require_decode_args): the shape, non-null and 16-byte aligned tensors.
  // The block table and the lengths are on the device and are not read: that every block id a
  // sequence's length reaches lies in the pool is the caller's promise, which validate_paged_kv
  // (kc/stage3/attention_decode.hpp) checks on a host copy — as kc::engine's runner checks the
  // tables it uploads, every step.
  template <typename T>
  std::string_view run(const DecodeArgs<T>& args, cudaStream_t stream);

  // The kc-bench id of `rung` ("stage3/attention_decode_paged/05_early_pages"): what run() returns.
  static std::string_view rung_id(Rung rung);

  // The rungs of the attention_decode_paged_rope op, which run_rope() launches.
  enum class RopeRung {
    // decode_08_page_walk: rung 07 with each thread's page addresses worked out once
    // a CTA instead of from the key for every row it copies. Rung 07's contract.
    page_walk,
    // decode_07_pages_before_wait: rung 06 with every stage of its ring filled with
    // the cached rows before it waits for the kernel ahead; after the wait only Q and the new
    // tokens' rows are read. Its contract is rung 05's, for data copied rather than prefetched:
    // block_table, seq_lens and the cached rows before each sequence's new tokens are written
    // before the chain of kernels this one is launched in starts (in an engine, by earlier steps).
    pages_before_wait,
    // decode_06_rope_in: rung 05 with the new tokens' RoPE and cache write inside.
    rope_in,
    // decode_09_workers_first: rung 08 in a grid of groups x splits, its CTAs past their
    // sequence's keys leaving before the wait. Rung 07's contract.
    workers_first,
    // decode_10_release_acquire_merge (the default): rung 08 with the splits' hand-over to the
    // merge ordered by thread 0's release/acquire count instead of every thread's fences, level
    // with rung 08 where one split holds each sequence and faster where several do (stage-3
    // README, decode rung 10). Rung 07's contract.
    release_acquire_merge,
    // decode_11_heads_handed_over: rung 10 that, given DecodeRopeArgs::heads_written (the q|k|v
    // projection's counts of the columns it has written, Gemm::ColumnCounts), starts on a kv head
    // once its rows are counted instead of waiting for the whole projection; without counters it is
    // rung 10. Rung 07's contract.
    heads_handed_over,
  };
  // Every RopeRung, in the ladder's order (06 to 11): what a caller comparing them walks.
  static constexpr RopeRung kRopeRungs[] = {RopeRung::rope_in,       RopeRung::pages_before_wait,
                                            RopeRung::page_walk,     RopeRung::workers_first,
                                            RopeRung::release_acquire_merge, RopeRung::heads_handed_over};

  // The attention_decode_paged_rope op whatever rung() is: the new tokens' RoPE and cache write
  // inside the attention (DecodeRopeArgs in decode_args.hpp): Q and `rope.k_new` rotated by their
  // positions, the rotated K and `rope.v_new` written to the caches, then O and LSE — by
  // rope_rung(), rung 10 unless set. Returns its kc-bench id
  // ("stage3/attention_decode_paged_rope/10_release_acquire_merge"). reserve() with rung()
  // early_pages also reserves what this needs. Checked before any CUDA call as run() is, and the
  // rope arguments (require_rope_args): non-null, aligned, the decode arguments' own caches.
  template <typename T>
  std::string_view run_rope(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope, cudaStream_t stream);
  // The kc-bench id of `rung`: what run_rope() returns.
  static std::string_view rope_rung_id(RopeRung rung);
  // The rung's number on the ladder (6 for rope_in, ..., 10 for release_acquire_merge): the two
  // digits of its id, which kc-engine-bench --decode-rope-rung takes.
  static int rope_rung_number(RopeRung rung);
  // Which rung run_rope() launches (kc-engine-bench --decode-rope-rung compares them). Set it
  // before reserve().
  void set_rope_rung(RopeRung rung) { rope_rung_ = rung; }
  RopeRung rope_rung() const { return rope_rung_; }

  // Which rung run() launches: early_pages unless set (a caller comparing them, such as
  // kc-engine-bench --decode-attention). Set it before reserve().
  void set_rung(Rung rung) { rung_ = rung; }
  Rung rung() const { return rung_; }

  // The shortest split the plans may cut (plan_decode_splits' and plan_decode_splits_in_waves'
  // floor): kDecodeMinKeysPerSplit (256) unless set; a positive multiple of
  // kDecodeSplitKeyMultiple (64), else kc::Error. Set it before reserve(): the workspace grows
  // with the split count.
  void set_min_keys_per_split(int keys);
  int min_keys_per_split() const { return min_keys_per_split_; }

 private:
  // The plan of rung() (of rope_rung() with `rope`).
  template <typename T>
  DecodeSplitPlan plan_for(const DecodeArgs<T>& args, bool rope = false);
  // The workspace for `plan` (the FP32 partials and, where the rung merges in its launch, the
  // arrival counters), grown on `stream`.
  template <typename T>
  DecodeSplitWorkspace workspace_on(const DecodeArgs<T>& args, const DecodeSplitPlan& plan, bool in_launch_merge,
                                    cudaStream_t stream);
  template <typename T>
  float* workspace_for(const DecodeArgs<T>& args, const DecodeSplitPlan& plan);
  // Rungs 04, 05 and 06's arrival counters for `plan` (0 for the other rungs and for one split).
  template <typename T>
  std::size_t arrival_count(const DecodeArgs<T>& args, const DecodeSplitPlan& plan, bool in_launch_merge) const;
  // Whether rung() merges its splits in its own launch (rungs 04 and 05: arrival counters).
  bool merges_in_launch() const;

  Rung rung_ = Rung::early_pages;
  RopeRung rope_rung_ = RopeRung::release_acquire_merge;
  int sm_count_ = 0;
  int min_keys_per_split_ = kDecodeMinKeysPerSplit;
  // The CTAs an SM holds of rung 03's to 10's kernel instance: (the rung's
  // number, bf16, D, the group's rows).
  std::map<std::tuple<int, bool, int, int>, int> mma_ctas_per_sm_;
  DeviceScratch workspace_;
  // Rungs 04 to 08's arrival counters, zeroed when allocated; each launch leaves them at zero.
  DeviceCounters arrivals_;
};

}  // namespace kc::stage3
