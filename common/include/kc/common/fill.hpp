// kc/common/fill.hpp — inputs, poison and read-back.
//
// Inputs are filled on the device from a counter-based hash of (seed, element index): the same
// seed gives the same values whatever the launch configuration, and a new seed gives new values.
// Never zeros: zeros hide unwritten outputs and wrong indexing.
//
// Outputs are poisoned before every checked run (NaN for floating types, a sentinel for
// integers) so that an element the kernel forgot to write fails the comparison.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/dtype.hpp"

namespace kc {

enum class Distribution { uniform, normal };

struct FillSpec {
  Distribution distribution = Distribution::uniform;
  double a = -1.0;  // uniform: low end;  normal: mean
  double b = 1.0;   // uniform: high end; normal: standard deviation
  static FillSpec uniform(double low, double high) { return {Distribution::uniform, low, high}; }
  static FillSpec normal(double mean, double stddev) { return {Distribution::normal, mean, stddev}; }
};

// Fills `count` elements of type `dtype` at `data` (device memory). Integer types draw uniform
// integers in [a, b] (clamped to the type's range); i4 packs two values per byte.
void fill_random(void* data, DType dtype, std::size_t count, std::uint64_t seed,
                 FillSpec spec = {}, cudaStream_t stream = nullptr);

template <typename T>
void fill_random(DeviceBuffer<T>& buffer, std::uint64_t seed, FillSpec spec = {},
                 cudaStream_t stream = nullptr) {
  fill_random(buffer.data(), dtype_of_v<T>, buffer.size(), seed, spec, stream);
}

// The bit pattern poison() writes: a quiet NaN for floating types; INT32_MIN, -128 and -8 for
// i32, i8 and i4 (values the symmetric input ranges kc uses never produce).
void poison(void* data, DType dtype, std::size_t count, cudaStream_t stream = nullptr);

// Converts `count` elements of `dtype` in device memory to doubles in device memory.
void convert_to_double(const void* source, DType dtype, std::size_t count, double* destination,
                       cudaStream_t stream = nullptr);

// Copies `count` elements of `dtype` from the device and returns them as doubles on the host,
// decoded on the host's cores.
std::vector<double> to_host_double(const void* device_data, DType dtype, std::size_t count,
                                   cudaStream_t stream = nullptr);

// Host-side decoding of one stored element (exposed for tests).
double decode_element(const std::byte* data, DType dtype, std::size_t index);

}  // namespace kc
