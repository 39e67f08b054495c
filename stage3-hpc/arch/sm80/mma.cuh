// arch/sm80/mma.cuh — the two sm_80 tensor-core instructions the mma.sync rungs (GEMM 02, 03;
// attention 03, 04; INT8 GEMM 03) are built from: ldmatrix, which loads 8x8 tiles of 16-bit values
// from shared memory straight into the register layout mma.sync expects (.trans: transposed on the
// way, for an operand stored the other way round), and mma.sync m16n8k16 with BF16 or FP16 inputs
// and FP32 accumulators, or m16n8k32 with signed 8-bit inputs and 32-bit integer accumulators.
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

// The same four matrices transposed: lane l receives in register i the elements (rows 2(l%4) and
// 2(l%4)+1, column l/4) of matrix i as stored. For a B operand stored K-major (rows = k, columns
// = n, as V of attention's P.V is): each matrix of 8 k x 8 n becomes the "col" B fragment
// register (k 2(l%4), +1; n l/4) that mma.sync m16n8k16 expects.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&registers)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
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

// D = A.B + C with D and C apart (C read, D written): the compiler may give D other registers than
// A, B and C, where the form above ties D to C — a chain that starts from zero or reuses a
// fragment then costs no register moves. Not volatile: the compiler may schedule it.
__device__ __forceinline__ void mma_m16n8k16_bf16_into(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                                       std::uint32_t b1, const float (&c)[4]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// The same with FP16 inputs (IEEE half: 10 mantissa bits, range up to 65504), FP32 accumulators.
__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const std::uint32_t (&a)[4],
                                                 std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The FP16 product with D and C apart, as mma_m16n8k16_bf16_into.
__device__ __forceinline__ void mma_m16n8k16_f16_into(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                                      std::uint32_t b1, const float (&c)[4]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// D = A.B + D for one 16 x 8 x 32 block of signed 8-bit integers, exact 32-bit integer sums. The
// fragments hold the same bytes where the bf16 m16n8k16 ones do — a register is 4 s8 values where
// it was 2 bf16, so a 32-byte k-slice is 32 K-values instead of 16 — and ldmatrix (a mover of
// 16-byte rows, whatever they hold) loads them the same way: a0..a3 = (rows 0-7, k 0-15),
// (rows 8-15, k 0-15), (rows 0-7, k 16-31), (rows 8-15, k 16-31), lane l holding row l/4,
// k 4(l%4) .. 4(l%4)+3; b0, b1 = k 0-15 and k 16-31 of column l/4; d as the FP32 form's.
__device__ __forceinline__ void mma_m16n8k32_s8(std::int32_t (&d)[4], const std::uint32_t (&a)[4],
                                                std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace kc::stage3::sm80
