// kc/stage3/split_last_wave_workspace.hpp — the workspace of the rungs that split their last wave along K
// (grouped GEMM rungs 06-07, FP8 GEMM rung 12), as their registrations keep it between launches:
// sized for this GPU's SMs (enough for any problem: the pieces never outnumber the grid) on the
// first launch, an untimed warm-up in kc-bench; the counters zeroed then, and by every launch.
#pragma once

#include <cuda_runtime.h>

#include "kc/common/buffer.hpp"
#include "kc/common/device.hpp"
#include "kc/stage3/grouped_gemm_args.hpp"

namespace kc::stage3 {

class SplitLastWaveWorkspace {
 public:
  GroupedSplitWorkspace reserve(cudaStream_t stream) {
    if (sm_count_ == 0) sm_count_ = current_device_sm_count();
    GroupedSplitWorkspace workspace;
    workspace.slot_vectors = grouped_split_workspace_vectors(sm_count_);
    workspace.counter_count = grouped_split_workspace_counters(sm_count_);
    workspace.slots = reinterpret_cast<float4*>(slots_.reserve(workspace.slot_vectors * sizeof(float4)));
    counters_.reserve(workspace.counter_count, stream);
    workspace.counters = counters_.data();
    return workspace;
  }

 private:
  DeviceScratch slots_;
  DeviceCounters counters_;
  int sm_count_ = 0;
};

}  // namespace kc::stage3
