// The public attention entries (kc/stage3/attention_ops.hpp): which rung each runs, and the decode
// rung's workspace.
#include "kc/stage3/attention_ops.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/gemm.hpp"

namespace kc::stage3 {
namespace {

// What the Hopper rung needs per device: whether it runs there (compute capability 9.0 and a
// build with sm_90a code) and its cache of tensor maps and kernel attributes (cudaFuncSetAttribute
// is per device). Built on a device's first prefill; guarded, since the table is shared.
struct HopperAttention {
  bool runs = false;
  std::mutex mutex;  // the cache is not thread-safe: one launch at a time takes it
  HopperLaunchCache cache;
};

HopperAttention& hopper_attention_for_current_device() {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<HopperAttention>> devices;
  int device = 0;
  KC_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<HopperAttention>& entry = devices[device];
  if (!entry) {
    entry = std::make_unique<HopperAttention>();
    entry->runs = runs_hopper_rungs(device);
  }
  return *entry;
}

// Causal calls with at most this many keys run rung 25 on Hopper; longer ones rung 15.
constexpr int kDynamicItemsMaxKeys = 2048;

// One row per rung of the attention_decode_paged op: all that run(), plan_for(), rung_id() and
// merges_in_launch() know of it.
template <typename T>
struct DecodeRungRow {
  PagedDecodeAttention::Rung rung;
  int number;
  std::string_view id;
  void (*launch)(const DecodeArgs<T>&, const DecodeSplitPlan&, const DecodeSplitWorkspace&, cudaStream_t);
  // The CTAs an SM holds of the rung's kernel instance (the plan's waves); null for rung 02,
  // whose plan counts SMs alone (plan_decode_splits).
  int (*ctas_per_sm)(const DecodeArgs<T>&);
  // Whether the split that finishes last merges the others in the launch (arrival counters)
  // rather than a combine kernel after it.
  bool merges_in_launch;
};

template <typename T>
constexpr DecodeRungRow<T> kDecodeRungRows[] = {
    {PagedDecodeAttention::Rung::split_kv, 2, "stage3/attention_decode_paged/02_split_kv",
     &attention_decode_02_split_kv<T>, nullptr, false},
    {PagedDecodeAttention::Rung::mma_split_kv, 3, "stage3/attention_decode_paged/03_mma_split_kv",
     &attention_decode_03_mma_split_kv<T>, &attention_decode_03_ctas_per_sm<T>, false},
    {PagedDecodeAttention::Rung::fused_combine, 4, "stage3/attention_decode_paged/04_fused_combine",
     &attention_decode_04_fused_combine<T>, &attention_decode_04_ctas_per_sm<T>, true},
    {PagedDecodeAttention::Rung::early_pages, 5, "stage3/attention_decode_paged/05_early_pages",
     &attention_decode_05_early_pages<T>, &attention_decode_05_ctas_per_sm<T>, true},
};

template <typename T>
const DecodeRungRow<T>& decode_rung_row(PagedDecodeAttention::Rung rung) {
  for (const DecodeRungRow<T>& row : kDecodeRungRows<T>)
    if (row.rung == rung) return row;
  throw Error(fmt::format("PagedDecodeAttention: rung {} has no row in kDecodeRungRows", static_cast<int>(rung)));
}

// One row per rung of the attention_decode_paged_rope op: all that run_rope(), plan_for(),
// rope_rung_id() and rope_rung_number() know of it. A new rung is one row here (and its enum value,
// its registry entry).
template <typename T>
struct RopeRungRow {
  PagedDecodeAttention::RopeRung rung;
  int number;
  std::string_view id;
  void (*launch)(const DecodeArgs<T>&, const DecodeRopeArgs<T>&, const DecodeSplitPlan&, const DecodeSplitWorkspace&,
                 cudaStream_t);
  // The CTAs an SM holds of the rung's kernel instance for these arguments (the plan's waves).
  int (*ctas_per_sm)(const DecodeArgs<T>&);
};

template <typename T>
constexpr RopeRungRow<T> kRopeRungRows[] = {
    {PagedDecodeAttention::RopeRung::rope_in, 6, "stage3/attention_decode_paged_rope/06_rope_in",
     &attention_decode_06_rope_in<T>, &attention_decode_06_ctas_per_sm<T>},
    {PagedDecodeAttention::RopeRung::pages_before_wait, 7, "stage3/attention_decode_paged_rope/07_pages_before_wait",
     &attention_decode_07_pages_before_wait<T>, &attention_decode_07_ctas_per_sm<T>},
    {PagedDecodeAttention::RopeRung::page_walk, 8, "stage3/attention_decode_paged_rope/08_page_walk",
     &attention_decode_08_page_walk<T>, &attention_decode_08_ctas_per_sm<T>},
    {PagedDecodeAttention::RopeRung::workers_first, 9, "stage3/attention_decode_paged_rope/09_workers_first",
     &attention_decode_09_workers_first<T>, &attention_decode_09_ctas_per_sm<T>},
    {PagedDecodeAttention::RopeRung::release_acquire_merge, 10,
     "stage3/attention_decode_paged_rope/10_release_acquire_merge", &attention_decode_10_release_acquire_merge<T>,
     &attention_decode_10_ctas_per_sm<T>},
    {PagedDecodeAttention::RopeRung::heads_handed_over, 11, "stage3/attention_decode_paged_rope/11_heads_handed_over",
     &attention_decode_11_heads_handed_over<T>, &attention_decode_11_ctas_per_sm<T>},
};

template <typename T>
const RopeRungRow<T>& rope_rung_row(PagedDecodeAttention::RopeRung rung) {
  for (const RopeRungRow<T>& row : kRopeRungRows<T>)
    if (row.rung == rung) return row;
  throw Error(fmt::format("PagedDecodeAttention: rope rung {} has no row in kRopeRungRows", static_cast<int>(rung)));
}

// The names, numbers and flags are the same for both element types.
const RopeRungRow<__nv_bfloat16>& rope_rung_names(PagedDecodeAttention::RopeRung rung) {
  return rope_rung_row<__nv_bfloat16>(rung);
}
const DecodeRungRow<__nv_bfloat16>& decode_rung_names(PagedDecodeAttention::Rung rung) {
  return decode_rung_row<__nv_bfloat16>(rung);
}

}  // namespace

// On an H100/H200 (sm_90a code built), with the causal mask: rung 15 (TMA + WGMMA with
// FlashAttention-3's overlap, the producer asleep while it waits, descriptors moved by addition,
// the scale inside the exponent's FFMA, consumers without rows leaving, the softmax's base moved
// only when it must), which measured faster than rung 13 at every shape of its tables, at both
// head dimensions (stage-3 README, rungs 14 and 15); rung 13 had taken the place of rungs 07, 09
// and 12 the same way. Without the mask: rung 19 (rung 15's consumers in persistent CTAs that deal
// a pair's query tiles together), faster than rung 15 at 1k-2k keys and level from 4k (stage-3
// README, rungs 18 and 19). With the mask and at most kDynamicItemsMaxKeys keys: rung 25 (rung
// 20's persistent CTAs taking their items when ready), level with rung 15 at 1k keys and faster at
// 2k at both head dimensions, slower than it from 8k (stage-3 README, rung 25).
// Elsewhere rung 05 at both head dimensions:
// at D = 64 it runs two 16-row query tiles a warp and measured faster than rung 04; at D = 128 it
// runs rung 04's kernel (two tiles spill), so the two are the same there
// (stage3-hpc/attention/05_fa2_two_tiles_per_warp.cu says why).
//
// The packed variable-length form: on an H100/H200 (sm_90a code built) with a positive scale rung
// 15's packed kernel (attention/varlen_15_lazy_rescale.cu), which measured faster than the packed
// rung 05 at every point of the op's table (stage-3 README, "The packed form on Hopper"); rung
// 05's packed kernel elsewhere. Both forms' checks come first, on the host, so that a refused call
// makes no CUDA call.
template <typename T>
std::string_view attention_forward(const AttentionArgs<T>& args, cudaStream_t stream) {
  if (is_packed(args)) {
    require_flash_args(args, "attention_forward", kFlashMaxBlockRows, /*packed=*/true);
    if (args.scale > 0.f) {  // the packed rung 15's consumers take a positive scale
      HopperAttention& hopper = hopper_attention_for_current_device();
      if (hopper.runs) {
        const std::lock_guard<std::mutex> lock(hopper.mutex);
        attention_fwd_varlen_15_lazy_rescale(args, stream, hopper.cache);
        return "stage3/attention_fwd_varlen/15_lazy_rescale";
      }
    }
    attention_fwd_varlen_05_fa2_two_tiles_per_warp(args, stream);
    return "stage3/attention_fwd_varlen/05_fa2_two_tiles_per_warp";
  }
  // The dense form's checks first, on the host: a refused call makes no CUDA call at all (the
  // packed rung checks its own form before anything else).
  require_flash_args(args, "attention_forward", kFlashMaxBlockRows);
  HopperAttention& hopper = hopper_attention_for_current_device();
  if (hopper.runs) {
    const std::lock_guard<std::mutex> lock(hopper.mutex);
    if (!args.causal) {
      attention_fwd_19_pair_tiles_together(args, stream, hopper.cache);
      return "stage3/attention_fwd/19_pair_tiles_together";
    }
    if (args.kv_len <= kDynamicItemsMaxKeys) {
      attention_fwd_25_dynamic_items(args, stream, hopper.cache);
      return "stage3/attention_fwd/25_dynamic_items";
    }
    attention_fwd_15_lazy_rescale(args, stream, hopper.cache);
    return "stage3/attention_fwd/15_lazy_rescale";
  }
  attention_fwd_05_fa2_two_tiles_per_warp(args, stream);
  return "stage3/attention_fwd/05_fa2_two_tiles_per_warp";
}

std::vector<std::int32_t> cu_seqlens_from_lengths(const std::vector<std::int32_t>& lengths) {
  std::vector<std::int32_t> offsets(lengths.size() + 1, 0);
  std::int64_t total = 0;
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    require(lengths[b] >= 0, "cu_seqlens_from_lengths: sequence {} has length {}; a length counts rows and must be >= 0",
            b, lengths[b]);
    total += lengths[b];
    require(total <= INT32_MAX,
            "cu_seqlens_from_lengths: the first {} sequences hold {} rows; the offsets are int32, at most 2^31 - 1",
            b + 1, total);
    offsets[b + 1] = static_cast<std::int32_t>(total);
  }
  return offsets;
}

void validate_cu_seqlens(const std::int32_t* cu_seqlens, std::int64_t batch, std::int64_t max_len,
                         std::string_view name) {
  require(batch >= 1 && max_len >= 0, "{}: a batch of {} sequences of at most {} rows; need B >= 1 and a bound >= 0",
          name, batch, max_len);
  require(cu_seqlens != nullptr, "{}: null; the packed form needs B + 1 = {} offsets", name, batch + 1);
  require(cu_seqlens[0] == 0, "{}: the first offset is {}; it must be 0 (sequence 0 starts at row 0)", name,
          cu_seqlens[0]);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t length = std::int64_t{cu_seqlens[b + 1]} - cu_seqlens[b];
    require(length >= 0, "{}: offsets {} and {} of sequence {} decrease ({} rows); offsets must never decrease",
            name, cu_seqlens[b], cu_seqlens[b + 1], b, length);
    require(length <= max_len,
            "{}: sequence {} has {} rows (offsets {} to {}), more than the longest length given ({}): raise "
            "max_seqlen (AttentionArgs::q_len / kv_len), which sizes the grid",
            name, b, length, cu_seqlens[b], cu_seqlens[b + 1], max_len);
  }
}

template <typename T>
DecodeSplitPlan PagedDecodeAttention::plan_for(const DecodeArgs<T>& args, bool rope) {
  if (sm_count_ == 0) sm_count_ = current_device_sm_count();
  const auto number_and_occupancy = [](const auto& row) { return std::make_pair(row.number, row.ctas_per_sm); };
  const auto [number, occupancy] = rope ? number_and_occupancy(rope_rung_row<T>(rope_rung_))
                                        : number_and_occupancy(decode_rung_row<T>(rung_));
  if (occupancy == nullptr)
    return plan_decode_splits(args.batch, args.kv_heads, args.group_rows(), args.max_keys(), sm_count_,
                              min_keys_per_split_);
  // The occupancy query once per kernel instance, never inside a captured or timed launch.
  int& ctas_per_sm =
      mma_ctas_per_sm_[{number, std::is_same_v<T, __nv_bfloat16>, args.head_dim, args.group_rows()}];
  if (ctas_per_sm == 0) ctas_per_sm = occupancy(args);
  return plan_decode_splits_in_waves(args.batch, args.kv_heads, args.group_rows(), args.max_keys(),
                                     ctas_per_sm * sm_count_, min_keys_per_split_);
}

template <typename T>
float* PagedDecodeAttention::workspace_for(const DecodeArgs<T>& args, const DecodeSplitPlan& plan) {
  const std::size_t floats =
      decode_split_workspace_floats(args.batch, args.q_heads, args.q_len, args.head_dim, plan);
  return floats == 0 ? nullptr : reinterpret_cast<float*>(workspace_.reserve(floats * sizeof(float)));
}

template <typename T>
std::size_t PagedDecodeAttention::arrival_count(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                                bool in_launch_merge) const {
  if (!in_launch_merge) return 0;
  return decode_split_arrival_counters(args.batch, args.kv_heads, plan);
}

template <typename T>
DecodeSplitWorkspace PagedDecodeAttention::workspace_on(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                                        bool in_launch_merge, cudaStream_t stream) {
  DecodeSplitWorkspace workspace = decode_split_workspace(workspace_for(args, plan), args.batch, args.q_heads,
                                                          args.q_len, args.head_dim, plan);
  if (const std::size_t count = arrival_count(args, plan, in_launch_merge); count > 0) {
    arrivals_.reserve(count, stream);
    workspace.arrivals = arrivals_.data();
  }
  return workspace;
}

void PagedDecodeAttention::set_min_keys_per_split(int keys) {
  require(keys >= kDecodeSplitKeyMultiple && keys % kDecodeSplitKeyMultiple == 0,
          "PagedDecodeAttention: a split of {} keys; the split floor must be a positive multiple of {}", keys,
          kDecodeSplitKeyMultiple);
  min_keys_per_split_ = keys;
}

template <typename T>
void PagedDecodeAttention::reserve(const DecodeArgs<T>& args) {
  // The pointers may still be null here (a shape only); the shape is checked now rather than at
  // the first step (the head dimension picks the kernel whose occupancy the plan reads).
  require_decode_shape(args, "PagedDecodeAttention");
  // rung() and, with early_pages, rope_rung() (run_rope), which a decode step may take instead.
  for (const bool rope : {false, true}) {
    if (rope && rung_ != Rung::early_pages) break;
    const DecodeSplitPlan plan = plan_for(args, rope);
    workspace_for(args, plan);
    // No stream here: counters that grow are zeroed on the legacy stream, and run() launches on
    // the caller's, which need not be ordered after it (a non-blocking stream) — so that is
    // waited for.
    if (arrivals_.reserve(arrival_count(args, plan, rope || merges_in_launch()), nullptr))
      KC_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
}

template <typename T>
std::string_view PagedDecodeAttention::run(const DecodeArgs<T>& args, cudaStream_t stream) {
  // On the host before any CUDA call (the plan asks the GPU for its SM count on a first call).
  require_decode_args(args, "PagedDecodeAttention::run");
  const DecodeSplitPlan plan = plan_for(args);
  const DecodeSplitWorkspace workspace = workspace_on(args, plan, merges_in_launch(), stream);
  const DecodeRungRow<T>& row = decode_rung_row<T>(rung_);
  row.launch(args, plan, workspace, stream);
  return row.id;
}

template <typename T>
std::string_view PagedDecodeAttention::run_rope(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope,
                                                cudaStream_t stream) {
  require_decode_args(args, "PagedDecodeAttention::run_rope");
  require_rope_args(args, rope, "PagedDecodeAttention::run_rope");
  const DecodeSplitPlan plan = plan_for(args, true);
  const DecodeSplitWorkspace workspace = workspace_on(args, plan, true, stream);
  const RopeRungRow<T>& row = rope_rung_row<T>(rope_rung_);
  row.launch(args, rope, plan, workspace, stream);
  return row.id;
}

std::string_view PagedDecodeAttention::rope_rung_id(RopeRung rung) { return rope_rung_names(rung).id; }

int PagedDecodeAttention::rope_rung_number(RopeRung rung) { return rope_rung_names(rung).number; }

std::string_view PagedDecodeAttention::rung_id(Rung rung) { return decode_rung_names(rung).id; }

bool PagedDecodeAttention::merges_in_launch() const { return decode_rung_names(rung_).merges_in_launch; }

#define KC_INSTANTIATE(T)                                                                  \
  template std::string_view attention_forward<T>(const AttentionArgs<T>&, cudaStream_t);   \
  template void PagedDecodeAttention::reserve<T>(const DecodeArgs<T>&);                     \
  template std::string_view PagedDecodeAttention::run<T>(const DecodeArgs<T>&, cudaStream_t);     \
  template std::string_view PagedDecodeAttention::run_rope<T>(const DecodeArgs<T>&, const DecodeRopeArgs<T>&, \
                                                              cudaStream_t);
KC_INSTANTIATE(__nv_bfloat16)
KC_INSTANTIATE(__half)
#undef KC_INSTANTIATE

}  // namespace kc::stage3
