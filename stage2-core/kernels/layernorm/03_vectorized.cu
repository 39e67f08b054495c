// LayerNorm rung 03 — 16-byte vector loads and stores.
//
// Idea: the rung-02 kernel with 16-byte accesses (8 bf16/fp16 or 4 float) wherever the row length
// and the pointers allow them (kc::core::vector_width), scalar accesses otherwise.
//
// What changed from rung 02: the access width template argument, nothing else.
//
// Expected limiter: DRAM bandwidth plus two extra passes over each row (served by the L2).
//
// Run just this rung:  kc-bench --filter 'stage2/layernorm/03_vectorized'
#include "kc/core/vector_io.hpp"
#include "layernorm_internal.cuh"

namespace kc::stage2 {

template <typename T>
void layernorm_03_vectorized(const LayerNormArgs<T>& args, cudaStream_t stream) {
  layernorm_streaming(
      args, core::vector_width(args.cols, sizeof(T), args.x, args.weight, args.bias, args.y),
      stream);
}

template void layernorm_03_vectorized<float>(const LayerNormArgs<float>&, cudaStream_t);
template void layernorm_03_vectorized<__half>(const LayerNormArgs<__half>&, cudaStream_t);
template void layernorm_03_vectorized<__nv_bfloat16>(const LayerNormArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
