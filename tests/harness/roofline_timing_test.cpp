// Roofline arithmetic, the above-peak harness check, and timing statistics.
#include <gtest/gtest.h>

#include "kc/common/roofline.hpp"
#include "kc/common/timing.hpp"

namespace kc {
namespace {

DeviceInfo h200_like() {
  DeviceInfo d;
  d.name = "NVIDIA H200";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.max_sm_clock_khz = 1980000;
  d.memory_clock_khz = 3201000;
  d.memory_bus_width_bits = 6144;
  d.l2_bytes = 60ll << 20;
  return d;
}

TEST(Roofline, PeaksFromTheTableMatchTheDatasheetFormula) {
  const DeviceInfo d = h200_like();
  EXPECT_NEAR(peak_tflops(d, MathUnit::fp32_cuda_core), 66.9, 0.05);   // 132 x 256 x 1.98 GHz
  EXPECT_NEAR(peak_tflops(d, MathUnit::fp16_tensor), 1070.5, 0.5);     // 132 x 4096 x 1.98 GHz
  EXPECT_NEAR(d.dram_peak_gbps(), 4917, 1);                            // 2 x 3201 MHz x 768 B
  DeviceInfo unknown = d;
  unknown.cc_major = 7;
  EXPECT_EQ(peak_tflops(unknown, MathUnit::fp32_cuda_core), 0.0);
}

TEST(Roofline, AchievedRates) {
  const Achieved a = achieved({2e12, 4e9}, 1000.0);  // 2 TFLOP and 4 GB in one second
  EXPECT_DOUBLE_EQ(a.tflops, 2.0);
  EXPECT_DOUBLE_EQ(a.gbps, 4.0);
  EXPECT_THROW(achieved({1, 1}, 0.0), Error);
}

TEST(Roofline, AbovePeakIsAHarnessError) {
  const DeviceInfo d = h200_like();
  const Work gemm{2.0 * 4096 * 4096 * 4096, 3.0 * 4 * 4096 * 4096};
  EXPECT_NO_THROW(check_plausible({60.0, 0.0}, gemm, d, MathUnit::fp32_cuda_core, "k"));
  EXPECT_THROW(check_plausible({70.0, 0.0}, gemm, d, MathUnit::fp32_cuda_core, "k"), HarnessError);
  EXPECT_NO_THROW(check_plausible({70.0, 0.0}, gemm, d, MathUnit::fp16_tensor, "k"));
  // bandwidth above the DRAM peak is impossible once the data cannot sit in the L2 ...
  const Work big{0.0, 4e9};
  EXPECT_THROW(check_plausible({0.0, 6000.0}, big, d, MathUnit::fp32_cuda_core, "k"), HarnessError);
  EXPECT_NO_THROW(check_plausible({0.0, 4500.0}, big, d, MathUnit::fp32_cuda_core, "k"));
  // ... but legitimate for a problem small enough to stay there.
  const Work small{0.0, 16e6};
  EXPECT_NO_THROW(check_plausible({0.0, 9000.0}, small, d, MathUnit::fp32_cuda_core, "k"));
}

TEST(TimingStats, MedianPercentilesAndSpread) {
  const TimingStats odd = summarize_samples({5, 1, 3});
  EXPECT_DOUBLE_EQ(odd.median_ms, 3);
  EXPECT_DOUBLE_EQ(odd.min_ms, 1);
  EXPECT_DOUBLE_EQ(odd.max_ms, 5);
  const TimingStats even = summarize_samples({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(even.median_ms, 2.5);
  std::vector<double> ramp;
  for (int i = 0; i <= 10; ++i) ramp.push_back(10 + i);  // 10..20
  const TimingStats r = summarize_samples(ramp);
  EXPECT_DOUBLE_EQ(r.p10_ms, 11);
  EXPECT_DOUBLE_EQ(r.p90_ms, 19);
  EXPECT_DOUBLE_EQ(r.spread_percent(), 100.0 * 8 / 15);
  EXPECT_EQ(r.samples_ms.size(), 11u);
  EXPECT_THROW(summarize_samples({}), Error);
}

}  // namespace
}  // namespace kc
