// rmsnorm_internal.cuh — the two RMSNorm kernels that other ops reuse with another RowSource
// (residual_rmsnorm feeds them x + residual). Instantiated in 03_warp_shuffle.cu and
// 05_row_in_registers.cu for PlainRow<T> and CombinedRow<T, Add>.
#pragma once

#include <cuda_runtime.h>

#include "kc/core/row_source.cuh"
#include "kc/core/vector_io.hpp"
#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {

// A block per row streams the row twice: sum of squares, block reduction, then reload and scale.
// `width`: elements per access, 1 or kVectorWidth<T> (16 bytes).
template <typename T, class Source>
void rmsnorm_streaming(const Source& source, const T* weight, T* y, int rows, int cols, float eps,
                       int width, cudaStream_t stream);

// The row is read once into registers (a warp or a block per row, by length) and written from
// there. Rows too long to hold fall back to rmsnorm_streaming.
template <typename T, class Source>
void rmsnorm_in_registers(const Source& source, const T* weight, T* y, int rows, int cols,
                          float eps, int width, cudaStream_t stream);

// residual_rmsnorm's source: x + residual, stored to `sum` as it is read.
template <typename T>
core::CombinedRow<T> residual_source(const ResidualRmsNormArgs<T>& args) {
  return {args.x, args.residual, args.sum, core::Add{}};
}

// The access width residual_rmsnorm may use: every one of its five tensors must allow it.
template <typename T>
int residual_vector_width(const ResidualRmsNormArgs<T>& args) {
  return core::vector_width(args.cols, sizeof(T), args.x, args.residual, args.weight, args.sum, args.y);
}

}  // namespace kc::stage2
