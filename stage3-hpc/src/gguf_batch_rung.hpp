// gguf_batch_rung.hpp — what rungs 09 and 10 of the GGUF GEMV (quant/09_gemv_gguf_batch.cu,
// quant/10_gemv_gguf_wgmma.cu) keep between launches, for their registration (src/register.cpp)
// and their negative controls (tests/gemv_gguf_gpu_test.cpp): the SM count and the CTAs an SM
// holds per instance (asked once), the FP32 partial tiles (a DeviceScratch: grown on first use,
// never shrunk) and the arrival counters of the column blocks, zeroed when allocated; a launch
// leaves every counter it used at zero. One stream at a time (two launches in flight would share
// the counters). hgemm rung 14's SmallMWeightsAsARung is the same for the bf16 GEMM.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <utility>

#include "kc/common/buffer.hpp"
#include "kc/common/device.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {

// gemv_gguf_09_batch or gemv_gguf_10_wgmma, or a flawed twin; and the rung's CTAs an SM.
using GgufBatchLaunch = void (*)(const GgufGemvArgs&, const GgufBatchPlan&, const GgufBatchWorkspace&, cudaStream_t);
using GgufBatchCtasPerSm = int (*)(GgufBlockType, int);

class GgufBatchRung {
 public:
  GgufBatchRung(GgufBatchLaunch launch, GgufBatchCtasPerSm ctas_per_sm) : launch_(launch), ctas_of_(ctas_per_sm) {}

  void run(const GgufGemvArgs& args, cudaStream_t stream) {
    if (sm_count_ == 0) sm_count_ = current_device_sm_count();
    const std::pair<int, int> instance{static_cast<int>(args.type), (args.m + 7) / 8};
    auto found = ctas_per_sm_.find(instance);
    if (found == ctas_per_sm_.end())
      found = ctas_per_sm_.emplace(instance, ctas_of_(args.type, args.m)).first;
    const GgufBatchPlan plan = plan_gguf_batch(args.m, args.n, args.k, sm_count_, found->second);
    GgufBatchWorkspace workspace;
    if (plan.needs_workspace()) {
      workspace.partials =
          reinterpret_cast<float*>(partials_.reserve(static_cast<std::size_t>(plan.partial_floats()) * sizeof(float)));
      counters_.reserve(static_cast<std::size_t>(plan.counters()), stream);
      workspace.counters = counters_.data();
    }
    launch_(args, plan, workspace, stream);
  }

 private:
  GgufBatchLaunch launch_;
  GgufBatchCtasPerSm ctas_of_;
  int sm_count_ = 0;
  std::map<std::pair<int, int>, int> ctas_per_sm_;  // (ggml type, token tiles) -> CTAs an SM
  DeviceScratch partials_;
  DeviceCounters counters_;
};

}  // namespace kc::stage3
