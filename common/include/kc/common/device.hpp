// kc/common/device.hpp — facts about the GPU the numbers were measured on.
#pragma once

#include <string>

namespace kc {

// True when the CUDA runtime sees at least one usable GPU. Never throws: on a machine with no
// driver or no device it returns false, and `no_gpu_reason()` says why.
bool has_gpu();
std::string no_gpu_reason();

// For a program that needs a GPU: true when one is visible; otherwise prints
// "<program>: no CUDA GPU is visible (<reason>)<consequence>" to stderr and returns false (the
// tuners then exit with status 2; a program a ctest test runs with exit_status_without_gpu()). `consequence` starts with its own punctuation, e.g.
// "; the tuner times kernels on a GPU.".
bool gpu_visible_or_explain(const std::string& program, const std::string& consequence);

// KC_REQUIRE_GPU set and not "0" (scripts/gpu-check.sh sets it): a machine that should have a GPU
// but shows none — a broken driver, a container without the device — fails instead of skipping.
bool gpu_required();

// The exit status of a program that a ctest test runs and that found no GPU: 77 (the test's
// SKIP_RETURN_CODE: skipped), or 1 (failed) when gpu_required().
int exit_status_without_gpu();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;               // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0; // compute capability
  int sm_count = 0;
  long long l2_bytes = 0;
  long long global_memory_bytes = 0;
  long long smem_per_block_optin = 0;   // largest dynamic shared memory a block may request
  long long smem_per_sm = 0;
  int max_sm_clock_khz = 0;             // peak SM clock the device reports
  int memory_clock_khz = 0;
  int memory_bus_width_bits = 0;
  int driver_version = 0;               // e.g. 13000 for CUDA 13.0 support
  int runtime_version = 0;
  int cublas_version = 0;               // e.g. 130100
  std::string driver_release;           // e.g. "580.159.04" (nvidia-smi), empty if unknown

  int compute_capability() const { return cc_major * 10 + cc_minor; }  // 90 for Hopper
  // Theoretical DRAM bandwidth: memory clock x 2 (double data rate) x bus width.
  double dram_peak_gbps() const;
  // "h200", "a100-sxm4-80gb": the folder name under docs/benchmarks/.
  std::string slug() const;
  // "NVIDIA H200 (sm_90, 132 SMs, 60 MiB L2), driver 580.159.04, CUDA runtime 13.0, cuBLAS 13.1.0"
  std::string summary() const;
};

// Queries the device; throws kc::CudaError when there is none.
DeviceInfo query_device(int ordinal = 0);

// The streaming multiprocessors of the current device (cudaGetDevice): what split and grid rules
// size themselves by.
int current_device_sm_count();

// "13.0" from 13000.
std::string cuda_version_string(int version);

}  // namespace kc
