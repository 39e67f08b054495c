// arch/sm90/wgmma_narrow.cuh — the narrower WGMMA shapes of the Hopper attention rungs and of the
// FP8 GEMM (the bf16 GEMM ladder uses only m64n256k16, arch/sm90/wgmma.cuh, whose fences and waits
// these share).
//
//   S = Q K^T    m64n128k16, A (Q) and B (K) both K-major in shared memory: 128 keys a tile
//                (m64n176k16 for rung 17's 176, m64n256k16 for rung 10's 256).
//   O += P V     m64n{64,128}k16 with A (P) from registers and B (V) MN-major in shared memory:
//                N = D, the head dimension; K = 16 keys a step.
//   FP8 GEMM     m64n{128,192}k32, e4m3 A and B both K-major in shared memory: 32 one-byte
//                elements are the same 32 bytes of a 128-byte swizzled row as 16 bf16 (quant/fp8/).
//   INT8 GEMM    m64n256k32 and m64n128k32, s8 A and B K-major in shared memory, s32 accumulators
//                (quant/int8/).
//   GGUF GEMV    m64n{8..64}k16 (rung 10) with A (the decoded weights) from registers and B (the
//                rows of x) K-major in shared memory.
//   small-M GEMM m64n{8..64}k16 (hgemm rung 15) with A (64 rows of the weights) and B (the tokens)
//                both K-major in shared memory.
//
// bf16 or f16 inputs (the template's T), or e4m3; FP32 accumulators. Accumulator layout (as for
// n256): thread t of the warpgroup holds, for 8-column slice j, d[4j + 0..1] = row 16 (t / 32) + (t % 32) / 4,
// columns 8j + 2 (t % 4) + {0, 1}, and d[4j + 2..3] the same columns 8 rows further down.
//
// A from registers: the 64 x 16 A block is four 16 x 16 slices, one per warp (rows 16 w ..), each
// in mma.sync m16n8k16's A layout: a[0] = (row g, k 2c..2c+1), a[1] = (row g + 8, same k),
// a[2] = (row g, k 2c + 8..), a[3] = (row g + 8, k 2c + 8..), g = lane / 4, c = lane % 4, the
// lower k in the low half. That is the accumulator layout of two adjacent 8-column slices, which
// is why P never leaves the registers between the two products.
//
// V is stored as TMA writes it: rows of keys, D contiguous (128-byte rows, 128-byte swizzle), so
// for O += P V its contiguous dimension is N, not K: the "MN-major" B layout, selected by the
// instruction's transpose-B immediate (16-bit types only) and described by a different reading of
// the descriptor's two offsets (smem_descriptor_sw128_mn_major).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/wgmma.cuh"

namespace kc::stage3::sm90 {

#if KC_STAGE3_SM90A

// Descriptor of an MN-major operand tile stored in 128-byte-swizzled rows of 64 16-bit elements
// along MN, one row per K index (V: a row per key). The 128-byte swizzle atom is 64 (MN) x 8 (K):
// the stride-dimension offset is the step between groups of 8 K rows (8 x 128 = 1024 bytes), the
// leading-dimension offset the step between 64-wide MN atoms: `mn_atom_bytes`, the distance to the
// next 64 columns (the next TMA box). Advancing the start address by 16 rows (2048 bytes) steps K
// by 16.
__device__ __forceinline__ std::uint64_t smem_descriptor_sw128_mn_major(std::uint32_t smem_address,
                                                                        std::uint32_t mn_atom_bytes) {
  constexpr std::uint64_t kStrideByteOffset = 1024 >> 4;
  constexpr std::uint64_t kSwizzle128B = 1;
  return static_cast<std::uint64_t>((smem_address & 0x3FFFF) >> 4) |
         (static_cast<std::uint64_t>((mn_atom_bytes >> 4) & 0x3FFF) << 16) | (kStrideByteOffset << 32) |
         (kSwizzle128B << 62);
}

// The accumulator registers of n8 .. n64 (4 .. 32 FP32 a thread), 4 more a step of 8 columns.
#define KC_WGMMA_ACCUMULATOR_REGISTERS_4 "%0, %1, %2, %3"
#define KC_WGMMA_ACCUMULATOR_REGISTERS_8 KC_WGMMA_ACCUMULATOR_REGISTERS_4 ", %4, %5, %6, %7"
#define KC_WGMMA_ACCUMULATOR_REGISTERS_12 KC_WGMMA_ACCUMULATOR_REGISTERS_8 ", %8, %9, %10, %11"
#define KC_WGMMA_ACCUMULATOR_REGISTERS_16 KC_WGMMA_ACCUMULATOR_REGISTERS_12 ", %12, %13, %14, %15"
#define KC_WGMMA_ACCUMULATOR_REGISTERS_20 KC_WGMMA_ACCUMULATOR_REGISTERS_16 ", %16, %17, %18, %19"
#define KC_WGMMA_ACCUMULATOR_REGISTERS_24 KC_WGMMA_ACCUMULATOR_REGISTERS_20 ", %20, %21, %22, %23"
#define KC_WGMMA_ACCUMULATOR_REGISTERS_28 KC_WGMMA_ACCUMULATOR_REGISTERS_24 ", %24, %25, %26, %27"
#define KC_WGMMA_ACCUMULATOR_REGISTERS_32 KC_WGMMA_ACCUMULATOR_REGISTERS_28 ", %28, %29, %30, %31"
// The accumulator operands, constraint C: "+f" (FP32 accumulators) or "+r" (s32).
#define KC_WGMMA_ACCUMULATOR_OPERANDS_4(C) C(d[0]), C(d[1]), C(d[2]), C(d[3])
#define KC_WGMMA_ACCUMULATOR_OPERANDS_8(C) KC_WGMMA_ACCUMULATOR_OPERANDS_4(C), C(d[4]), C(d[5]), C(d[6]), C(d[7])
#define KC_WGMMA_ACCUMULATOR_OPERANDS_12(C) KC_WGMMA_ACCUMULATOR_OPERANDS_8(C), C(d[8]), C(d[9]), C(d[10]), C(d[11])
#define KC_WGMMA_ACCUMULATOR_OPERANDS_16(C) KC_WGMMA_ACCUMULATOR_OPERANDS_12(C), C(d[12]), C(d[13]), C(d[14]), C(d[15])
#define KC_WGMMA_ACCUMULATOR_OPERANDS_20(C) KC_WGMMA_ACCUMULATOR_OPERANDS_16(C), C(d[16]), C(d[17]), C(d[18]), C(d[19])
#define KC_WGMMA_ACCUMULATOR_OPERANDS_24(C) KC_WGMMA_ACCUMULATOR_OPERANDS_20(C), C(d[20]), C(d[21]), C(d[22]), C(d[23])
#define KC_WGMMA_ACCUMULATOR_OPERANDS_28(C) KC_WGMMA_ACCUMULATOR_OPERANDS_24(C), C(d[24]), C(d[25]), C(d[26]), C(d[27])
#define KC_WGMMA_ACCUMULATOR_OPERANDS_32(C) KC_WGMMA_ACCUMULATOR_OPERANDS_28(C), C(d[28]), C(d[29]), C(d[30]), C(d[31])
#define KC_WGMMA_ACCUMULATOR_REGISTERS_64 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define KC_WGMMA_ACCUMULATOR_OPERANDS_64(C) KC_WGMMA_ACCUMULATOR_OPERANDS_32(C), \
  C(d[32]), C(d[33]), C(d[34]), C(d[35]), C(d[36]), C(d[37]), C(d[38]), C(d[39]), \
  C(d[40]), C(d[41]), C(d[42]), C(d[43]), C(d[44]), C(d[45]), C(d[46]), C(d[47]), \
  C(d[48]), C(d[49]), C(d[50]), C(d[51]), C(d[52]), C(d[53]), C(d[54]), C(d[55]), \
  C(d[56]), C(d[57]), C(d[58]), C(d[59]), C(d[60]), C(d[61]), C(d[62]), C(d[63])

#define KC_WGMMA_M64N128K16_SS(TYPE)                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {"                  \
               KC_WGMMA_ACCUMULATOR_REGISTERS_64 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"               \
               : KC_WGMMA_ACCUMULATOR_OPERANDS_64("+f")                                           \
               : "l"(descriptor_a), "l"(descriptor_b), "r"(accumulate))

#define KC_WGMMA_M64N128K16_RS_TRANSPOSED_B(TYPE)                                                 \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {"                  \
               KC_WGMMA_ACCUMULATOR_REGISTERS_64 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"  \
               : KC_WGMMA_ACCUMULATOR_OPERANDS_64("+f")                                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descriptor_b), "r"(accumulate))

#define KC_WGMMA_M64N64K16_RS_TRANSPOSED_B(TYPE)                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {"                   \
               KC_WGMMA_ACCUMULATOR_REGISTERS_32 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"  \
               : KC_WGMMA_ACCUMULATOR_OPERANDS_32("+f")                                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descriptor_b), "r"(accumulate))

// D(64 x 128) += A(64 x 16) . B(16 x 128), A and B K-major in shared memory (S = Q K^T: A the
// warpgroup's 64 query rows, B 128 keys). `accumulate` = 0 ignores D's old value.
template <typename T>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], std::uint64_t descriptor_a,
                                                    std::uint64_t descriptor_b, std::uint32_t accumulate) {
  if constexpr (std::is_same_v<T, __half>)
    KC_WGMMA_M64N128K16_SS("f16");
  else
    KC_WGMMA_M64N128K16_SS("bf16");
}

// D(64 x N) += A(64 x 16, registers) . B(16 x N, MN-major in shared memory), N = 64 or 128
// (O += P V: A 16 keys of P, B 16 keys of V, N = D).
template <typename T, int N>
__device__ __forceinline__ void wgmma_m64nNk16_rs_transposed_b(float (&d)[N / 2], const std::uint32_t (&a)[4],
                                                               std::uint64_t descriptor_b,
                                                               std::uint32_t accumulate = 1) {
  static_assert(N == 64 || N == 128, "the attention rungs multiply P V with N = D = 64 or 128");
  if constexpr (N == 128) {
    if constexpr (std::is_same_v<T, __half>)
      KC_WGMMA_M64N128K16_RS_TRANSPOSED_B("f16");
    else
      KC_WGMMA_M64N128K16_RS_TRANSPOSED_B("bf16");
  } else {
    if constexpr (std::is_same_v<T, __half>)
      KC_WGMMA_M64N64K16_RS_TRANSPOSED_B("f16");
    else
      KC_WGMMA_M64N64K16_RS_TRANSPOSED_B("bf16");
  }
}

// n176: the 64 registers of n128, then 24 more (FlashAttention-3's key tile at D = 128).
#define KC_WGMMA_ACCUMULATOR_REGISTERS_88 KC_WGMMA_ACCUMULATOR_REGISTERS_64 ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87"
#define KC_WGMMA_ACCUMULATOR_OPERANDS_88(C) KC_WGMMA_ACCUMULATOR_OPERANDS_64(C), \
  C(d[64]), C(d[65]), C(d[66]), C(d[67]), C(d[68]), C(d[69]), C(d[70]), C(d[71]), C(d[72]), C(d[73]), C(d[74]), C(d[75]), C(d[76]), C(d[77]), C(d[78]), C(d[79]), C(d[80]), C(d[81]), C(d[82]), C(d[83]), C(d[84]), C(d[85]), C(d[86]), C(d[87])

#define KC_WGMMA_M64N176K16_SS(TYPE)                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n176k16.f32." TYPE "." TYPE " {"                  \
               KC_WGMMA_ACCUMULATOR_REGISTERS_88 "}, %88, %89, p, 1, 1, 0, 0;\n}\n"               \
               : KC_WGMMA_ACCUMULATOR_OPERANDS_88("+f")                                           \
               : "l"(descriptor_a), "l"(descriptor_b), "r"(accumulate))

// D(64 x 176) += A(64 x 16) . B(16 x 176), both K-major in shared memory (S = Q K^T over a 176-key
// tile: attention rung 17 at D = 128). `accumulate` = 0 ignores D's old value.
template <typename T>
__device__ __forceinline__ void wgmma_m64n176k16_ss(float (&d)[88], std::uint64_t descriptor_a,
                                                    std::uint64_t descriptor_b, std::uint32_t accumulate) {
  if constexpr (std::is_same_v<T, __half>)
    KC_WGMMA_M64N176K16_SS("f16");
  else
    KC_WGMMA_M64N176K16_SS("bf16");
}

// n192: the 64 registers of n128, then 32 more.
#define KC_WGMMA_ACCUMULATOR_REGISTERS_96 KC_WGMMA_ACCUMULATOR_REGISTERS_64 ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define KC_WGMMA_ACCUMULATOR_OPERANDS_96(C) KC_WGMMA_ACCUMULATOR_OPERANDS_64(C), \
  C(d[64]), C(d[65]), C(d[66]), C(d[67]), C(d[68]), C(d[69]), C(d[70]), C(d[71]), \
  C(d[72]), C(d[73]), C(d[74]), C(d[75]), C(d[76]), C(d[77]), C(d[78]), C(d[79]), \
  C(d[80]), C(d[81]), C(d[82]), C(d[83]), C(d[84]), C(d[85]), C(d[86]), C(d[87]), \
  C(d[88]), C(d[89]), C(d[90]), C(d[91]), C(d[92]), C(d[93]), C(d[94]), C(d[95])

// D(64 x N) += A(64 x 32) . B(32 x N), N = 128 or 192, FP8 e4m3 A and B K-major in shared memory
// (FP8 WGMMA has no transpose: both operands must be K-major). Same descriptors and accumulator
// layout as the 16-bit shapes; the K step is 32 elements = 32 bytes. `accumulate` = 0 ignores D's
// old value. The tensor cores keep the sum of an FP8 product in fewer bits than FP32 (the FP8
// GEMM's kernel header says what that costs and how the kernel promotes partial sums).
template <int N>
__device__ __forceinline__ void wgmma_m64nNk32_e4m3(float (&d)[N / 2], std::uint64_t descriptor_a,
                                                   std::uint64_t descriptor_b, std::uint32_t accumulate) {
  static_assert(N == 128 || N == 192, "the FP8 GEMM's tiles are 128 or 192 columns wide");
  if constexpr (N == 128) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
                 KC_WGMMA_ACCUMULATOR_REGISTERS_64 "}, %64, %65, p, 1, 1;\n}\n"
                 : KC_WGMMA_ACCUMULATOR_OPERANDS_64("+f")
                 : "l"(descriptor_a), "l"(descriptor_b), "r"(accumulate));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 {"
                 KC_WGMMA_ACCUMULATOR_REGISTERS_96 "}, %96, %97, p, 1, 1;\n}\n"
                 : KC_WGMMA_ACCUMULATOR_OPERANDS_96("+f")
                 : "l"(descriptor_a), "l"(descriptor_b), "r"(accumulate));
  }
}

// n256: the 96 registers of n192, then 32 more.
#define KC_WGMMA_ACCUMULATOR_REGISTERS_128 KC_WGMMA_ACCUMULATOR_REGISTERS_96 ", " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define KC_WGMMA_ACCUMULATOR_OPERANDS_128(C) KC_WGMMA_ACCUMULATOR_OPERANDS_96(C), \
  C(d[96]), C(d[97]), C(d[98]), C(d[99]), C(d[100]), C(d[101]), C(d[102]), C(d[103]), \
  C(d[104]), C(d[105]), C(d[106]), C(d[107]), C(d[108]), C(d[109]), C(d[110]), C(d[111]), \
  C(d[112]), C(d[113]), C(d[114]), C(d[115]), C(d[116]), C(d[117]), C(d[118]), C(d[119]), \
  C(d[120]), C(d[121]), C(d[122]), C(d[123]), C(d[124]), C(d[125]), C(d[126]), C(d[127])

#define KC_WGMMA_M64N256K16_SS(TYPE)                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                      \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {"                  \
               KC_WGMMA_ACCUMULATOR_REGISTERS_128 "}, %128, %129, p, 1, 1, 0, 0;\n}\n"           \
               : KC_WGMMA_ACCUMULATOR_OPERANDS_128("+f")                                          \
               : "l"(descriptor_a), "l"(descriptor_b), "r"(accumulate))

// D(64 x 256) += A(64 x 16) . B(16 x 256), both K-major in shared memory (S = Q K^T over a
// 256-key tile: attention rung 10 at D = 64). `accumulate` = 0 ignores D's old value.
template <typename T>
__device__ __forceinline__ void wgmma_m64n256k16_ss(float (&d)[128], std::uint64_t descriptor_a,
                                                    std::uint64_t descriptor_b, std::uint32_t accumulate) {
  if constexpr (std::is_same_v<T, __half>)
    KC_WGMMA_M64N256K16_SS("f16");
  else
    KC_WGMMA_M64N256K16_SS("bf16");
}

// D(64 x 256, s32) += A(64 x 32) . B(32 x 256), s8 A and B K-major in shared memory (the INT8
// GEMM, quant/int8/). Integer WGMMA has no scale or transpose immediates: exact 32-bit sums of
// 8-bit products, nothing lost; `accumulate` = 0 ignores D's old value. Same descriptors (32 bytes
// a K step) and accumulator layout as the FP32 shapes, the values int32.
__device__ __forceinline__ void wgmma_m64n256k32_s8(std::int32_t (&d)[128], std::uint64_t descriptor_a,
                                                    std::uint64_t descriptor_b, std::uint32_t accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {" KC_WGMMA_ACCUMULATOR_REGISTERS_128
      "}, %128, %129, p;\n}\n"
      : KC_WGMMA_ACCUMULATOR_OPERANDS_128("+r")
      : "l"(descriptor_a), "l"(descriptor_b), "r"(accumulate));
}

// D(64 x 128, s32) += A(64 x 32) . B(32 x 128), s8 (the INT8 GEMM's rung 04, whose consumer
// warpgroups each compute a 128 x 128 tile as two m64 halves). As the n256 form above.
__device__ __forceinline__ void wgmma_m64n128k32_s8(std::int32_t (&d)[64], std::uint64_t descriptor_a,
                                                    std::uint64_t descriptor_b, std::uint32_t accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {" KC_WGMMA_ACCUMULATOR_REGISTERS_64
      "}, %64, %65, p;\n}\n"
      : KC_WGMMA_ACCUMULATOR_OPERANDS_64("+r")
      : "l"(descriptor_a), "l"(descriptor_b), "r"(accumulate));
}

// One narrow RS shape: N as a string, R = N / 2 accumulators, then the operand numbers of a[0..3],
// descriptor_b and accumulate (R .. R + 5: the accumulators come first).
#define KC_WGMMA_M64NK16_RS_BF16(N, R, A0, A1, A2, A3, B, ACC)                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" ACC ", 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n" N "k16.f32.bf16.bf16 {" KC_WGMMA_ACCUMULATOR_REGISTERS_##R  \
               "}, {%" A0 ", %" A1 ", %" A2 ", %" A3 "}, %" B ", p, 1, 1, 0;\n}\n"                          \
               : KC_WGMMA_ACCUMULATOR_OPERANDS_##R("+f")                                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descriptor_b), "r"(accumulate))

// D(64 x N) += A(64 x 16, registers) . B(16 x N, K-major in shared memory), N a multiple of 8 up to
// 64 (the GGUF GEMV's rung 10, quant/10_gemv_gguf_wgmma.cu: A the decoded weights of 64 output
// columns, each warp's 16 x 16 slice in mma.sync's A layout as above; B 16 k of the N rows of x,
// K-contiguous, so the transpose-B immediate is 0). `accumulate` = 0 ignores D's old value.
template <int N>
__device__ __forceinline__ void wgmma_m64nNk16_rs_bf16(float (&d)[N / 2], const std::uint32_t (&a)[4],
                                                      std::uint64_t descriptor_b, std::uint32_t accumulate) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 64, "N: a multiple of 8 up to 64");
  if constexpr (N == 8) KC_WGMMA_M64NK16_RS_BF16("8", 4, "4", "5", "6", "7", "8", "9");
  else if constexpr (N == 16) KC_WGMMA_M64NK16_RS_BF16("16", 8, "8", "9", "10", "11", "12", "13");
  else if constexpr (N == 24) KC_WGMMA_M64NK16_RS_BF16("24", 12, "12", "13", "14", "15", "16", "17");
  else if constexpr (N == 32) KC_WGMMA_M64NK16_RS_BF16("32", 16, "16", "17", "18", "19", "20", "21");
  else if constexpr (N == 40) KC_WGMMA_M64NK16_RS_BF16("40", 20, "20", "21", "22", "23", "24", "25");
  else if constexpr (N == 48) KC_WGMMA_M64NK16_RS_BF16("48", 24, "24", "25", "26", "27", "28", "29");
  else if constexpr (N == 56) KC_WGMMA_M64NK16_RS_BF16("56", 28, "28", "29", "30", "31", "32", "33");
  else if constexpr (N == 64) KC_WGMMA_M64NK16_RS_BF16("64", 32, "32", "33", "34", "35", "36", "37");
}

// One narrow SS shape: N as a string, R = N / 2 accumulators, then the operand numbers of
// descriptor_a, descriptor_b and accumulate (R .. R + 2).
#define KC_WGMMA_M64NK16_SS_BF16(N, R, A, B, ACC)                                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" ACC ", 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n" N "k16.f32.bf16.bf16 {" KC_WGMMA_ACCUMULATOR_REGISTERS_##R  \
               "}, %" A ", %" B ", p, 1, 1, 0, 0;\n}\n"                                                    \
               : KC_WGMMA_ACCUMULATOR_OPERANDS_##R("+f")                                                 \
               : "l"(descriptor_a), "l"(descriptor_b), "r"(accumulate))

// D(64 x N) += A(64 x 16) . B(16 x N), N a multiple of 8 up to 64, A and B both K-major bf16 in
// shared memory (hgemm rung 15, gemm/15_small_m_tma_wgmma.cu: A 64 rows of the weights, B the
// tokens, rows of A in the GEMM's terms). `accumulate` = 0 ignores D's old value.
template <int N>
__device__ __forceinline__ void wgmma_m64nNk16_ss_bf16(float (&d)[N / 2], std::uint64_t descriptor_a,
                                                      std::uint64_t descriptor_b, std::uint32_t accumulate) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 64, "N: a multiple of 8 up to 64");
  if constexpr (N == 8) KC_WGMMA_M64NK16_SS_BF16("8", 4, "4", "5", "6");
  else if constexpr (N == 16) KC_WGMMA_M64NK16_SS_BF16("16", 8, "8", "9", "10");
  else if constexpr (N == 24) KC_WGMMA_M64NK16_SS_BF16("24", 12, "12", "13", "14");
  else if constexpr (N == 32) KC_WGMMA_M64NK16_SS_BF16("32", 16, "16", "17", "18");
  else if constexpr (N == 40) KC_WGMMA_M64NK16_SS_BF16("40", 20, "20", "21", "22");
  else if constexpr (N == 48) KC_WGMMA_M64NK16_SS_BF16("48", 24, "24", "25", "26");
  else if constexpr (N == 56) KC_WGMMA_M64NK16_SS_BF16("56", 28, "28", "29", "30");
  else if constexpr (N == 64) KC_WGMMA_M64NK16_SS_BF16("64", 32, "32", "33", "34");
}

#undef KC_WGMMA_M64N128K16_SS
#undef KC_WGMMA_M64NK16_RS_BF16
#undef KC_WGMMA_M64NK16_SS_BF16
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_4
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_4
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_8
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_8
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_12
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_12
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_16
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_16
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_20
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_20
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_24
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_24
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_28
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_28
#undef KC_WGMMA_M64N128K16_RS_TRANSPOSED_B
#undef KC_WGMMA_M64N64K16_RS_TRANSPOSED_B
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_32
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_32
#undef KC_WGMMA_M64N256K16_SS
#undef KC_WGMMA_M64N176K16_SS
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_88
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_88
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_64
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_64
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_96
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_96
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_128
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_128

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3::sm90
