// Playground — your tensor-core GEMM rung: C = alpha.A.B^T + beta.C, bf16 in and out, FP32
// accumulation, A M x K, B N x K ("TN"), row-major; K is a multiple of 8.
//
// Write the kernel, launch it from my_hgemm(), and make my_hgemm_written() return true. Then
//   kc-bench --filter playground/hgemm/my_hgemm --check-only
//   kc-bench --filter playground/hgemm/my_hgemm                  # against cuBLAS GemmEx
//   ctest --test-dir build/ci -L playground
// bf16 results are judged to one rounding: 2^-8 |ref| + 2^-8 rms(ref) per element. Start from
// stage3-hpc/gemm/01_wmma.cu (nvcuda::wmma 16x16x16 fragments), then mma.sync (02, 03).
#include "kc/playground/playground.hpp"

namespace kc::playground {
namespace {

__global__ void my_hgemm_kernel(GemmArgs<__nv_bfloat16> args) {
  // TODO: e.g. one warp per 16 x 16 tile of C with wmma::fragment<...> and wmma::mma_sync.
  (void)args;
}

}  // namespace

bool my_hgemm_written() { return false; }

void my_hgemm(const GemmArgs<__nv_bfloat16>& args, cudaStream_t stream) {
  const dim3 grid((args.n + 15) / 16, (args.m + 15) / 16);
  my_hgemm_kernel<<<grid, 32, 0, stream>>>(args);
}

}  // namespace kc::playground
