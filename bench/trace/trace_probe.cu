// kc-trace-probe: three kernels of known length in a CUDA graph, replayed — a timeline whose answer
// is known, for learning to read kc-trace's output and for its GPU test
// (tests/tools/test_trace_gpu.py).
//
// The kernels are one warp each that spins on the GPU's global nanosecond timer:
//   node 0  spins 20 us, and at its start lets a programmatic dependent start;
//   node 1  launched as a programmatic dependent of node 0 (kc/core/dependent_launch.hpp) on a GPU
//           of compute capability 9.0 or newer: it starts while node 0 runs, waits for it
//           (griddepcontrol.wait), then spins 5 us. Its recorded duration includes the wait, so
//           it starts about 20 us before node 0's end and ends about 5 us after it;
//   node 2  an ordinary launch: spins 10 us after node 1 has ended.
// Elsewhere node 1 launches the ordinary way and starts after node 0's end.
//
//   KC_TRACE_OUT=probe.csv CUDA_INJECTION64_PATH=build/bench/libkc_trace.so build/bench/kc-trace-probe 20
//   python3 scripts/trace_summary.py probe.csv
//
// Prints "programmatic: yes|no" and "replays: N". Exits 77 without a GPU (1 with KC_REQUIRE_GPU=1).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/core/dependent_launch.cuh"

namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ void spin(unsigned long long ns) {
  const unsigned long long start = global_ns();
  while (global_ns() - start < ns) {
  }
}

__global__ void spin_then_let_dependents_start(unsigned long long ns) {
  kc::core::let_dependent_grids_start();
  spin(ns);
}

__global__ void wait_then_spin(unsigned long long ns) {
  kc::core::wait_for_previous_grids();
  spin(ns);
}

__global__ void spin_kernel(unsigned long long ns) { spin(ns); }

}  // namespace

int main(int argc, char** argv) {
  const int replays = argc > 1 ? std::atoi(argv[1]) : 20;
  if (replays < 1) {
    std::fprintf(stderr, "kc-trace-probe: replays must be >= 1 (got '%s')\n", argv[1]);
    return 2;
  }
  if (!kc::gpu_visible_or_explain("kc-trace-probe", "; it replays its graph on a GPU."))
    return kc::exit_status_without_gpu();
  try {
    cudaStream_t stream;
    KC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    bool programmatic = false;
    KC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    spin_then_let_dependents_start<<<1, 32, 0, stream>>>(20'000);
    {
      kc::core::ProgrammaticLaunchScope scope;
      programmatic = kc::core::launch_dependent(wait_then_spin, dim3(1), dim3(32), 0, stream, 5'000ull);
    }
    spin_kernel<<<1, 32, 0, stream>>>(10'000);
    KC_CUDA_CHECK(cudaGetLastError());
    KC_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    KC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < replays; ++i) {
      KC_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      KC_CUDA_CHECK(cudaStreamSynchronize(stream));  // one replay at a time: the gaps are the host's
    }
    KC_CUDA_CHECK(cudaGraphExecDestroy(exec));
    KC_CUDA_CHECK(cudaGraphDestroy(graph));
    KC_CUDA_CHECK(cudaStreamDestroy(stream));
    std::printf("programmatic: %s\nreplays: %d\n", programmatic ? "yes" : "no", replays);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kc-trace-probe: %s\n", error.what());
    return 1;
  }
  return 0;
}
