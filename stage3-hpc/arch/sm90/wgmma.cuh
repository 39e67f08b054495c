// arch/sm90/wgmma.cuh — WGMMA (wgmma.mma_async, sm_90a): a warpgroup of 128 threads multiplies
// a 64 x N x 16 block per instruction, reading A and B straight from shared memory through 64-bit
// matrix descriptors and accumulating into registers. It runs asynchronously: issued WGMMAs are
// committed as groups and waited for (wgmma.wait_group), and fences order the register accesses
// around them. The one shape the Hopper rungs use is m64n256k16, BF16 in, FP32 accumulators.
#pragma once

#include <cstdint>

#include "arch/sm90/sm90a.hpp"

namespace kc::stage3::sm90 {

#if KC_STAGE3_SM90A

// Shared-memory matrix descriptor of a K-major operand tile stored as 128-byte rows with the
// 128-byte swizzle (the layout TMA writes): start address >> 4 in bits 0-13; leading-dimension byte
// offset (unused for swizzled K-major layouts, conventionally 1) in bits 16-29; stride-dimension byte
// offset >> 4 in bits 32-45 = 1024 bytes between consecutive groups of 8 rows; swizzle mode 1
// (128-byte) in bits 62-63. Base offset (bits 49-51) is 0 because every tile is 1024-byte aligned.
// Advancing the start address by 32 bytes steps K by 16 inside the swizzled 64-wide row: the
// hardware applies the XOR on the final address bits.
__device__ __forceinline__ std::uint64_t smem_descriptor_sw128(std::uint32_t smem_address) {
  constexpr std::uint64_t kLeadingByteOffset = 16 >> 4;
  constexpr std::uint64_t kStrideByteOffset = 1024 >> 4;
  constexpr std::uint64_t kSwizzle128B = 1;
  return static_cast<std::uint64_t>((smem_address & 0x3FFFF) >> 4) | (kLeadingByteOffset << 16) |
         (kStrideByteOffset << 32) | (kSwizzle128B << 62);
}

// The same descriptor `bytes` further on in shared memory. The start address is held as
// address >> 4 in bits 0-13, so adding bytes >> 4 to the low word moves it: no carry leaves the
// field while the address stays inside the 256 KiB it spans, and the other fields are untouched.
// A kernel that makes its descriptors once and moves them this way pays one integer add a WGMMA
// operand, where building one from an address takes a mask, a shift, an or and moves of the
// constant fields (attention rung 12).
__device__ __forceinline__ std::uint64_t advance_descriptor(std::uint64_t descriptor, std::uint32_t bytes) {
  const std::uint32_t low = static_cast<std::uint32_t>(descriptor) + (bytes >> 4);
  return (descriptor & 0xFFFFFFFF00000000ull) | low;
}

// Orders earlier register accesses (e.g. zeroing the accumulators) before the next wgmma.mma_async.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most kPending committed WGMMA groups of this warp are still running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// The compiler sees the accumulators written when the wgmma is *issued*; they really change until
// wgmma.wait_group. After a wait, this empty statement "rewrites" every accumulator so no read of
// one can be scheduled above the wait.
template <int kCount>
__device__ __forceinline__ void fence_accumulators(float (&d)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The same for integer accumulators (the INT8 GEMM's s32 sums).
template <int kCount>
__device__ __forceinline__ void fence_accumulators(std::int32_t (&d)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// The same for 32-bit registers a WGMMA reads asynchronously (A fragments from registers): after
// the issue, so that no write to them can be scheduled before the wait that ends the read.
template <int kCount>
__device__ __forceinline__ void fence_operands(std::uint32_t (&a)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// D(64 x 256, FP32) += A(64 x 16, from shared) . B(16 x 256, from shared), both K-major BF16,
// issued by one warpgroup (128 threads). Thread t holds D in d[0..127]: for 8-column slice j,
// d[4j + 0..1] are row 16 (t / 32) + (t % 32) / 4, columns 8j + 2 (t % 4) + {0, 1}, and
// d[4j + 2..3] the same columns 8 rows further down. `accumulate` = 0 would ignore D's old value.
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], std::uint64_t descriptor_a,
                                                      std::uint64_t descriptor_b,
                                                      std::uint32_t accumulate = 1) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, "
      "%128, %129, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(descriptor_a), "l"(descriptor_b), "r"(accumulate));
}

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3::sm90
