// swiglu_internal.cuh — SwiGLU as views and a functor: the gate and up halves of each row of
// the fused projection are two column slices of one matrix, and silu(gate) * up is
// on_first(Silu{}, Mul{}).
#pragma once

#include "kc/core/elementwise.cuh"
#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {

struct SwigluViews {
  template <typename T>
  static auto gate(const SwigluArgs<T>& args) {
    return core::column_slice(core::contiguous_view(args.gate_up, args.rows, 2 * args.hidden), 0,
                              args.hidden);
  }
  template <typename T>
  static auto up(const SwigluArgs<T>& args) {
    return core::column_slice(core::contiguous_view(args.gate_up, args.rows, 2 * args.hidden),
                              args.hidden, args.hidden);
  }
  template <typename T>
  static auto out(const SwigluArgs<T>& args) {
    return core::contiguous_view(args.out, args.rows, args.hidden);
  }
};

inline constexpr auto kSwiglu = core::OnFirst<core::Silu, core::Mul>{};

}  // namespace kc::stage2
