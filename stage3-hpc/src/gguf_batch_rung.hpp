// gguf_batch_rung.hpp — what the weight-only GEMVs' batch rungs (the GGUF GEMV's 09 and 10,
// quant/09_gemv_gguf_batch.cu and quant/10_gemv_gguf_wgmma.cu; the int4 GEMV's 03,
// quant/int4/03_batch.cu) keep between launches, for their registration (src/register.cpp) and
// their negative controls (tests/gemv_gguf_gpu_test.cpp): the SM count and the CTAs an SM holds per
// instance (asked once), the FP32 partial tiles (a DeviceScratch: grown on first use, never
// shrunk) and the arrival counters of the column blocks, zeroed when allocated; a launch leaves
// every counter it used at zero. One stream at a time (two launches in flight would share the
// counters). hgemm rung 14's SmallMWeightsAsARung is the same for the bf16 GEMM.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <utility>

#include "kc/common/buffer.hpp"
#include "kc/common/device.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"
#include "kc/stage3/gemv_int4_args.hpp"

namespace kc::stage3 {

// What names a rung's instance besides the token tiles: the GGUF block type, or the int4 group size.
template <class Args>
struct BatchInstance;
template <>
struct BatchInstance<GgufGemvArgs> {
  using Key = GgufBlockType;
  static Key of(const GgufGemvArgs& args) { return args.type; }
};
template <>
struct BatchInstance<Int4GemvArgs> {
  using Key = int;
  static Key of(const Int4GemvArgs& args) { return args.group_size; }
};

template <class Args>
class WeightBatchRung {
 public:
  using Key = typename BatchInstance<Args>::Key;
  // The rung's launch (or a flawed twin's), and the CTAs an SM its instance for (key, M) holds.
  using Launch = void (*)(const Args&, const GgufBatchPlan&, const GgufBatchWorkspace&, cudaStream_t);
  using CtasPerSm = int (*)(Key, int);

  WeightBatchRung(Launch launch, CtasPerSm ctas_per_sm) : launch_(launch), ctas_of_(ctas_per_sm) {}

  void run(const Args& args, cudaStream_t stream) {
    if (sm_count_ == 0) sm_count_ = current_device_sm_count();
    const Key key = BatchInstance<Args>::of(args);
    const std::pair<int, int> instance{static_cast<int>(key), (args.m + 7) / 8};
    auto found = ctas_per_sm_.find(instance);
    if (found == ctas_per_sm_.end()) found = ctas_per_sm_.emplace(instance, ctas_of_(key, args.m)).first;
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
  Launch launch_;
  CtasPerSm ctas_of_;
  int sm_count_ = 0;
  std::map<std::pair<int, int>, int> ctas_per_sm_;  // (key, token tiles) -> CTAs an SM
  DeviceScratch partials_;
  DeviceCounters counters_;
};

using GgufBatchRung = WeightBatchRung<GgufGemvArgs>;
using GgufBatchLaunch = GgufBatchRung::Launch;
using GgufBatchCtasPerSm = GgufBatchRung::CtasPerSm;
using Int4BatchRung = WeightBatchRung<Int4GemvArgs>;

}  // namespace kc::stage3
