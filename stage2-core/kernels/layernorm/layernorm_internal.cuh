// layernorm_internal.cuh — the streaming LayerNorm kernel of rungs 02 and 03 (and the fallback of
// rung 04 for rows too long to hold in registers). Instantiated in 02_warp_shuffle.cu.
#pragma once

#include <cuda_runtime.h>

#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {

// A block per row, three passes over the row: mean, variance around the mean, normalize.
// `width`: elements per access, 1 or kVectorWidth<T> (16 bytes).
template <typename T>
void layernorm_streaming(const LayerNormArgs<T>& args, int width, cudaStream_t stream);

}  // namespace kc::stage2
