// The paged decode's merge-in-the-launch control: decode rung 04's kernel
// (stage3-hpc/attention/decode_04_fused_combine.cu) whose merge leaves out the partial of the
// sequence's last used split (its final keys). Everything else is the rung: the kernel body, the
// partials, the arrival counters. It runs with 8 splits of the table's width (the rung's split
// rule would give the benchmark shapes anything from 1 to dozens), so the flaw shows wherever a
// sequence reaches past its first split and hides where one split holds the whole sequence (then
// nothing is merged: that CTA writes O itself).
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

std::string control_id() { return std::string("stage3/") + stage3::kAttentionDecodeOp + "/" + kName; }

// The control's workspace: partials grown on first use, counters zeroed when allocated (each
// launch leaves them at zero, as the rung's).
class DropsLastSplit {
 public:
  template <typename T>
  void run(const Problem& problem, Operands& operands, cudaStream_t stream) {
    const stage3::DecodeArgs<T> args = stage3::decode_args<T>(problem, operands);
    const stage3::DecodeSplitPlan plan =
        stage3::decode_plan_with_splits(args.group_rows(), args.max_keys(), kControlSplits);
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
    stage3::attention_decode_04_drops_last_split(args, plan, workspace, stream);
  }

 private:
  DeviceScratch partials_;
  DeviceCounters arrivals_;
};

}  // namespace

std::vector<NegativeControl> decode_fused_combine_controls() { return {{control_id(), kFlaw}}; }

void register_decode_fused_combine_controls(Registry& registry) {
  if (!registry.has_op(stage3::kAttentionDecodeOp)) registry.add_op(stage3::make_attention_decode_op());
  KernelEntry entry;
  entry.id = control_id();
  entry.op = stage3::kAttentionDecodeOp;
  entry.rung = 0;
  entry.idea = std::string("NEGATIVE CONTROL: ") + kFlaw;
  entry.dtypes = {DType::bf16, DType::f16};
  entry.report = "negative-controls";
  entry.min_compute_capability = 80;
  entry.supports = &stage3::decode_rung_shape_error;  // the rung's shapes: D = 64 or 128
  auto control = std::make_shared<DropsLastSplit>();
  entry.launch = [control](const Problem& problem, Operands& operands, cudaStream_t stream) {
    if (problem.dtype == DType::bf16)
      control->run<__nv_bfloat16>(problem, operands, stream);
    else
      control->run<__half>(problem, operands, stream);
  };
  registry.add_kernel(std::move(entry));
}

}  // namespace kc::testing
