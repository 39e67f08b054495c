// RMSNorm rung 04 — 16-byte vector loads and stores.
//
// Idea: each access moves 16 bytes (8 bf16/fp16 or 4 float; LDG.E.128 / STG.E.128), so a warp
// moves 512 bytes per instruction and a thread needs a quarter to an eighth of the load, store
// and address instructions of rung 03. Legal only when the row length is a multiple of the vector
// width and the pointers are 16-byte aligned: kc::core::vector_width() checks, and the kernel
// falls back to scalar accesses otherwise (e.g. cols = 4097).
//
// What changed from rung 03: nothing but the access width template argument — the same kernel.
//
// Expected limiter: DRAM bandwidth plus the second pass: x is read twice per row. The re-read of
// an 8 KB row that the block has just read mostly hits the L2, so it costs L2 bandwidth and
// latency rather than DRAM bytes — but it is a second round of waiting per row.
//
// Run just this rung:  kc-bench --filter 'stage2/rmsnorm/04_vectorized'
#include "kc/core/vector_io.hpp"
#include "rmsnorm_internal.cuh"

namespace kc::stage2 {

template <typename T>
void rmsnorm_04_vectorized(const RmsNormArgs<T>& args, cudaStream_t stream) {
  const int width = core::vector_width(args.cols, sizeof(T), args.x, args.weight, args.y);
  rmsnorm_streaming(core::PlainRow<T>{args.x}, args.weight, args.y, args.rows, args.cols, args.eps,
                    width, stream);
}

template void rmsnorm_04_vectorized<float>(const RmsNormArgs<float>&, cudaStream_t);
template void rmsnorm_04_vectorized<__half>(const RmsNormArgs<__half>&, cudaStream_t);
template void rmsnorm_04_vectorized<__nv_bfloat16>(const RmsNormArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
