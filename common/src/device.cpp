#include "kc/common/device.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <regex>

#include <fmt/format.h>

#include "kc/common/error.hpp"

namespace kc {
namespace {

std::string read_driver_release() {
  // The kernel driver's own release string; /proc is cheaper and steadier than spawning nvidia-smi.
  // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..."
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen("/proc/driver/nvidia/version", "r"),
                                             &std::fclose);
  if (!file) return {};
  char line[512] = {};
  if (std::fgets(line, sizeof line, file.get()) == nullptr) return {};
  static const std::regex release("\\b([0-9]+\\.[0-9]+(\\.[0-9]+)?)\\b");
  std::cmatch match;
  return std::regex_search(line, match, release) ? match[1].str() : std::string();
}

int attribute(cudaDeviceAttr attr, int ordinal) {
  int value = 0;
  KC_CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, ordinal));
  return value;
}

}  // namespace

bool has_gpu() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  return status == cudaSuccess && count > 0;
}

std::string no_gpu_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  if (status != cudaSuccess)
    return fmt::format("cudaGetDeviceCount failed: {} ({})", cudaGetErrorName(status),
                       cudaGetErrorString(status));
  if (count == 0) return "the CUDA runtime reports zero devices";
  return {};
}

bool gpu_visible_or_explain(const std::string& program, const std::string& consequence) {
  if (has_gpu()) return true;
  fmt::print(stderr, "{}: no CUDA GPU is visible ({}){}\n", program, no_gpu_reason(), consequence);
  return false;
}

bool gpu_required() {
  const char* value = std::getenv("KC_REQUIRE_GPU");
  return value != nullptr && value[0] != '\0' && std::strcmp(value, "0") != 0;
}

int exit_status_without_gpu() { return gpu_required() ? 1 : 77; }

double DeviceInfo::dram_peak_gbps() const {
  return 2.0 * memory_clock_khz * 1e3 * (memory_bus_width_bits / 8.0) / 1e9;
}

std::string DeviceInfo::slug() const {
  std::string lowered;
  std::string source = name;
  if (source.rfind("NVIDIA ", 0) == 0) source = source.substr(7);
  for (char c : source) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      lowered += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!lowered.empty() && lowered.back() != '-')
      lowered += '-';
  }
  while (!lowered.empty() && lowered.back() == '-') lowered.pop_back();
  return lowered.empty() ? "unknown-gpu" : lowered;
}

std::string DeviceInfo::summary() const {
  return fmt::format(
      "{} (sm_{}{}, {} SMs, {} MiB L2, {:.0f} GiB), driver {}{}, CUDA runtime {}, cuBLAS {}.{}.{}",
      name, cc_major, cc_minor, sm_count, l2_bytes >> 20, global_memory_bytes / 1073741824.0,
      driver_release.empty() ? "" : driver_release + " / CUDA ", cuda_version_string(driver_version),
      cuda_version_string(runtime_version), cublas_version / 10000, (cublas_version / 100) % 100,
      cublas_version % 100);
}

int current_device_sm_count() {
  int device = 0, sm_count = 0;
  KC_CUDA_CHECK(cudaGetDevice(&device));
  KC_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  return sm_count;
}

DeviceInfo query_device(int ordinal) {
  cudaDeviceProp prop{};
  KC_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.l2_bytes = prop.l2CacheSize;
  info.global_memory_bytes = static_cast<long long>(prop.totalGlobalMem);
  info.smem_per_block_optin = static_cast<long long>(prop.sharedMemPerBlockOptin);
  info.smem_per_sm = static_cast<long long>(prop.sharedMemPerMultiprocessor);
  info.max_sm_clock_khz = attribute(cudaDevAttrClockRate, ordinal);
  info.memory_clock_khz = attribute(cudaDevAttrMemoryClockRate, ordinal);
  info.memory_bus_width_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, ordinal);
  KC_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  KC_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  {
    int version = 0;
    KC_CUBLAS_CHECK(cublasGetProperty(MAJOR_VERSION, &version));
    info.cublas_version = version * 10000;
    KC_CUBLAS_CHECK(cublasGetProperty(MINOR_VERSION, &version));
    info.cublas_version += version * 100;
    KC_CUBLAS_CHECK(cublasGetProperty(PATCH_LEVEL, &version));
    info.cublas_version += version;
  }
  info.driver_release = read_driver_release();
  return info;
}

std::string cuda_version_string(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

}  // namespace kc
