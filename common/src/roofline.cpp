#include "kc/common/roofline.hpp"

namespace kc {

std::string_view math_unit_name(MathUnit unit) {
  switch (unit) {
    case MathUnit::fp32_cuda_core: return "FP32 CUDA cores";
    case MathUnit::fp64: return "FP64";
    case MathUnit::tf32_tensor: return "TF32 tensor cores";
    case MathUnit::fp16_tensor: return "FP16/BF16 tensor cores";
    case MathUnit::fp8_tensor: return "FP8 tensor cores";
    case MathUnit::int8_tensor: return "INT8 tensor cores";
  }
  return "unknown";
}

namespace {
// Dense FLOP per clock per SM (an FMA counts 2). Sources: NVIDIA A100 and H100 architecture
// whitepapers (A100: 64 FP32 FMA, 1024 FP16 FMA; H100 SXM: 128 FP32 FMA, 2048 FP16 FMA).
double flops_per_clock_per_sm(int cc, MathUnit unit) {
  switch (cc) {
    case 80:
      switch (unit) {
        case MathUnit::fp32_cuda_core: return 128;
        case MathUnit::fp64: return 128;  // FP64 tensor-core DMMA
        case MathUnit::tf32_tensor: return 1024;
        case MathUnit::fp16_tensor: return 2048;
        case MathUnit::fp8_tensor: return 0;  // no FP8 on Ampere
        case MathUnit::int8_tensor: return 4096;
      }
      break;
    case 86:
    case 87:
    case 89:
      switch (unit) {
        case MathUnit::fp32_cuda_core: return 256;
        case MathUnit::fp64: return 4;
        case MathUnit::tf32_tensor: return 512;
        case MathUnit::fp16_tensor: return 1024;
        case MathUnit::fp8_tensor: return cc == 89 ? 2048 : 0;
        case MathUnit::int8_tensor: return 2048;
      }
      break;
    case 90:
      switch (unit) {
        case MathUnit::fp32_cuda_core: return 256;
        case MathUnit::fp64: return 256;  // FP64 tensor-core DMMA
        case MathUnit::tf32_tensor: return 2048;
        case MathUnit::fp16_tensor: return 4096;
        case MathUnit::fp8_tensor: return 8192;
        case MathUnit::int8_tensor: return 8192;
      }
      break;
    default: break;
  }
  return 0;
}
}  // namespace

double peak_tflops(const DeviceInfo& device, MathUnit unit) {
  return device.sm_count * flops_per_clock_per_sm(device.compute_capability(), unit) *
         device.max_sm_clock_khz * 1e3 / 1e12;
}

Achieved achieved(const Work& work, double milliseconds) {
  require(milliseconds > 0.0, "achieved(): a time of {} ms is not a measurement", milliseconds);
  const double seconds = milliseconds * 1e-3;
  return {work.flops / seconds / 1e12, work.bytes / seconds / 1e9};
}

void check_plausible(const Achieved& result, const Work& work, const DeviceInfo& device,
                     MathUnit unit, std::string_view what) {
  constexpr double kSlack = 1.02;  // clock readings and event resolution, nothing more
  const double compute_peak = peak_tflops(device, unit);
  if (compute_peak > 0.0 && work.flops > 0.0 && result.tflops > compute_peak * kSlack)
    throw HarnessError(fmt::format(
        "{}: {:.1f} TFLOPS exceeds the {:.1f} TFLOPS peak of {} on {}: the measurement is wrong "
        "(unwritten output, miscounted FLOPs or a timing bug), not the kernel fast",
        what, result.tflops, compute_peak, math_unit_name(unit), device.name));
  const double dram_peak = device.dram_peak_gbps();
  const bool beyond_l2 = work.bytes > 2.0 * static_cast<double>(device.l2_bytes);
  if (dram_peak > 0.0 && beyond_l2 && result.gbps > dram_peak * kSlack)
    throw HarnessError(fmt::format(
        "{}: {:.0f} GB/s exceeds the {:.0f} GB/s DRAM peak of {}: the byte count or the timing "
        "is wrong",
        what, result.gbps, dram_peak, device.name));
}

}  // namespace kc
