// arch/sm80/mma.cuh — the two sm_80 tensor-core instructions the mma.sync rungs (02, 03) are built
// from: ldmatrix, which loads 8x8 tiles of 16-bit values from shared memory straight into the
// register layout mma.sync expects, and mma.sync m16n8k16 with BF16 inputs and FP32 accumulators.
// Both are warp-wide: all 32 lanes execute them together. They exist on sm_80 and every later
// architecture, so both compilation passes (sm_80 and sm_90a) have them.
#pragma once

#include <cstdint>

namespace kc::stage3::sm80 {

// Four 8x8 b16 matrices from shared memory; lane l supplies the row address of matrix l/8, and
// receives in register i its share (row l/4, elements 2(l%4), +1) of matrix i.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&registers)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(registers[0]), "=r"(registers[1]), "=r"(registers[2]), "=r"(registers[3])
               : "r"(address));
}

// D = A.B + D for one 16 x 8 x 16 block: A row-major fragment (4 registers), B "col" fragment
// (K-contiguous, 2 registers), FP32 accumulators.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const std::uint32_t (&a)[4],
                                                  std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace kc::stage3::sm80
