// softmax_internal.cuh — the streaming online-softmax kernel of rungs 03 and 04 (and the fallback
// of rung 05 for rows too long to hold in registers). Instantiated in 03_online.cu.
#pragma once

#include <cuda_runtime.h>

#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {

// A block per row, two passes: the (max, sum) pair in one online pass, then the write.
// `width`: elements per access, 1 or kVectorWidth<T> (16 bytes).
template <typename T>
void softmax_online_streaming(const SoftmaxArgs<T>& args, int width, cudaStream_t stream);

}  // namespace kc::stage2
