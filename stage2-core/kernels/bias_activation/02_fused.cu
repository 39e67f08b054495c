// Bias + activation rung 02 — fused by composing functors, not by writing a kernel.
//
// Idea: kc::core::then(Add{}, activation) is one functor computing act(x + bias); map applies
// it in a single pass: read x (and the L2-resident bias), write out. The same map kernel serves
// every activation and every other composition; nothing here is specific to "bias + GELU".
//
// What changed from rung 01: one launch and half the DRAM traffic.
//
// Expected limiter: DRAM bandwidth.
//
// Run just this rung:  kc-bench --filter 'stage2/bias_.*/02_fused'
#include "../elementwise/elementwise_internal.cuh"

namespace kc::stage2 {

template <typename T>
void bias_activation_02_fused(const BiasActivationArgs<T>& args, cudaStream_t stream) {
  with_activation<T>(args.activation, [&](auto activation) {
    core::map(core::contiguous_view(args.out, args.rows, args.cols), core::then(core::Add{}, activation),
              stream, core::contiguous_view(args.x, args.rows, args.cols),
              core::broadcast_rows(args.bias, args.rows, args.cols));
  });
}

template void bias_activation_02_fused<float>(const BiasActivationArgs<float>&, cudaStream_t);
template void bias_activation_02_fused<__half>(const BiasActivationArgs<__half>&, cudaStream_t);
template void bias_activation_02_fused<__nv_bfloat16>(const BiasActivationArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
