// arch/sm90/wgmma_narrow.cuh — the narrower WGMMA shapes of the Hopper attention rungs and of the
// FP8 GEMM (the bf16 GEMM ladder uses only m64n256k16, arch/sm90/wgmma.cuh, whose fences and waits
// these share).
//
//   S = Q K^T    m64n128k16, A (Q) and B (K) both K-major in shared memory: 128 keys a tile.
//   O += P V     m64n{64,128}k16 with A (P) from registers and B (V) MN-major in shared memory:
//                N = D, the head dimension; K = 16 keys a step.
//   FP8 GEMM     m64n{128,192}k32, e4m3 A and B both K-major in shared memory: 32 one-byte
//                elements are the same 32 bytes of a 128-byte swizzled row as 16 bf16 (quant/fp8/).
//   INT8 GEMM    m64n256k32 and m64n128k32, s8 A and B K-major in shared memory, s32 accumulators
//                (quant/int8/).
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

#define KC_WGMMA_ACCUMULATOR_REGISTERS_32 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define KC_WGMMA_ACCUMULATOR_OPERANDS_32 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define KC_WGMMA_ACCUMULATOR_REGISTERS_64 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define KC_WGMMA_ACCUMULATOR_OPERANDS_64 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

#define KC_WGMMA_M64N128K16_SS(TYPE)                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {"                  \
               KC_WGMMA_ACCUMULATOR_REGISTERS_64 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"               \
               : KC_WGMMA_ACCUMULATOR_OPERANDS_64                                                  \
               : "l"(descriptor_a), "l"(descriptor_b), "r"(accumulate))

#define KC_WGMMA_M64N128K16_RS_TRANSPOSED_B(TYPE)                                                 \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {"                  \
               KC_WGMMA_ACCUMULATOR_REGISTERS_64 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"  \
               : KC_WGMMA_ACCUMULATOR_OPERANDS_64                                                  \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descriptor_b), "r"(accumulate))

#define KC_WGMMA_M64N64K16_RS_TRANSPOSED_B(TYPE)                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {"                   \
               KC_WGMMA_ACCUMULATOR_REGISTERS_32 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"  \
               : KC_WGMMA_ACCUMULATOR_OPERANDS_32                                                  \
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

// n192: the 64 registers of n128, then 32 more.
#define KC_WGMMA_ACCUMULATOR_REGISTERS_96 KC_WGMMA_ACCUMULATOR_REGISTERS_64 ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define KC_WGMMA_ACCUMULATOR_OPERANDS_96 KC_WGMMA_ACCUMULATOR_OPERANDS_64, \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])

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
                 : KC_WGMMA_ACCUMULATOR_OPERANDS_64
                 : "l"(descriptor_a), "l"(descriptor_b), "r"(accumulate));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 {"
                 KC_WGMMA_ACCUMULATOR_REGISTERS_96 "}, %96, %97, p, 1, 1;\n}\n"
                 : KC_WGMMA_ACCUMULATOR_OPERANDS_96
                 : "l"(descriptor_a), "l"(descriptor_b), "r"(accumulate));
  }
}

// n256: the 96 registers of n192, then 32 more.
#define KC_WGMMA_ACCUMULATOR_REGISTERS_128 KC_WGMMA_ACCUMULATOR_REGISTERS_96 ", " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

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
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
        "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
        "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
        "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]),
        "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]),
        "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]),
        "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]),
        "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]),
        "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]),
        "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]),
        "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]),
        "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]),
        "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]),
        "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]),
        "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]),
        "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
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
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
        "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
        "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
        "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]),
        "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]),
        "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]),
        "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]),
        "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
      : "l"(descriptor_a), "l"(descriptor_b), "r"(accumulate));
}

#undef KC_WGMMA_M64N128K16_SS
#undef KC_WGMMA_M64N128K16_RS_TRANSPOSED_B
#undef KC_WGMMA_M64N64K16_RS_TRANSPOSED_B
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_32
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_32
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_64
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_64
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_96
#undef KC_WGMMA_ACCUMULATOR_OPERANDS_96
#undef KC_WGMMA_ACCUMULATOR_REGISTERS_128

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3::sm90
