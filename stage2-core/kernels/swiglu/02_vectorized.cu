// SwiGLU rung 02 — 16-byte accesses.
//
// Idea: the rung-01 views and functor through kc::core::map, which uses 16-byte accesses when
// hidden is a multiple of the vector width (so the up half starts 16-byte aligned) and falls back
// to scalar accesses otherwise.
//
// What changed from rung 01: the access width.
//
// Expected limiter: DRAM bandwidth (read 2 x hidden, write hidden per row).
//
// Run just this rung:  kc-bench --filter 'stage2/swiglu/02_vectorized'
#include "swiglu_internal.cuh"

namespace kc::stage2 {

template <typename T>
void swiglu_02_vectorized(const SwigluArgs<T>& args, cudaStream_t stream) {
  core::map(SwigluViews::out(args), kSwiglu, stream, SwigluViews::gate(args), SwigluViews::up(args));
}

template void swiglu_02_vectorized<float>(const SwigluArgs<float>&, cudaStream_t);
template void swiglu_02_vectorized<__half>(const SwigluArgs<__half>&, cudaStream_t);
template void swiglu_02_vectorized<__nv_bfloat16>(const SwigluArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
