// Element-wise rung 02 — 16 bytes per thread per access.
//
// Idea: kc::core::map with 16-byte accesses: 8 bf16/fp16 or 4 float elements per thread per
// load (LDG.E.128) and store (STG.E.128), whenever the element count is a multiple of the vector
// width and the pointers are aligned (otherwise map falls back to rung 01's scalar accesses).
//
// What changed from rung 01: the access width; the functor and the kernel are the same.
//
// Expected limiter: DRAM bandwidth.
//
// Run just this rung:  kc-bench --filter 'stage2/(vector_add|scale|relu|silu|gelu_tanh|gelu_erf)/02_vectorized'
#include "elementwise_internal.cuh"

namespace kc::stage2 {

template <typename T>
void elementwise_02_vectorized(const ElementwiseArgs<T>& args, cudaStream_t stream) {
  run_elementwise<T, true>(args, stream);
}

template void elementwise_02_vectorized<float>(const ElementwiseArgs<float>&, cudaStream_t);
template void elementwise_02_vectorized<__half>(const ElementwiseArgs<__half>&, cudaStream_t);
template void elementwise_02_vectorized<__nv_bfloat16>(const ElementwiseArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
