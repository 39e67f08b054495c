// The paged decode's merge-in-the-launch control: decode rung 04's kernel
// (stage3-hpc/attention/decode_04_fused_combine.cu) whose merge leaves out the partial of the
// sequence's last used split (its final keys). Everything else is the rung: the kernel body, the
// partials, the arrival counters. It runs with 8 splits of the table's width (the rung's split
// rule would give the benchmark shapes anything from 1 to dozens), so the flaw shows wherever a
// sequence reaches past its first split and hides where one split holds the whole sequence (then
// nothing is merged: that CTA writes O itself).
// And decode rung 06's (stage3-hpc/attention/decode_06_rope_in.cu, op attention_decode_paged_rope):
// its kernel rotating the new tokens' Q and K by the angle of the position before theirs — the
// off-by-one of a step that passes the sequence's length where its last position belongs. The
// cache rows it writes are then wrong in every sequence, and O wherever the old keys are not all
// the same distance from the new token's (always, past one key).
// And decode rung 07's (stage3-hpc/attention/decode_07_pages_before_wait.cu): its kernel copying
// the new tokens' rows of its first tiles from their pages before the wait, like the cached rows —
// rows the kernel has not written yet (the op poisons them) — instead of building them after it.
// O is then wrong (NaN) wherever a new row falls in a split's first tiles, and those rows are
// never written to the cache.
// And decode rung 08's (stage3-hpc/attention/decode_08_page_walk.cu): its kernel reading every row
// of a 64-key tile from the block of the tile's first key — a page read from the wrong block. O is
// then wrong wherever a tile spans more than one block (blocks of 16 or 32 keys, past the first
// block's keys); with blocks of 64 it is right.
// And decode rung 09's (stage3-hpc/attention/decode_09_workers_first.cu, a grid of groups x splits):
// its kernel storing each split's partials in the slot that rung 08's grid order would give it —
// the group's index, modulo the splits. O is then wrong wherever a sequence's keys span several
// splits (partials overwritten, slots read that no split wrote); where one split holds each
// sequence nothing is merged and it is right.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/attention_decode.hpp"
#include "kc/stage3/decode_args.hpp"
#include "kc/testing/negative_controls.hpp"
#include "src/register_attention_decode.hpp"

namespace kc::testing {
namespace {

constexpr const char* kName = "nc_merge_drops_last_split";
constexpr const char* kFlaw =
    "decode rung 04 whose merge leaves out the sequence's last used split (its final keys are lost)";
constexpr int kControlSplits = 8;
constexpr const char* kRopeName = "nc_rope_position_off_by_one";
constexpr const char* kRopeFlaw =
    "decode rung 06 rotating the new tokens' Q and K by the angle of the position before theirs";

constexpr const char* kPagesFirstName = "nc_new_rows_copied_before_wait";
constexpr const char* kPagesFirstFlaw =
    "decode rung 07 copying the new tokens' rows from their pages before the wait, instead of building them "
    "from k_new and v_new after it";

constexpr const char* kPageWalkName = "nc_page_walk_one_page_per_tile";
constexpr const char* kPageWalkFlaw =
    "decode rung 08 reading every row of a 64-key tile from the block of the tile's first key (a page read from "
    "the wrong block)";

constexpr const char* kWorkersFirstName = "nc_partials_in_rung08_slots";
constexpr const char* kWorkersFirstFlaw =
    "decode rung 09 storing each split's partials in the slot of its index in rung 08's grid order (the group's, "
    "modulo the splits)";

std::string control_id() { return std::string("stage3/") + stage3::kAttentionDecodeOp + "/" + kName; }
std::string rope_control_id() { return std::string("stage3/") + stage3::kAttentionDecodeRopeOp + "/" + kRopeName; }
std::string pages_first_control_id() {
  return std::string("stage3/") + stage3::kAttentionDecodeRopeOp + "/" + kPagesFirstName;
}
std::string page_walk_control_id() {
  return std::string("stage3/") + stage3::kAttentionDecodeRopeOp + "/" + kPageWalkName;
}
std::string workers_first_control_id() {
  return std::string("stage3/") + stage3::kAttentionDecodeRopeOp + "/" + kWorkersFirstName;
}

// A control's split plan (kControlSplits of the table's width) and its workspace: partials grown
// on first use, counters zeroed when allocated (each launch leaves them at zero, as the rungs').
class ControlWorkspace {
 public:
  template <typename T>
  stage3::DecodeSplitWorkspace for_plan(const stage3::DecodeArgs<T>& args, const stage3::DecodeSplitPlan& plan,
                                        cudaStream_t stream) {
    const std::size_t floats =
        stage3::decode_split_workspace_floats(args.batch, args.q_heads, args.q_len, args.head_dim, plan);
    stage3::DecodeSplitWorkspace workspace = stage3::decode_split_workspace(
        floats == 0 ? nullptr : reinterpret_cast<float*>(partials_.reserve(floats * sizeof(float))), args.batch,
        args.q_heads, args.q_len, args.head_dim, plan);
    const std::size_t counters = stage3::decode_split_arrival_counters(args.batch, args.kv_heads, plan);
    if (counters > 0) {
      arrivals_.reserve(counters, stream);
      workspace.arrivals = arrivals_.data();
    }
    return workspace;
  }

 private:
  DeviceScratch partials_;
  DeviceCounters arrivals_;
};

template <typename T>
stage3::DecodeSplitPlan control_plan(const stage3::DecodeArgs<T>& args) {
  return stage3::decode_plan_with_splits(args.group_rows(), args.max_keys(), kControlSplits);
}

class DropsLastSplit {
 public:
  template <typename T>
  void run(const Problem& problem, Operands& operands, cudaStream_t stream) {
    const stage3::DecodeArgs<T> args = stage3::decode_args<T>(problem, operands);
    const stage3::DecodeSplitPlan plan = control_plan(args);
    stage3::attention_decode_04_drops_last_split(args, plan, workspace_.for_plan(args, plan, stream), stream);
  }

 private:
  ControlWorkspace workspace_;
};

// The RoPE rungs' controls: the flawed kernel instance of rung 06, 07 or 08 (`launch`, called with
// the arguments of attention_decode_06_position_off_by_one and its siblings) on a control plan.
template <class Launch>
class FlawedRopeRung {
 public:
  explicit FlawedRopeRung(Launch launch) : launch_(launch) {}
  template <typename T>
  void run(const Problem& problem, Operands& operands, cudaStream_t stream) {
    const stage3::DecodeArgs<T> args = stage3::decode_args<T>(problem, operands);
    const stage3::DecodeSplitPlan plan = control_plan(args);
    launch_(args, stage3::decode_rope_args<T>(problem, operands), plan, workspace_.for_plan(args, plan, stream),
            stream);
  }

 private:
  Launch launch_;
  ControlWorkspace workspace_;
};

template <class Launch>
std::shared_ptr<FlawedRopeRung<Launch>> flawed_rope_rung(Launch launch) {
  return std::make_shared<FlawedRopeRung<Launch>>(launch);
}

KernelEntry control_entry(const std::string& id, const char* op, const char* flaw) {
  KernelEntry entry = negative_control_entry(id, op, flaw, {DType::bf16, DType::f16});
  entry.min_compute_capability = 80;
  entry.supports = &stage3::decode_rung_shape_error;  // the rungs' shapes: D = 64 or 128
  return entry;
}

template <class Control>
LaunchFn launch_control(std::shared_ptr<Control> control) {
  return [control](const Problem& problem, Operands& operands, cudaStream_t stream) {
    if (problem.dtype == DType::bf16)
      control->template run<__nv_bfloat16>(problem, operands, stream);
    else
      control->template run<__half>(problem, operands, stream);
  };
}

}  // namespace

std::vector<NegativeControl> decode_fused_combine_controls() {
  return {{control_id(), kFlaw},
          {rope_control_id(), kRopeFlaw},
          {pages_first_control_id(), kPagesFirstFlaw},
          {page_walk_control_id(), kPageWalkFlaw},
          {workers_first_control_id(), kWorkersFirstFlaw}};
}

void register_decode_fused_combine_controls(Registry& registry) {
  if (!registry.has_op(stage3::kAttentionDecodeOp)) registry.add_op(stage3::make_attention_decode_op());
  KernelEntry merge = control_entry(control_id(), stage3::kAttentionDecodeOp, kFlaw);
  merge.launch = launch_control(std::make_shared<DropsLastSplit>());
  registry.add_kernel(std::move(merge));

  if (!registry.has_op(stage3::kAttentionDecodeRopeOp)) registry.add_op(stage3::make_attention_decode_rope_op());
  KernelEntry rope = control_entry(rope_control_id(), stage3::kAttentionDecodeRopeOp, kRopeFlaw);
  rope.launch = launch_control(
      flawed_rope_rung([](const auto&... a) { stage3::attention_decode_06_position_off_by_one(a...); }));
  registry.add_kernel(std::move(rope));

  KernelEntry pages_first = control_entry(pages_first_control_id(), stage3::kAttentionDecodeRopeOp, kPagesFirstFlaw);
  pages_first.launch = launch_control(
      flawed_rope_rung([](const auto&... a) { stage3::attention_decode_07_new_rows_from_cache(a...); }));
  registry.add_kernel(std::move(pages_first));

  KernelEntry page_walk = control_entry(page_walk_control_id(), stage3::kAttentionDecodeRopeOp, kPageWalkFlaw);
  page_walk.launch = launch_control(
      flawed_rope_rung([](const auto&... a) { stage3::attention_decode_08_one_page_per_tile(a...); }));
  registry.add_kernel(std::move(page_walk));

  KernelEntry workers_first =
      control_entry(workers_first_control_id(), stage3::kAttentionDecodeRopeOp, kWorkersFirstFlaw);
  workers_first.launch = launch_control(
      flawed_rope_rung([](const auto&... a) { stage3::attention_decode_09_partials_in_rung08_slots(a...); }));
  registry.add_kernel(std::move(workers_first));
}

}  // namespace kc::testing
