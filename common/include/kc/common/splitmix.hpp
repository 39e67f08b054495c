// kc/common/splitmix.hpp — splitmix64 (Steele, Lea and Flood 2014), one definition for the host
// and the device: counter-based random numbers that come out the same with every standard library
// (the operand fills, the attention decode op's layouts, the grouped GEMM's routings, the
// engine's random quantized weights).
#pragma once

#include <cstdint>

#include "kc/common/host_device.hpp"

namespace kc {

inline constexpr std::uint64_t kSplitmixIncrement = 0x9E3779B97F4A7C15ull;

// splitmix64's output for the state x: x plus the increment, then its 64-bit finalizer. A hash of
// x as well: splitmix64(seed ^ index) draws the index-th number of a counter-based stream.
KC_HOST_DEVICE inline std::uint64_t splitmix64(std::uint64_t x) {
  x += kSplitmixIncrement;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The generator's next number from `state`, which advances by the increment.
KC_HOST_DEVICE inline std::uint64_t splitmix64_next(std::uint64_t& state) {
  const std::uint64_t out = splitmix64(state);
  state += kSplitmixIncrement;
  return out;
}

}  // namespace kc
