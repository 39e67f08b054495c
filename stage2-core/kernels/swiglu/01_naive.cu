// SwiGLU rung 01 — one element per thread.
//
// Idea: out[r][h] = silu(gate_up[r][h]) * gate_up[r][hidden + h]. The gate and up halves are
// column slices of the fused projection (kc::core::column_slice: same rows, row stride 2*hidden),
// the math is on_first(Silu{}, Mul{}), and map_scalar applies it element by element.
//
// What to notice: no copy splits the projection; the views just index it.
//
// Expected limiter: load/store instruction issue (2-byte accesses for bf16).
//
// Run just this rung:  kc-bench --filter 'stage2/swiglu/01_naive'
#include "swiglu_internal.cuh"

namespace kc::stage2 {

template <typename T>
void swiglu_01_naive(const SwigluArgs<T>& args, cudaStream_t stream) {
  core::map_scalar(SwigluViews::out(args), kSwiglu, stream, SwigluViews::gate(args), SwigluViews::up(args));
}

template void swiglu_01_naive<float>(const SwigluArgs<float>&, cudaStream_t);
template void swiglu_01_naive<__half>(const SwigluArgs<__half>&, cudaStream_t);
template void swiglu_01_naive<__nv_bfloat16>(const SwigluArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
