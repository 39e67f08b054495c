// kc/common/compare.hpp — is this output right?
//
// Two tests, both must pass:
//   1. every element:  |out - ref| <= atol * scale + rtol * |ref|
//   2. the whole:      ||out - ref||_F / ||ref||_F <= max_rel_frobenius
// NaN and Inf are handled on purpose: a NaN reference demands a NaN output, an infinite reference
// demands the same infinity, and a non-finite output where the reference is finite fails. Since
// outputs are poisoned with NaN before a run, an element the kernel never wrote fails test 1.
//
// `scale` lets an op say how large absolute errors may legitimately grow: a K-long dot product of
// O(1) inputs accumulates rounding error like sqrt(K), so GEMM passes scale = sqrt(K).
// Test 2 catches a kernel that is slightly wrong everywhere (e.g. rounds inputs to fp16) even where
// every single element stays inside its bound.
#pragma once

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

// The one tolerance table. `precision` is the precision of the computation being judged (the
// output type, or tf32 for tensor-core FP32 math), not the storage type of the inputs.
Tolerance tolerance_for(DType precision);

struct CompareResult {
  bool passed = false;
  std::size_t count = 0;
  std::size_t mismatches = 0;          // elements failing the per-element test
  std::size_t nonfinite_mismatches = 0; // of those, where out or ref is NaN/Inf
  std::size_t first_bad_index = 0;      // valid when mismatches > 0
  double first_bad_out = 0.0;
  double first_bad_ref = 0.0;
  double max_abs_error = 0.0;           // over elements where both are finite
  double rel_frobenius = 0.0;
  Tolerance tolerance;
  double scale = 1.0;

  // One line a learner can read: "FAILED: 1024 of 4096 elements wrong (first at 17: got nan,
  // expected 3.25), rel. Frobenius error nan (limit 1e-05)".
  std::string summary() const;
};

CompareResult compare(const double* out, const double* ref, std::size_t count,
                      const Tolerance& tolerance, double scale = 1.0);

}  // namespace kc
