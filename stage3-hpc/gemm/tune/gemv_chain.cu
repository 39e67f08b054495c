// kc-gemv-chain — rung 12 in a chain of dependent launches, as a decode step at batch 1 runs it,
// with ordinary launches and as programmatic dependents (kc/core/dependent_launch.hpp), with and
// without the L2 prefetch before the wait.
//
// One "layer" is the four projections of a Llama decode step at M = 1, each reading the output of
// the one before: qkv = rmsnorm(x).[Wq | Wk | Wv]^T; x += q.Wo^T (beta = 1; q stands in for the
// attention output, same width); gate_up = rmsnorm(x).[Wg | Wu]^T; x += swiglu(gate_up).Wd^T.
// `--layers` of them, each with its own weights (so the chain streams every weight once, as a
// decode step does), are timed together: eager launches and the same chain captured as a CUDA
// graph, each sample after an L2 scrub, median of the samples (kc::time_launches). Printed: time a
// layer, the weights' GB/s and their % of the copy bandwidth measured in the same run — the gap
// between a layer's time and its bytes at the copy rate is what the launches cost. The last two
// rows but one force rung 12's two K-loop instances at M = 1 (set_small_m_gemv_trip, kc/stage3/small_m_gemv_knobs.hpp)
// with the default 4 MiB prefetch: two pieces of each row a trip, or one; the rows above let the
// rung choose by the grid. Every row but the last loads each thread's first trip of the weights
// after the wait; the last (the default since it measured faster in the engine) before it as well
// (set_small_m_gemv_first_trip_before_wait).
//
//   kc-gemv-chain                                  (Llama-3.1-8B widths, 8 layers)
//   kc-gemv-chain --hidden 2048 --q 2048 --kv 512 --intermediate 8192 --layers 16   (Llama-3.2-1B)
// Needs an sm_80+ GPU; programmatic launches need sm_90 (elsewhere those rows equal the ordinary).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "hgemm.hpp"
#include "kc/common/buffer.hpp"
#include "kc/common/context.hpp"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/timing.hpp"
#include "kc/core/dependent_launch.hpp"

namespace kc::stage3 {
namespace {

struct Widths {
  int hidden = 4096, q = 4096, kv = 1024, intermediate = 14336, layers = 8;
};

struct Layer {
  DeviceBuffer<bf16> qkv, o, gate_up, down, attn_norm, ffn_norm;
};

std::size_t layer_weight_bytes(const Widths& w) {
  const std::size_t h = w.hidden;
  return ((w.q + 2 * static_cast<std::size_t>(w.kv)) * h + h * w.q + 2 * h * w.intermediate +
          h * w.intermediate + 2 * h) *
         sizeof(bf16);
}

int run(int argc, char** argv) {
  Widths w;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--hidden") w.hidden = value;
    else if (flag == "--q") w.q = value;
    else if (flag == "--kv") w.kv = value;
    else if (flag == "--intermediate") w.intermediate = value;
    else if (flag == "--layers") w.layers = value;
    else require(false, "kc-gemv-chain: unknown flag {} (--hidden, --q, --kv, --intermediate, --layers)", flag);
  }
  require(w.hidden > 0 && w.q > 0 && w.kv > 0 && w.intermediate > 0 && w.layers > 0 && w.hidden % 8 == 0 &&
              w.q % 8 == 0 && w.intermediate % 8 == 0,
          "kc-gemv-chain: widths must be positive multiples of 8 and --layers positive");
  if (!gpu_visible_or_explain("kc-gemv-chain", "; it times kernels on a GPU.")) return 2;
  const DeviceInfo device = query_device();
  const Stream owned_stream;
  const cudaStream_t stream = owned_stream.get();
  const double copy_gbps = measure_copy_bandwidth_gbps(std::size_t{1} << 30, stream);

  std::vector<Layer> layers(static_cast<std::size_t>(w.layers));
  const std::size_t h = w.hidden;
  std::uint64_t seed = 1;
  for (Layer& l : layers) {
    l.qkv = DeviceBuffer<bf16>((w.q + 2 * static_cast<std::size_t>(w.kv)) * h);
    l.o = DeviceBuffer<bf16>(h * w.q);
    l.gate_up = DeviceBuffer<bf16>(2 * h * w.intermediate);
    l.down = DeviceBuffer<bf16>(h * w.intermediate);
    l.attn_norm = DeviceBuffer<bf16>(h);
    l.ffn_norm = DeviceBuffer<bf16>(h);
    for (DeviceBuffer<bf16>* b : {&l.qkv, &l.o, &l.gate_up, &l.down, &l.attn_norm, &l.ffn_norm})
      fill_random(*b, seed++, FillSpec::uniform(-0.02, 0.02), stream);
  }
  DeviceBuffer<bf16> x(h), qkv(w.q + 2 * static_cast<std::size_t>(w.kv)),
      gate_up(2 * static_cast<std::size_t>(w.intermediate));
  fill_random(x, 99, {}, stream);

  const auto chain = [&](cudaStream_t s) {
    for (const Layer& l : layers) {
      const SmallMGemvWeight qkv_weight{l.qkv.data(), qkv.data(), w.q + 2 * w.kv};
      hgemm_12_small_m_gemv_shared_a(1, w.hidden, 1.f, x.data(), &qkv_weight, 1, 0.f, s, l.attn_norm.data(), 1e-5f);
      const SmallMGemvWeight o_weight{l.o.data(), x.data(), w.hidden};
      hgemm_12_small_m_gemv_shared_a(1, w.q, 1.f, qkv.data(), &o_weight, 1, 1.f, s);
      const SmallMGemvWeight gate_up_weight{l.gate_up.data(), gate_up.data(), 2 * w.intermediate};
      hgemm_12_small_m_gemv_shared_a(1, w.hidden, 1.f, x.data(), &gate_up_weight, 1, 0.f, s, l.ffn_norm.data(), 1e-5f);
      const SmallMGemvWeight down_weight{l.down.data(), x.data(), w.hidden};
      hgemm_12_small_m_gemv_shared_a(1, w.intermediate, 1.f, gate_up.data(), &down_weight, 1, 1.f, s, nullptr, 0.f,
                                     true);
    }
  };

  const double bytes = static_cast<double>(layer_weight_bytes(w)) * w.layers;
  std::printf("%s\ncopy bandwidth %.0f GB/s; %d layers of hidden %d, q %d, kv %d, intermediate %d: %.1f MB of "
              "weights a layer, %.1f us a layer at the copy rate\n",
              device.summary().c_str(), copy_gbps, w.layers, w.hidden, w.q, w.kv, w.intermediate,
              bytes / w.layers / 1e6, bytes / w.layers / copy_gbps / 1e3);
  std::printf("%-44s %-7s %12s %10s %10s\n", "launches", "mode", "us a layer", "GB/s", "% of copy");

  L2Scrubber scrubber(static_cast<std::size_t>(device.l2_bytes));
  TimingConfig config;
  config.min_samples = 10;
  config.max_samples = 50;
  struct Variant {
    const char* name;
    bool dependent;
    std::size_t budget;
    SmallMGemvTrip trip;
    bool first_trip_before_wait = false;
  };
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const Variant variants[] = {
      {"ordinary", false, 0, SmallMGemvTrip::automatic},
      {"programmatic dependents, no prefetch", true, 0, SmallMGemvTrip::automatic},
      {"programmatic dependents, 4 MiB prefetch", true, 4 * kMiB, SmallMGemvTrip::automatic},
      {"programmatic dependents, 12 MiB prefetch", true, 12 * kMiB, SmallMGemvTrip::automatic},
      {"programmatic dependents, 32 MiB prefetch", true, 32 * kMiB, SmallMGemvTrip::automatic},
      {"programmatic, 4 MiB, two pieces a trip", true, 4 * kMiB, SmallMGemvTrip::two_pieces},
      {"programmatic, 4 MiB, one piece a trip", true, 4 * kMiB, SmallMGemvTrip::one_piece},
      {"programmatic, 4 MiB, first trip before wait", true, 4 * kMiB, SmallMGemvTrip::automatic, true}};
  const SmallMGemvKnobsRestorer restore_knobs;  // the variants set them; the process's afterwards
  for (const Variant& v : variants) {
    set_small_m_gemv_prefetch_budget(v.budget);
    set_small_m_gemv_trip(v.trip);
    set_small_m_gemv_first_trip_before_wait(v.first_trip_before_wait);
    const core::ProgrammaticLaunchScope scope{v.dependent};
    const TimingStats eager = time_launches(chain, stream, &scrubber, config, "gemv chain");
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    KC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    chain(stream);
    KC_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    KC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const TimingStats replayed = time_launches([&](cudaStream_t s) { KC_CUDA_CHECK(cudaGraphLaunch(exec, s)); },
                                               stream, &scrubber, config, "gemv chain graph");
    KC_CUDA_CHECK(cudaGraphExecDestroy(exec));
    KC_CUDA_CHECK(cudaGraphDestroy(graph));
    for (const auto& [mode, stats] : {std::pair<const char*, const TimingStats*>{"eager", &eager},
                                      std::pair<const char*, const TimingStats*>{"graph", &replayed}}) {
      const double gbps = bytes / (stats->median_ms * 1e-3) / 1e9;
      std::printf("%-44s %-7s %12.2f %10.0f %9.1f%%\n", v.name, mode, stats->median_ms * 1e3 / w.layers, gbps,
                  100.0 * gbps / copy_gbps);
    }
  }
  return 0;
}

}  // namespace
}  // namespace kc::stage3

int main(int argc, char** argv) {
  try {
    return kc::stage3::run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kc-gemv-chain: %s\n", error.what());
    return 2;
  }
}
