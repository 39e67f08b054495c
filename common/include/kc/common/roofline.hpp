// kc/common/roofline.hpp — how fast could this possibly go?
//
// Count first: the FLOPs a problem needs and the fewest bytes it must move through DRAM (each
// input read once, each output written once). Divide by the measured time for achieved TFLOPS and
// GB/s, and compare with the ceiling of the unit doing the work. A result faster than the
// hardware's peak is not a triumph but a harness error (an unwritten output, an L2-resident input,
// a miscounted FLOP), and is rejected.
#pragma once

#include <string>
#include <string_view>

#include "kc/common/device.hpp"
#include "kc/common/error.hpp"

namespace kc {

// Thrown when a measurement cannot be true; the harness, not the kernel, is suspect.
class HarnessError : public Error {
 public:
  using Error::Error;
};

// The unit a kernel's arithmetic runs on.
enum class MathUnit {
  fp32_cuda_core,  // FFMA
  fp64,
  tf32_tensor,
  fp16_tensor,     // also bf16
  fp8_tensor,
  int8_tensor,
};
std::string_view math_unit_name(MathUnit unit);

enum class Bound { compute, memory };

struct Work {
  double flops = 0.0;  // floating-point (or integer MAC x2) operations
  double bytes = 0.0;  // minimum DRAM traffic: inputs read once + outputs written once
  double intensity() const { return bytes > 0.0 ? flops / bytes : 0.0; }
};

// Peak dense throughput of `unit` in TFLOPS: SMs x FLOP/clock/SM (per-architecture table) x the
// peak SM clock. For an architecture not in the table, returns 0 (no ceiling known).
double peak_tflops(const DeviceInfo& device, MathUnit unit);

struct Achieved {
  double tflops = 0.0;
  double gbps = 0.0;
};
Achieved achieved(const Work& work, double milliseconds);

// Throws HarnessError when `result` beats the device's theoretical peak: compute above
// peak_tflops(unit) x 1.02, or bandwidth above the DRAM peak x 1.02 when the problem's bytes are
// too large to have stayed in the L2 (more than twice its size).
void check_plausible(const Achieved& result, const Work& work, const DeviceInfo& device,
                     MathUnit unit, std::string_view what);

}  // namespace kc
