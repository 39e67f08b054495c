// elementwise_internal.cuh — the element-wise ops (add, scale, activations) as kc::core::map
// calls, shared by rung 01 (scalar accesses) and rung 02 (16-byte accesses).
#pragma once

#include "kc/core/elementwise.cuh"
#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {

// Calls f(functor) with the functor of `activation`.
template <typename T, class F>
void with_activation(Activation activation, const F& f) {
  switch (activation) {
    case Activation::relu: f(core::Relu{}); break;
    case Activation::silu: f(core::Silu{}); break;
    case Activation::gelu_tanh: f(core::GeluTanh{}); break;
    case Activation::gelu_erf: f(core::GeluErf{}); break;
  }
}

// Applies the op of `args` with map (kVectorize) or map_scalar.
template <typename T, bool kVectorize>
void run_elementwise(const ElementwiseArgs<T>& args, cudaStream_t stream) {
  const auto vector = [&](auto* data) { return core::contiguous_view(data, 1, args.count); };
  const auto apply = [&](auto op, const auto&... inputs) {
    if constexpr (kVectorize)
      core::map(vector(args.out), op, stream, inputs...);
    else
      core::map_scalar(vector(args.out), op, stream, inputs...);
  };
  switch (args.kind) {
    case ElementwiseKind::add: apply(core::Add{}, vector(args.a), vector(args.b)); break;
    case ElementwiseKind::scale: apply(core::Scale{args.alpha}, vector(args.a)); break;
    case ElementwiseKind::activation:
      with_activation<T>(args.activation, [&](auto activation) { apply(activation, vector(args.a)); });
      break;
  }
}

}  // namespace kc::stage2
