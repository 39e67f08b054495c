// Bias + activation rung 01 — unfused: a bias-add kernel, then an activation kernel.
//
// Idea: two library calls, each vectorized: out = x + bias (bias broadcast over rows through a
// stride-0 view), then out = act(out) in place.
//
// What to notice: `out` is written, read back and written again: 4 row-sized transfers where 2
// suffice (read x, write out). At best half of copy speed.
//
// Expected limiter: DRAM bandwidth, spent twice.
//
// Run just this rung:  kc-bench --filter 'stage2/bias_.*/01_unfused'
#include "../elementwise/elementwise_internal.cuh"

namespace kc::stage2 {

template <typename T>
void bias_activation_01_unfused(const BiasActivationArgs<T>& args, cudaStream_t stream) {
  const auto out = core::contiguous_view(args.out, args.rows, args.cols);
  core::map(out, core::Add{}, stream, core::contiguous_view(args.x, args.rows, args.cols),
            core::broadcast_rows(args.bias, args.rows, args.cols));
  with_activation<T>(args.activation,
                     [&](auto activation) { core::map(out, activation, stream, out.as_const()); });
}

template void bias_activation_01_unfused<float>(const BiasActivationArgs<float>&, cudaStream_t);
template void bias_activation_01_unfused<__half>(const BiasActivationArgs<__half>&, cudaStream_t);
template void bias_activation_01_unfused<__nv_bfloat16>(const BiasActivationArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
