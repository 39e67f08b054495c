// Element-wise rung 01 — one element per thread (vector add, scale, ReLU, SiLU, GELU).
//
// Idea: kc::core::map_scalar: thread i loads element i of each input, applies the functor in
// float, rounds and stores element i. Adjacent threads touch adjacent elements, so every access
// is coalesced — but each instruction moves only 2 or 4 bytes per thread.
//
// What to notice: for bf16 a warp's load moves 64 bytes; the SM needs eight times the load/store
// instructions of rung 02 for the same bytes, and GELU's arithmetic has to fit in between.
//
// Expected limiter: load/store instruction issue and memory latency rather than DRAM bytes.
//
// Run just this rung:  kc-bench --filter 'stage2/(vector_add|scale|relu|silu|gelu_tanh|gelu_erf)/01_scalar'
#include "elementwise_internal.cuh"

namespace kc::stage2 {

template <typename T>
void elementwise_01_scalar(const ElementwiseArgs<T>& args, cudaStream_t stream) {
  run_elementwise<T, false>(args, stream);
}

template void elementwise_01_scalar<float>(const ElementwiseArgs<float>&, cudaStream_t);
template void elementwise_01_scalar<__half>(const ElementwiseArgs<__half>&, cudaStream_t);
template void elementwise_01_scalar<__nv_bfloat16>(const ElementwiseArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
