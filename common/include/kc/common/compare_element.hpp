// kc/common/compare_element.hpp — the per-element test of compare.hpp, one definition for the host
// compare (compare.cpp) and the device compare (compare.cu).
#pragma once

#include <cmath>

#include "kc/common/host_device.hpp"

namespace kc::detail {

enum class ElementVerdict { ok, bad, bad_nonfinite };

// `finite_error` is set to |out - ref| when both are finite, else left alone.
KC_HOST_DEVICE inline ElementVerdict judge_element(double out, double ref, double atol, double rtol,
                                                   double& finite_error) {
  if (std::isnan(ref)) return std::isnan(out) ? ElementVerdict::ok : ElementVerdict::bad_nonfinite;
  if (std::isinf(ref)) return out == ref ? ElementVerdict::ok : ElementVerdict::bad_nonfinite;
  if (!std::isfinite(out)) return ElementVerdict::bad_nonfinite;
  finite_error = std::fabs(out - ref);
  return finite_error <= atol + rtol * std::fabs(ref) ? ElementVerdict::ok : ElementVerdict::bad;
}

}  // namespace kc::detail

#undef KC_HOST_DEVICE
