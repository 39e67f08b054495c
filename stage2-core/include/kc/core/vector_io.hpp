// kc/core/vector_io.hpp — 16-byte loads and stores, and when a kernel may use them.
//
// A memory-bound kernel is fast when every warp-wide memory instruction moves 512 bytes: 32 lanes
// x 16 bytes (LDG.E.128 / STG.E.128). Scalar bf16 loads move 64 bytes per instruction and need
// eight times as many instructions, load-store queue slots and address computations for the
// same traffic. A 16-byte access is legal only at an address that is a multiple of 16, so a row
// kernel may vectorize only when the row length is a multiple of the vector width and every base
// pointer (and row stride) is aligned: vector_width() makes that decision once, on the host.
//
// Device functions: load_vector / store_vector move N elements with as few instructions as their
// size allows (one 16-byte access for 8 bf16 or 4 float); load_floats / store_floats also widen
// to float and round back through DTypeTraits. Host-safe: the device functions compile as plain
// functions in host code.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kc/core/dtype_traits.hpp"
#include "kc/core/tensor_view.hpp"

namespace kc::core {

inline constexpr int kVectorBytes = 16;

// Elements of T in one 16-byte access: 8 bf16/fp16, 4 float, 16 fp8.
template <typename T>
inline constexpr int kVectorWidth = kVectorBytes / static_cast<int>(sizeof(T));

template <typename T, int N>
struct Vector {
  T elements[N];
  __host__ __device__ T& operator[](int i) { return elements[i]; }
  __host__ __device__ const T& operator[](int i) const { return elements[i]; }
};

// ---- host: may this access be vectorized? ----------------------------------------------------

inline bool is_aligned(const void* pointer, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

// The widest access (in elements: a power of two, at most 16 bytes) that tiles a row of `cols`
// elements exactly and that every one of `pointers` is aligned for. 1 means scalar.
template <typename... Pointee>
int vector_width(std::int64_t cols, int element_bytes, const Pointee*... pointers) {
  int width = kVectorBytes / element_bytes;
  while (width > 1) {
    const auto bytes = static_cast<std::size_t>(width) * static_cast<std::size_t>(element_bytes);
    if (cols % width == 0 && (is_aligned(pointers, bytes) && ...)) break;
    width /= 2;
  }
  return width < 1 ? 1 : width;
}

// True when `width`-element accesses along the rows of `matrix` are legal: unit column stride,
// rows and row stride multiples of the width (stride 0, a broadcast, is fine), aligned base.
template <typename T>
bool can_vectorize(const MatrixView<T>& matrix, int width) {
  using Element = std::remove_const_t<T>;
  return matrix.stride[1] == 1 && matrix.shape[1] % width == 0 && matrix.stride[0] % width == 0 &&
         is_aligned(matrix.data, static_cast<std::size_t>(width) * sizeof(Element));
}

// ---- device: the accesses themselves ---------------------------------------------------------

namespace detail {
// The integer type the hardware moves in one access of kBytes bytes.
template <int kBytes> struct Carrier;
template <> struct Carrier<1> { using type = unsigned char; };
template <> struct Carrier<2> { using type = unsigned short; };
template <> struct Carrier<4> { using type = unsigned int; };
template <> struct Carrier<8> { using type = uint2; };
template <> struct Carrier<16> { using type = uint4; };
}  // namespace detail

// N elements from `source`, which must be aligned to min(16, N * sizeof(T)) bytes. Larger vectors
// are split into 16-byte accesses.
template <typename T, int N>
__host__ __device__ __forceinline__ Vector<T, N> load_vector(const T* source) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  constexpr int kChunk = kBytes < kVectorBytes ? kBytes : kVectorBytes;
  static_assert(kBytes % kChunk == 0, "a vector is a whole number of accesses");
  using Word = typename detail::Carrier<kChunk>::type;
  Word words[kBytes / kChunk];
#pragma unroll
  for (int i = 0; i < kBytes / kChunk; ++i) words[i] = reinterpret_cast<const Word*>(source)[i];
  Vector<T, N> result;
  std::memcpy(&result, words, kBytes);
  return result;
}

template <typename T, int N>
__host__ __device__ __forceinline__ void store_vector(T* destination, const Vector<T, N>& value) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  constexpr int kChunk = kBytes < kVectorBytes ? kBytes : kVectorBytes;
  static_assert(kBytes % kChunk == 0, "a vector is a whole number of accesses");
  using Word = typename detail::Carrier<kChunk>::type;
  Word words[kBytes / kChunk];
  std::memcpy(words, &value, kBytes);
#pragma unroll
  for (int i = 0; i < kBytes / kChunk; ++i) reinterpret_cast<Word*>(destination)[i] = words[i];
}

// Widens N elements to float.
//
// bf16 is the upper half of a float, so each 32-bit word holding two bf16 widens with one integer
// instruction per element: a shift for the low element, a mask for the high one. Converting each
// element on its own (__bfloat162float) costs three instructions per pair (the high element is
// moved down by a PRMT and shifted back up), and in a kernel bound by instruction issue that
// difference shows. Both give the same bits (the widening is exact).
template <typename T, int N>
__host__ __device__ __forceinline__ void widen_to_floats(const Vector<T, N>& v, float (&out)[N]) {
  if constexpr (std::is_same_v<std::remove_cv_t<T>, __nv_bfloat16> && N % 2 == 0) {
    std::uint32_t words[N / 2];
    std::memcpy(words, &v, sizeof(words));
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {  // element 2i is the low half (little-endian)
      const std::uint32_t low = words[i] << 16;
      const std::uint32_t high = words[i] & 0xffff0000u;
      std::memcpy(&out[2 * i], &low, sizeof(float));
      std::memcpy(&out[2 * i + 1], &high, sizeof(float));
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = to_float(v[i]);
  }
}

// Loads N elements and widens them to float.
template <typename T, int N>
__host__ __device__ __forceinline__ void load_floats(const T* source, float (&out)[N]) {
  widen_to_floats<T, N>(load_vector<T, N>(source), out);
}

// Rounds N floats to T and stores them.
template <typename T, int N>
__host__ __device__ __forceinline__ void store_floats(T* destination, const float (&in)[N]) {
  Vector<T, N> v;
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = from_float<T>(in[i]);
  store_vector<T, N>(destination, v);
}

}  // namespace kc::core
