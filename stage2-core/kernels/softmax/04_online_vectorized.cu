// Softmax rung 04 — online softmax with 16-byte vector accesses.
//
// Idea: the rung-03 kernel with 16-byte loads and stores wherever kc::core::vector_width allows.
//
// What changed from rung 03: the access width template argument, nothing else.
//
// Expected limiter: instruction issue. The accesses are wide now, but each element still costs
// two exps and the online update, and rung 03's pair reduction (two exps per shuffle step) is
// paid by every thread of the block, 512 on a 4096-element row (stage2-core/README.md, softmax
// rung 04).
//
// Run just this rung:  kc-bench --filter 'stage2/softmax/04_online_vectorized'
#include "kc/core/vector_io.hpp"
#include "softmax_internal.cuh"

namespace kc::stage2 {

template <typename T>
void softmax_04_online_vectorized(const SoftmaxArgs<T>& args, cudaStream_t stream) {
  softmax_online_streaming(args, core::vector_width(args.cols, sizeof(T), args.x, args.y), stream);
}

template void softmax_04_online_vectorized<float>(const SoftmaxArgs<float>&, cudaStream_t);
template void softmax_04_online_vectorized<__half>(const SoftmaxArgs<__half>&, cudaStream_t);
template void softmax_04_online_vectorized<__nv_bfloat16>(const SoftmaxArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
