#include "kc/common/compare.hpp"

#include <fmt/format.h>

#include <cmath>

namespace kc {

Tolerance tolerance_for(DType precision) {
  // atol is multiplied by the op's scale; see compare.hpp.
  switch (precision) {
    case DType::f64: return {1e-12, 1e-12, 1e-12};
    case DType::f32: return {1e-5, 1e-5, 1e-5};
    case DType::tf32: return {1e-3, 2e-3, 2e-3};
    case DType::f16: return {1e-3, 2e-3, 2e-3};
    case DType::bf16: return {8e-3, 1.6e-2, 1e-2};
    case DType::f8e4m3: return {6e-2, 1.25e-1, 6e-2};
    case DType::f8e5m2: return {1.25e-1, 2.5e-1, 1.25e-1};
    case DType::i32:
    case DType::i8:
    case DType::i4: return {0.0, 0.0, 0.0};  // integer results are exact
  }
  return {};
}

CompareResult compare(const double* out, const double* ref, std::size_t count,
                      const Tolerance& tolerance, double scale) {
  CompareResult result;
  result.count = count;
  result.tolerance = tolerance;
  result.scale = scale;
  double error_squares = 0.0;
  double reference_squares = 0.0;
  bool frobenius_poisoned = false;
  for (std::size_t i = 0; i < count; ++i) {
    const double o = out[i];
    const double r = ref[i];
    bool ok;
    if (std::isnan(r)) {
      ok = std::isnan(o);
    } else if (std::isinf(r)) {
      ok = o == r;
    } else if (!std::isfinite(o)) {
      ok = false;
      frobenius_poisoned = true;
    } else {
      const double error = std::fabs(o - r);
      ok = error <= tolerance.atol * scale + tolerance.rtol * std::fabs(r);
      result.max_abs_error = std::fmax(result.max_abs_error, error);
      error_squares += error * error;
      reference_squares += r * r;
    }
    if (!ok) {
      if (result.mismatches == 0) {
        result.first_bad_index = i;
        result.first_bad_out = o;
        result.first_bad_ref = r;
      }
      ++result.mismatches;
      if (!std::isfinite(o) || !std::isfinite(r)) ++result.nonfinite_mismatches;
    }
  }
  if (frobenius_poisoned) {
    result.rel_frobenius = std::nan("");
  } else if (reference_squares > 0.0) {
    result.rel_frobenius = std::sqrt(error_squares / reference_squares);
  } else {
    // An all-zero (or empty) reference: judge the absolute error instead.
    result.rel_frobenius = std::sqrt(error_squares);
  }
  result.passed = result.mismatches == 0 && !std::isnan(result.rel_frobenius) &&
                  result.rel_frobenius <= tolerance.max_rel_frobenius;
  return result;
}

std::string CompareResult::summary() const {
  if (passed)
    return fmt::format("ok: {} elements, max abs error {:.3g}, rel. Frobenius error {:.3g} (limit {:.3g})",
                       count, max_abs_error, rel_frobenius, tolerance.max_rel_frobenius);
  std::string text = "FAILED: ";
  if (mismatches > 0) {
    text += fmt::format(
        "{} of {} elements outside |out-ref| <= {:.3g}*{:.3g} + {:.3g}*|ref| ({} non-finite); "
        "first at index {}: got {}, expected {}; ",
        mismatches, count, tolerance.atol, scale, tolerance.rtol, nonfinite_mismatches,
        first_bad_index, first_bad_out, first_bad_ref);
  }
  text += fmt::format("rel. Frobenius error {:.3g} (limit {:.3g})", rel_frobenius,
                      tolerance.max_rel_frobenius);
  return text;
}

}  // namespace kc
