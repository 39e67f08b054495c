#include <cub/block/block_reduce.cuh>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/compare.hpp"
#include "kc/common/compare_element.hpp"
#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"

namespace kc {
namespace {

// The FP32 floor: kernels may use fast intrinsics (__expf, rsqrtf) and sum in any order.
double precision_floor(DType t) { return t == DType::f32 || t == DType::tf32 ? 1e-5 : 0.0; }

// What one thread, one block and finally the whole comparison accumulate.
struct Stats {
  unsigned long long mismatches = 0;
  unsigned long long nonfinite_mismatches = 0;
  unsigned long long first_bad = ~0ull;  // lowest mismatching index
  double max_abs_error = 0.0;
  double error_squares = 0.0;
  double reference_squares = 0.0;
  unsigned long long poisoned = 0;       // non-finite outputs where the reference is finite
};

struct CombineStats {
  __host__ __device__ Stats operator()(const Stats& a, const Stats& b) const {
    Stats s;
    s.mismatches = a.mismatches + b.mismatches;
    s.nonfinite_mismatches = a.nonfinite_mismatches + b.nonfinite_mismatches;
    s.first_bad = a.first_bad < b.first_bad ? a.first_bad : b.first_bad;
    s.max_abs_error = a.max_abs_error > b.max_abs_error ? a.max_abs_error : b.max_abs_error;
    s.error_squares = a.error_squares + b.error_squares;
    s.reference_squares = a.reference_squares + b.reference_squares;
    s.poisoned = a.poisoned + b.poisoned;
    return s;
  }
};

__host__ __device__ inline void accumulate(Stats& s, double out, double ref, double atol, double rtol,
                                           unsigned long long index) {
  double error = -1.0;
  const detail::ElementVerdict verdict = detail::judge_element(out, ref, atol, rtol, error);
  if (error >= 0.0) {
    s.max_abs_error = s.max_abs_error > error ? s.max_abs_error : error;
    s.error_squares += error * error;
    s.reference_squares += ref * ref;
  }
  if (verdict == detail::ElementVerdict::ok) return;
  ++s.mismatches;
  if (verdict == detail::ElementVerdict::bad_nonfinite) {
    ++s.nonfinite_mismatches;
    if (!std::isnan(ref) && !std::isinf(ref)) ++s.poisoned;
  }
  if (index < s.first_bad) s.first_bad = index;
}

CompareResult finish(const Stats& s, std::size_t count, const Tolerance& tolerance) {
  CompareResult result;
  result.count = count;
  result.tolerance = tolerance;
  result.mismatches = s.mismatches;
  result.nonfinite_mismatches = s.nonfinite_mismatches;
  result.first_bad_index = s.mismatches > 0 ? s.first_bad : 0;
  result.max_abs_error = s.max_abs_error;
  if (s.poisoned > 0)
    result.rel_frobenius = std::nan("");
  else if (s.reference_squares > 0.0)
    result.rel_frobenius = std::sqrt(s.error_squares / s.reference_squares);
  else  // an all-zero (or empty) reference: judge the absolute error instead
    result.rel_frobenius = std::sqrt(s.error_squares);
  result.passed = result.mismatches == 0 && !std::isnan(result.rel_frobenius) &&
                  result.rel_frobenius <= tolerance.max_rel_frobenius;
  return result;
}

// ---- on the device ------------------------------------------------------------------------------

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;

template <typename T>
__device__ inline double load_as_double(const T* data, std::size_t i) {
  return static_cast<double>(data[i]);
}
template <>
__device__ inline double load_as_double<__half>(const __half* data, std::size_t i) {
  return static_cast<double>(__half2float(data[i]));
}
template <>
__device__ inline double load_as_double<__nv_bfloat16>(const __nv_bfloat16* data, std::size_t i) {
  return static_cast<double>(__bfloat162float(data[i]));
}
template <>
__device__ inline double load_as_double<__nv_fp8_e4m3>(const __nv_fp8_e4m3* data, std::size_t i) {
  return static_cast<double>(static_cast<float>(data[i]));
}
template <>
__device__ inline double load_as_double<__nv_fp8_e5m2>(const __nv_fp8_e5m2* data, std::size_t i) {
  return static_cast<double>(static_cast<float>(data[i]));
}

// i4: element 2j in the low nibble of byte j.
struct Int4 {};
template <>
__device__ inline double load_as_double<Int4>(const Int4* data, std::size_t i) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(data);
  const int nibble = (bytes[i / 2] >> ((i % 2) * 4)) & 0xF;
  return static_cast<double>(nibble >= 8 ? nibble - 16 : nibble);
}

// Sum of squares and count of the finite reference values, one partial per block.
__global__ void reference_squares_kernel(const double* ref, std::size_t count, double* partial_squares,
                                         unsigned long long* partial_finite) {
  using Reduce = cub::BlockReduce<double, kThreads>;
  using CountReduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename Reduce::TempStorage reduce_storage;
  __shared__ typename CountReduce::TempStorage count_storage;
  double squares = 0.0;
  unsigned long long finite = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const double r = ref[i];
    if (isfinite(r)) {
      squares += r * r;
      ++finite;
    }
  }
  squares = Reduce(reduce_storage).Sum(squares);
  finite = CountReduce(count_storage).Sum(finite);
  if (threadIdx.x == 0) {
    partial_squares[blockIdx.x] = squares;
    partial_finite[blockIdx.x] = finite;
  }
}

template <typename T>
__global__ void compare_kernel(const T* out, const double* ref, std::size_t count, double atol,
                               double rtol, Stats* partial) {
  using Reduce = cub::BlockReduce<Stats, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  Stats local;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    accumulate(local, load_as_double(out, i), ref[i], atol, rtol, i);
  const Stats block = Reduce(storage).Reduce(local, CombineStats());
  if (threadIdx.x == 0) partial[blockIdx.x] = block;
}

unsigned blocks_for(std::size_t count) {
  const std::size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<std::size_t>(blocks, 1, kMaxBlocks));
}

template <typename T>
void launch_compare(const void* out, const double* ref, std::size_t count, const Tolerance& t,
                    Stats* partial, unsigned blocks, cudaStream_t stream) {
  compare_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(out), ref, count, t.atol,
                                                  t.rtol, partial);
}

double device_reference_rms(const double* ref, std::size_t count, cudaStream_t stream) {
  const unsigned blocks = blocks_for(count);
  DeviceBuffer<double> squares(blocks);
  DeviceBuffer<unsigned long long> finite(blocks);
  reference_squares_kernel<<<blocks, kThreads, 0, stream>>>(ref, count, squares.data(), finite.data());
  KC_CHECK_LAUNCH();
  const std::vector<double> host_squares = squares.to_host(stream);
  const std::vector<unsigned long long> host_finite = finite.to_host(stream);
  double total = 0.0;
  unsigned long long n = 0;
  for (unsigned b = 0; b < blocks; ++b) {
    total += host_squares[b];
    n += host_finite[b];
  }
  return n > 0 ? std::sqrt(total / static_cast<double>(n)) : 0.0;
}

}  // namespace

Tolerance tolerance_for(const Accuracy& accuracy, double rms) {
  if (!dtype_is_float(accuracy.output)) return {0.0, 0.0, 0.0};
  const double u = unit_roundoff(accuracy.output);
  // Sums run in FP32, or in FP64 for FP64 results (the references themselves).
  const double sum_unit = accuracy.output == DType::f64 ? unit_roundoff(DType::f64) : std::ldexp(1.0, -24);
  const double sum_error = 8.0 * sum_unit * std::sqrt(std::max(1.0, accuracy.terms));
  const double allowance = precision_floor(accuracy.output) + accuracy.approximation;
  Tolerance t;
  t.rtol = accuracy.roundings * u + sum_error + allowance;
  // Outputs in the subnormal range round with an absolute error up to half their spacing, on top of
  // the error of the FP32 value being rounded: the two add (an FP32 sum a little off a reference
  // just past half a spacing rounds to the other side, a whole spacing away). Relative to the
  // reference's size that adds s / rms(ref) (nothing for references of ordinary size).
  const double absolute = subnormal_half_spacing(accuracy.output) + accuracy.intermediate_error;
  t.atol = (u + sum_error + allowance) * rms + absolute;
  t.max_rel_frobenius = accuracy.roundings * u + sum_error / 4.0 + allowance + (rms > 0.0 ? absolute / rms : 0.0);
  return t;
}

double reference_rms(const double* ref, std::size_t count) {
  double squares = 0.0;
  std::size_t finite = 0;
  for (std::size_t i = 0; i < count; ++i)
    if (std::isfinite(ref[i])) {
      squares += ref[i] * ref[i];
      ++finite;
    }
  return finite > 0 ? std::sqrt(squares / static_cast<double>(finite)) : 0.0;
}

CompareResult compare(const double* out, const double* ref, std::size_t count,
                      const Tolerance& tolerance) {
  Stats stats;
  for (std::size_t i = 0; i < count; ++i) accumulate(stats, out[i], ref[i], tolerance.atol, tolerance.rtol, i);
  CompareResult result = finish(stats, count, tolerance);
  if (result.mismatches > 0) {
    result.first_bad_out = out[result.first_bad_index];
    result.first_bad_ref = ref[result.first_bad_index];
  }
  return result;
}

CompareResult compare(const double* out, const double* ref, std::size_t count,
                      const Accuracy& accuracy) {
  return compare(out, ref, count, tolerance_for(accuracy, reference_rms(ref, count)));
}

CompareResult compare_on_device(const void* out, DType out_dtype, const double* ref,
                                std::size_t count, const Accuracy& accuracy, cudaStream_t stream) {
  const Tolerance tolerance = tolerance_for(accuracy, device_reference_rms(ref, count, stream));
  const unsigned blocks = blocks_for(count);
  DeviceBuffer<Stats> partial(blocks);
  switch (out_dtype) {
    case DType::f64: launch_compare<double>(out, ref, count, tolerance, partial.data(), blocks, stream); break;
    case DType::f32:
    case DType::tf32: launch_compare<float>(out, ref, count, tolerance, partial.data(), blocks, stream); break;
    case DType::f16: launch_compare<__half>(out, ref, count, tolerance, partial.data(), blocks, stream); break;
    case DType::bf16: launch_compare<__nv_bfloat16>(out, ref, count, tolerance, partial.data(), blocks, stream); break;
    case DType::f8e4m3: launch_compare<__nv_fp8_e4m3>(out, ref, count, tolerance, partial.data(), blocks, stream); break;
    case DType::f8e5m2: launch_compare<__nv_fp8_e5m2>(out, ref, count, tolerance, partial.data(), blocks, stream); break;
    case DType::i32: launch_compare<std::int32_t>(out, ref, count, tolerance, partial.data(), blocks, stream); break;
    case DType::i8: launch_compare<std::int8_t>(out, ref, count, tolerance, partial.data(), blocks, stream); break;
    case DType::i4: launch_compare<Int4>(out, ref, count, tolerance, partial.data(), blocks, stream); break;
  }
  KC_CHECK_LAUNCH();
  Stats total;
  for (const Stats& s : partial.to_host(stream)) total = CombineStats()(total, s);
  CompareResult result = finish(total, count, tolerance);
  if (result.mismatches > 0) {
    // The first bad element's two values, a few bytes each.
    const std::size_t element_bytes = std::max<std::size_t>(1, dtype_bytes(out_dtype, 2) / 2);
    const std::size_t offset = out_dtype == DType::i4 ? result.first_bad_index / 2
                                                      : result.first_bad_index * element_bytes;
    std::byte element[8] = {};
    KC_CUDA_CHECK(cudaMemcpyAsync(element, static_cast<const std::byte*>(out) + offset, element_bytes,
                                  cudaMemcpyDeviceToHost, stream));
    KC_CUDA_CHECK(cudaMemcpyAsync(&result.first_bad_ref, ref + result.first_bad_index, sizeof(double),
                                  cudaMemcpyDeviceToHost, stream));
    KC_CUDA_CHECK(cudaStreamSynchronize(stream));
    result.first_bad_out = decode_element(element, out_dtype,
                                          out_dtype == DType::i4 ? result.first_bad_index % 2 : 0);
  }
  return result;
}

std::string CompareResult::summary() const {
  if (passed)
    return fmt::format("ok: {} elements, max abs error {:.3g}, rel. Frobenius error {:.3g} (limit {:.3g})",
                       count, max_abs_error, rel_frobenius, tolerance.max_rel_frobenius);
  std::string text = "FAILED: ";
  if (mismatches > 0) {
    text += fmt::format(
        "{} of {} elements outside |out-ref| <= {:.3g} + {:.3g}*|ref| ({} non-finite); "
        "first at index {}: got {}, expected {}; ",
        mismatches, count, tolerance.atol, tolerance.rtol, nonfinite_mismatches, first_bad_index,
        first_bad_out, first_bad_ref);
  }
  text += fmt::format("rel. Frobenius error {:.3g} (limit {:.3g})", rel_frobenius,
                      tolerance.max_rel_frobenius);
  return text;
}

}  // namespace kc
