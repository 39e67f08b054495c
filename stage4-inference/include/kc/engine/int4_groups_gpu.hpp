// kc/engine/int4_groups_gpu.hpp — the engine's kernel for 4-bit groups on the GPU (the stored form
// of kc/stage3/gemv_int4_args.hpp, w = s (q - z)): their dequantization to bf16, the bf16 copy a
// random model in groups keeps beside them (kc-engine-bench --quantized int4-gN). Load-time work,
// never inside a step.
//
// The host reference is kc::stage3::dequantize_int4_groups_to_float rounded to bf16 to nearest
// even: the same values (a half times an integer of at most 5 bits is exact in float), one
// rounding.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kc/stage3/gemv_int4_args.hpp"

namespace kc::engine {

// out[n K + k] = s (q - z) of row n, weight k, rounded to bf16, for the stored form `w` in device
// memory. kc::Error before any launch for a shape the form cannot have (check_int4_group_weights)
// or an out that is null or not 2-byte aligned; asynchronous on `stream`.
void dequantize_int4_groups_on_device(const stage3::Int4GroupWeights& w, __nv_bfloat16* out, cudaStream_t stream);

}  // namespace kc::engine
