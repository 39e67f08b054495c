// kc/common/compare.hpp — is this output right?
//
// Two tests, both must pass:
//   1. every element:  |out - ref| <= atol + rtol * |ref|
//   2. the whole:      ||out - ref||_F / ||ref||_F <= max_rel_frobenius
// NaN and Inf are handled on purpose: a NaN reference demands a NaN output, an infinite reference
// demands the same infinity, and a non-finite output where the reference is finite fails. Since
// outputs are poisoned with NaN before a run, an element the kernel never wrote fails test 1.
//
// The bounds come from one table, derived from what the computation may legitimately get wrong
// (tolerance_for below), not tuned per op: a correct kernel rounds its result to the output type
// once (or a stated number of times), sums its terms in FP32, and may use fast intrinsics; a
// kernel that drops a term, keeps partial sums in 16 bits or computes another function makes
// errors far larger than that, and the negative controls (tests/negative_controls) prove the
// bounds catch such kernels at the benchmark shapes.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kc/common/dtype.hpp"

namespace kc {

struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
  double max_rel_frobenius = 0.0;
};

// What an op says about one of its outputs, from which the tolerance follows.
struct Accuracy {
  DType output = DType::f32;  // the type the result is rounded to
  double terms = 1.0;         // values summed (in FP32) into each output: K for a GEMM, cols for a row norm
  int roundings = 1;          // roundings to the output type on the way, by the op's definition or
                              // its unfused rung (2: rounded, then an activation, rounded again)
  double approximation = 0.0; // relative error of approximations the kernels may make beyond that
  // Absolute error the definition allows from rounding an intermediate before a function of it
  // (bias + activation stores x + bias first): slope of the function x unit roundoff x the
  // intermediate's magnitude. Added to atol, and relative to rms(ref) to the Frobenius limit; it
  // matters where outputs are far smaller than the intermediates (the tail of a GELU).
  double intermediate_error = 0.0;
};

// The one tolerance table. With u the unit roundoff of the output type (dtype.hpp: 2^-8 for bf16,
// 2^-11 for f16, 2^-24 for f32), R the roundings, a = 8 * 2^-24 * sqrt(terms) the FP32
// accumulation error of a sum (eight standard deviations of its random walk; 2^-53 for f64
// results, which the references are) and f a floor per
// type (1e-5 for f32 and tf32, whose kernels may use fast intrinsics and any summation order; 0
// below 32 bits, where the output rounding dwarfs both):
//   rtol = R u + a + f + approximation
//   atol = (u + a + f + approximation) * rms(ref) + intermediate_error + half the output type's
//          subnormal spacing (added: a subnormal output's rounding error and its FP32 error add)
//   max_rel_frobenius = R u + a / 4 + f + approximation
//                       (+ (half the subnormal spacing + intermediate_error) / rms(ref))
// For bf16 that is 2^-8 |ref| + 2^-8 rms(ref) per element and 3.9e-3 for the whole: a correct
// bf16 result is off by at most 2^-8 |ref| (half an ulp), about 1.1e-3 to 1.7e-3 in Frobenius.
// Integer outputs are exact: all three are 0.
Tolerance tolerance_for(const Accuracy& accuracy, double reference_rms);

struct CompareResult {
  bool passed = false;
  std::size_t count = 0;
  std::size_t mismatches = 0;           // elements failing the per-element test
  std::size_t nonfinite_mismatches = 0; // of those, where out or ref is NaN/Inf
  std::size_t first_bad_index = 0;      // valid when mismatches > 0
  double first_bad_out = 0.0;
  double first_bad_ref = 0.0;
  double max_abs_error = 0.0;           // over elements where both are finite
  double rel_frobenius = 0.0;
  Tolerance tolerance;

  // One line a learner can read: "FAILED: 1024 of 4096 elements outside |out-ref| <= 1e-05 +
  // 1e-05*|ref| (1024 non-finite); first at index 17: got nan, expected 3.25; rel. Frobenius
  // error nan (limit 1e-05)".
  std::string summary() const;
};

// Root mean square of the finite values of `ref` (0 when there are none).
double reference_rms(const double* ref, std::size_t count);

// On the host, for tests and small problems.
CompareResult compare(const double* out, const double* ref, std::size_t count,
                      const Tolerance& tolerance);
CompareResult compare(const double* out, const double* ref, std::size_t count,
                      const Accuracy& accuracy);

// On the GPU: `out` holds `count` elements of `out_dtype`, `ref` `count` doubles, both in device
// memory. The statistics are reduced on the device; only a few numbers come back to the host, so a
// gigabyte-sized output is checked without copying it. Same results as the host compare.
CompareResult compare_on_device(const void* out, DType out_dtype, const double* ref,
                                std::size_t count, const Accuracy& accuracy, cudaStream_t stream);

}  // namespace kc
