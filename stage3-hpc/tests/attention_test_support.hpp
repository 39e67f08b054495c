// Helpers the attention tests share: downloads, a NaN planted in an input, the registered op, the
// problems a correct attention computed with the wrong parameters would have solved (the negative
// controls' inputs), and the comparison of a host reference with a device one.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/registry.hpp"
#include "kc/common/splitmix.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3::testing_support {

// A tensor of the operands, or a reference (FP64 on the device), as host doubles.
inline std::vector<double> download(const Tensor& tensor, cudaStream_t stream) {
  return to_host_double(tensor.raw(), tensor.dtype, tensor.count(), stream);
}
inline std::vector<double> download(const DeviceBuffer<double>& buffer, cudaStream_t stream) {
  return to_host_double(buffer.data(), DType::f64, buffer.size(), stream);
}

// Writes a NaN into element `index` of a 16-bit (bf16 or f16) tensor of the operands, on `stream`:
// after the fill make_operands queued there (a plain cudaMemcpy on the legacy stream could land
// before that fill and be overwritten by it).
inline void plant_nan(Tensor& tensor, std::size_t index, cudaStream_t stream) {
  const std::uint16_t nan_bits = tensor.dtype == DType::bf16 ? 0x7fc0 : 0x7e00;
  KC_CUDA_CHECK(cudaMemcpyAsync(static_cast<std::uint16_t*>(tensor.raw()) + index, &nan_bits, sizeof(nan_bits),
                                cudaMemcpyHostToDevice, stream));
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// The bits of `value` rounded to a 16-bit tensor's type (bf16, else f16).
inline std::uint16_t sixteen_bit_pattern(DType dtype, float value) {
  std::uint16_t bits = 0;
  if (dtype == DType::bf16) {
    const __nv_bfloat16 element = __float2bfloat16(value);
    std::memcpy(&bits, &element, sizeof bits);
  } else {
    const __half element = __float2half(value);
    std::memcpy(&bits, &element, sizeof bits);
  }
  return bits;
}

// Writes `value` (a NaN or an infinity, or any float) into element `index` of a bf16 or f16 tensor,
// rounded to the tensor's type.
inline void plant_value(Tensor& tensor, std::size_t index, float value, cudaStream_t stream) {
  const std::uint16_t bits = sixteen_bit_pattern(tensor.dtype, value);
  KC_CUDA_CHECK(cudaMemcpyAsync(static_cast<std::uint16_t*>(tensor.raw()) + index, &bits, sizeof(bits),
                                cudaMemcpyHostToDevice, stream));
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// Overwrites a bf16 or f16 tensor of the operands with `values` (one per element, rounded to the
// tensor's type), on `stream` after what is queued there.
inline void upload_values(Tensor& tensor, const std::vector<double>& values, cudaStream_t stream) {
  kc::require(values.size() == tensor.count(), "upload_values: {} values for a tensor of {} elements", values.size(),
              tensor.count());
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    bits[i] = sixteen_bit_pattern(tensor.dtype, static_cast<float>(values[i]));
  tensor.upload(bits.data(), bits.size() * sizeof(std::uint16_t), stream);
}

// attention_fwd as stage 3 registers it (with the baseline this build declares).
inline const OpSpec& registered_attention_op() {
  static const Registry registry = [] {
    Registry r;
    register_kernels(r);
    return r;
  }();
  return registry.op(kAttentionFwdOp);
}

// `problem` with its scale 25% off, and (when causal) without its mask: an implementation run
// with one of these on `problem`'s operands must fail the check.
inline std::vector<Problem> wrongly_parameterized(const Problem& problem) {
  std::vector<Problem> wrong;
  Problem wrong_scale = problem;
  wrong_scale.set("scale", 1.25 * attention_scale(problem));
  wrong.push_back(wrong_scale);
  if (attention_causal(problem)) {
    Problem no_mask = problem;
    no_mask.set("causal", 0.0);
    wrong.push_back(no_mask);
  }
  return wrong;
}

// An op's reference computed twice on the same operands: on the host (the CPU limit raised past
// the problem) and on the device (the limit at 0).
struct HostAndDeviceReferences {
  References host, device;
};
inline HostAndDeviceReferences host_and_device_references(const OpSpec& op, const Problem& problem,
                                                          const Operands& operands, Context& context) {
  const std::int64_t saved_limit = context.cpu_reference_limit;
  HostAndDeviceReferences both;
  context.cpu_reference_limit = std::int64_t{1} << 40;
  both.host = op.reference(problem, operands, context);
  context.cpu_reference_limit = 0;
  both.device = op.reference(problem, operands, context);
  context.cpu_reference_limit = saved_limit;
  return both;
}

// How many elements of two references (the host's and the device's, both FP64) differ by more
// than 1e-12 relative; the -inf LSE of rows that see no key counts as agreeing.
inline std::size_t references_differ(const std::vector<double>& host, const std::vector<double>& device) {
  std::size_t differ = 0;
  for (std::size_t i = 0; i < host.size(); ++i) {
    const bool both_minus_inf = std::isinf(host[i]) && std::isinf(device[i]) && host[i] < 0 && device[i] < 0;
    if (!both_minus_inf && !(std::abs(host[i] - device[i]) <= 1e-12 * std::max(1.0, std::abs(host[i])))) ++differ;
  }
  return differ;
}

// The op's reference on the host and on the device for `problem` (host_and_device_references),
// expected to agree element for element (references_differ) on O and LSE; returns the host's values
// of each, for checks of their own.
inline std::map<std::string, std::vector<double>> expect_references_agree(const OpSpec& op, const Problem& problem,
                                                                          const Operands& operands, Context& context) {
  const HostAndDeviceReferences references = host_and_device_references(op, problem, operands, context);
  std::map<std::string, std::vector<double>> host_values;
  for (const char* name : {"O", "LSE"}) {
    std::vector<double> h = download(references.host.at(name), context.stream());
    const std::vector<double> d = download(references.device.at(name), context.stream());
    EXPECT_EQ(h.size(), d.size()) << problem.label() << " " << name;
    if (h.size() == d.size()) {
      const std::size_t differ = references_differ(h, d);
      EXPECT_EQ(differ, 0u) << problem.label() << " " << name << ": " << differ << " of " << h.size()
                            << " elements differ between the host and device references";
    }
    host_values.emplace(name, std::move(h));
  }
  return host_values;
}

// bf16-representable values in [-1, 1) from a seed (hand-made operands of the GPU tests).
inline std::vector<double> bf16_values(std::size_t count, std::uint64_t seed) {
  std::uint64_t state = seed;
  std::vector<double> v(count);
  for (double& x : v) {
    const double uniform = static_cast<double>(splitmix64_next(state) >> 11) * 0x1.0p-53;  // [0, 1)
    x = __bfloat162float(__float2bfloat16(static_cast<float>(uniform * 2.0 - 1.0)));
  }
  return v;
}

// The values as bf16 in device memory.
inline DeviceBuffer<__nv_bfloat16> upload(const std::vector<double>& values) {
  std::vector<__nv_bfloat16> host(values.size());
  std::transform(values.begin(), values.end(), host.begin(),
                 [](double x) { return __float2bfloat16(static_cast<float>(x)); });
  DeviceBuffer<__nv_bfloat16> device(host.size());
  device.copy_from_host(host);
  return device;
}

}  // namespace kc::stage3::testing_support
