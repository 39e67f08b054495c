// kc/core/gelu.hpp — GELU, defined once for the kernels and for the references that check them.
//
// Each form of GELU is one formula, a template over the arithmetic that evaluates it:
//
//   gelu_tanh<ReferenceMath>(x)   double, std::exp, exact division: the host references
//   gelu_tanh<KernelMath>(x)      float, 2^x on the MUFU unit, approximate division: the kernels
//
// (and the same for gelu_erf). A kernel and its reference evaluate the same function in the same
// algebraic form, so they differ only by the rounding of their arithmetic, never by a different
// way of writing the function: stage 2's activation kernels, stage 3's fused GEMM epilogue (rung
// 10) and its unfused baseline all call these.
//
// GELU, tanh form (GPT-2, "gelu_pytorch_tanh"): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// evaluated as the same function rewritten,
//
//   0.5 x (1 + tanh u)  =  x sigmoid(2u)  =  x / (1 + exp(-2u)),   -2u = -2 sqrt(2/pi) x (1 + 0.044715 x^2)
//
// - No cancellation. As x -> -inf, 1 + tanh(u) -> 0 loses the digits tanh had: with tanh.approx's
//   2^-11 relative error, about 1% error in the result at x = -2, 20% at x = -3 and no correct
//   digit further out; even in double below about x = -5, where 1 + tanh(u) falls below double's
//   epsilon. 1 + exp(-2u) just grows. In float the relative error stays within a few 1e-6 (ex2's
//   own, and the rounding of its argument, which grows with |argument|: ~2e-5 near the overflow
//   edge), far below bf16's 2^-9.
// - Cheap. exp(-2u) is computed as base^(-2u log_base(e)) in the base the arithmetic has an
//   instruction for (KernelMath: 2), with log_base(e) folded into the formula's constant. On the
//   device that is six FMA-pipe instructions and two MUFU ops (ex2, and rcp inside the division)
//   per element; tanhf is about twice as long (both MUFU ops plus a polynomial and selects). In a
//   fused GEMM epilogue the tensor cores may wait while it runs, so these instructions count.
// - Limits, as written: for large x, exp(-2u) = 0 and the result is x; for x below about -10 in
//   float, exp(-2u) overflows to inf and the result is -0; x = -inf gives -inf / inf = NaN, as
//   0.5 x (1 + tanh u) does at -inf (stage 2's activation functors return the limit 0 there).
//
// GELU, exact form: x Phi(x), Phi the standard normal CDF, 0.5 (1 + erf(x / sqrt 2)). Math gives
// Phi: in double as 0.5 erfc(-x / sqrt 2) (for the same reason: for negative x, 1 + erf cancels and
// erfc does not), in the kernels as a fitted approximation (KernelMath::normal_cdf).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <limits>

namespace kc::core {

inline constexpr double kGeluSqrt2OverPi = 0.7978845608028654;    // sqrt(2 / pi)
inline constexpr double kGeluCubicCoefficient = 0.044715;
inline constexpr double kGeluInverseSqrt2 = 0.7071067811865476;  // 1 / sqrt(2)

// The arithmetic of the references: double, the exponential in base e, exact division.
struct ReferenceMath {
  using Real = double;
  static constexpr double kLogBaseOfE = 1.0;  // exp(t) = e^(t . 1)
  __host__ __device__ static double exp_base(double y) { return std::exp(y); }
  __host__ __device__ static double divide(double a, double b) { return a / b; }
  // The standard normal CDF, Phi(x) = 0.5 erfc(-x / sqrt 2) (erfc: no cancellation for x < 0).
  __host__ __device__ static double normal_cdf(double x) { return 0.5 * std::erfc(-x * kGeluInverseSqrt2); }
  // Its lower tail at -m, Phi(-m) = 0.5 erfc(m / sqrt 2), for m >= 0.
  __host__ __device__ static double normal_tail(double m) { return 0.5 * std::erfc(m * kGeluInverseSqrt2); }
  // Beyond this |x| gelu_erf may treat the tail term |x| Phi(-|x|) as 0: never, in double.
  static constexpr double kTailNegligibleBeyond = std::numeric_limits<double>::infinity();
};

#if defined(__CUDACC__)

// The arithmetic of the kernels: float, the exponential in base 2 on the MUFU unit, approximate
// division.
struct KernelMath {
  using Real = float;
  static constexpr float kLogBaseOfE = 1.4426950408889634f;  // log2(e): exp(t) = 2^(t log2 e)

  // 2^y, flushing results below 2^-126 to zero. __expf compiles to the same MUFU.EX2 plus a
  // rescaling that keeps such results as denormals (a compare and two multiplies), which GELU does
  // not need: there the exponential is added to 1.
  __device__ static float exp_base(float y) {
    float result;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(result) : "f"(y));
    return result;
  }
  // a / b from MUFU.RCP and a multiply, 2 ulp; for |b| > 2^126 it returns 0, the limit GELU has
  // there.
  __device__ static float divide(float a, float b) { return __fdividef(a, b); }
  // 1 / b on the MUFU unit (rcp.approx.ftz, 1 ulp).
  __device__ static float reciprocal(float b) {
    float result;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(result) : "f"(b));
    return result;
  }

  // normal_tail(m) = Phi(-m) = erfc(m / sqrt 2) / 2 for m = |x| >= 0, and from it
  // Phi(x) = 0.5 erfc(-x / sqrt 2), the standard normal CDF, for the kernels: 12 FMA-pipe
  // instructions and two MUFU ops (rcp, ex2). With CUDA's erfcf instead, stage 2's gelu_erf rung
  // 02 (bf16, eight elements per thread) was 488 SASS instructions long on sm_90a (gelu_tanh's:
  // 160), and issue-bound (stage2-core/README.md). With z = |x| / sqrt 2:
  //   erfc(z) = t 2^(Q(t) - z^2 log2 e),   t = 1 / (1 + z/2),   Q a polynomial of degree 5
  // (erfc(z) e^(z^2) / t varies slowly in t on (0, 1]: its logarithm takes a short polynomial; the
  // factor e^(-z^2) carries the fast decay exactly), then Phi(x) = erfc(z)/2 for x < 0 and
  // 1 - erfc(z)/2 otherwise. Below, z is folded into the constants (t = 1 / (1 + |x| / (2 sqrt 2)),
  // z^2 log2 e = x^2 log2(e) / 2) and the 1/2 into Q's constant term (2^(Q - 1)).
  // Accuracy: the coefficients are fitted by stage2-core/tools/fit_erfc.py (minimax relative error
  // of the form 7.6e-6 for z in [0, 10]); in float the relative error of erfc(z)/2 is below 9e-6
  // for z <= 4 (|x| <= 5.7), growing with z (the rounding of z^2 in the exponent) to 2.4e-5 at
  // z = 9, where erfc(z)/2 is 2e-37. That is far below bf16's and f16's rounding, and within the
  // harness's 1e-5 floor for f32 outputs (kc/common/compare.hpp); degree 7 would give 6e-7 for two
  // more FMAs per element. From z = 9.2 on the result is below float's smallest normal number and
  // flushes to 0 (ex2.approx.ftz): no clamp is needed, Q(t) stays bounded as t -> 0, and
  // Phi(-inf) = 0, Phi(+inf) = 1, Phi(NaN) = NaN.
  __device__ static float normal_tail(float magnitude) {
    constexpr float kHalfOverSqrt2 = 0.35355339059327373f;    // t = 1 / (1 + |x| / (2 sqrt 2))
    constexpr float kMinusHalfLog2E = -0.72134752044448170f;  // -z^2 log2 e = x^2 (-log2(e) / 2)
    const float t = reciprocal(fmaf(kHalfOverSqrt2, magnitude, 1.f));
    float q = 0.3300717771053314f;
    q = fmaf(q, t, -1.0231379270553589f);
    q = fmaf(q, t, 0.6845399737358093f);
    q = fmaf(q, t, 0.36708852648735046f);
    q = fmaf(q, t, 1.468682050704956f);
    q = fmaf(q, t, -1.8272334337234497f - 1.f);  // - 1: the 1/2 of erfc(z)/2
    return t * exp_base(fmaf(magnitude * kMinusHalfLog2E, magnitude, q));
  }
  __device__ static float normal_cdf(float x) {
    const float half_erfc = normal_tail(fabsf(x));
    return x < 0.f ? half_erfc : 1.f - half_erfc;
  }
  // Phi(-14) = 8e-45 is below float's normal range (normal_tail flushes it to 0), so beyond
  // |x| = 14 gelu_erf's tail term |x| Phi(-|x|) is 0; clamping |x| there also keeps it 0 at
  // |x| = inf instead of inf * 0 = NaN.
  static constexpr float kTailNegligibleBeyond = 14.f;
};

#endif  // __CUDACC__

// GELU, tanh form, as x / (1 + exp(-2u)) (see above).
template <class Math>
__host__ __device__ __forceinline__ typename Math::Real gelu_tanh(typename Math::Real x) {
  using Real = typename Math::Real;
  // -2u = -2 sqrt(2/pi) x (1 + 0.044715 x^2), times log_base(e): the exponent in the base of Math.
  constexpr Real kExponentScale = Real(-2) * Real(kGeluSqrt2OverPi) * Real(Math::kLogBaseOfE);
  const Real exponent = kExponentScale * x * (Real(1) + Real(kGeluCubicCoefficient) * (x * x));
  return Math::divide(x, Real(1) + Math::exp_base(exponent));
}

// GELU, exact form, x Phi(x), written with the tail only:
//
//   x Phi(x)  =  max(x, 0) - |x| Phi(-|x|)
//
// (for x < 0 it is x Phi(x) itself; for x >= 0, x (1 - Phi(-x))). The same function, one
// instruction per element shorter in the kernels than x * (x < 0 ? tail : 1 - tail): the compare
// (FSETP), the subtraction predicated on it and the multiply become one max (FMNMX) and one fused
// multiply-add. Beyond Math::kTailNegligibleBeyond the tail
// term is evaluated at that bound (where it is 0 to the Math's precision), which also gives the
// limits: x Phi(x) -> x as x -> +inf, -> 0 as x -> -inf. NaN stays NaN through the tail term (the
// max would drop it).
template <class Math>
__host__ __device__ __forceinline__ typename Math::Real gelu_erf(typename Math::Real x) {
  using Real = typename Math::Real;
  constexpr Real kBound = Real(Math::kTailNegligibleBeyond);
  const Real magnitude = std::fabs(x);
  const Real bounded = magnitude > kBound ? kBound : magnitude;  // NaN stays NaN, and so does the result
  return std::fmax(x, Real(0)) - bounded * Math::normal_tail(bounded);
}

}  // namespace kc::core
