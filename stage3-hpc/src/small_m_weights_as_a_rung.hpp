// small_m_weights_as_a_rung.hpp — what rungs 14-16 (gemm/14_small_m_weights_as_a.cu,
// gemm/15_small_m_tma_wgmma.cu, gemm/16_small_m_cluster_split.cu: one plan type, the workspace of
// 14 and 15) keep between launches, for their
// registration (src/register.cpp) and rung 14's negative control
// (tests/negative_controls/small_m_gemm_controls.cpp), which runs a flawed instance of the same
// kernel on the same workspace arithmetic.
//
// The SM count its split rule reads (asked once), the FP32 partial tiles (a DeviceScratch: grown
// on first use, never shrunk) and the arrival counters of the column blocks, zeroed when they are
// allocated: a launch leaves every counter it used at zero again (its last CTA per column block
// resets it), so they are never cleared between launches. One stream at a time: two launches in
// flight together would share the counters.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

#include "gemm/hgemm.hpp"
#include "kc/common/buffer.hpp"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/common/gemm.hpp"

namespace kc::stage3 {

// hgemm_14_small_m_weights_as_a, its flawed twin, or rung 15 with its cache of tensor maps bound.
using SmallMWeightsAsALaunch = std::function<void(const HgemmArgs&, const SmallMWeightsAsAPlan&,
                                                  const SmallMWeightsAsAWorkspace&, cudaStream_t)>;

// How the rung splits a shape over `sm_count` SMs: plan_small_m_weights_as_a (rung 14) or
// plan_small_m_tma_wgmma (rung 15).
using SmallMWeightsAsAPlanner = SmallMWeightsAsAPlan (*)(int m, int n, int k, int sm_count);

class SmallMWeightsAsARung {
 public:
  // `uses_workspace`: false for rung 16, which adds its splits in distributed shared memory.
  explicit SmallMWeightsAsARung(SmallMWeightsAsALaunch launch,
                                SmallMWeightsAsAPlanner planner = &plan_small_m_weights_as_a, bool uses_workspace = true)
      : launch_(std::move(launch)), planner_(planner), uses_workspace_(uses_workspace) {}

  void run(const Problem& problem, Operands& operands, cudaStream_t stream) {
    if (sm_count_ == 0) sm_count_ = current_device_sm_count();
    const HgemmArgs args = gemm_args<bf16>(problem, operands, BLayout::n_by_k);
    const SmallMWeightsAsAPlan plan = planner_(args.m, args.n, args.k, sm_count_);
    SmallMWeightsAsAWorkspace workspace;
    if (uses_workspace_ && plan.needs_workspace()) {
      const auto floats = static_cast<std::size_t>(small_m_weights_as_a_partial_floats(plan));
      workspace.partials = reinterpret_cast<float*>(partials_.reserve(floats * sizeof(float)));
      counters_.reserve(static_cast<std::size_t>(small_m_weights_as_a_counters(plan)), stream);
      workspace.counters = counters_.data();
    }
    launch_(args, plan, workspace, stream);
  }

 private:
  SmallMWeightsAsALaunch launch_;
  SmallMWeightsAsAPlanner planner_;
  bool uses_workspace_;
  int sm_count_ = 0;
  DeviceScratch partials_;
  DeviceCounters counters_;
};

}  // namespace kc::stage3
