// The engine's own kernels (kc/engine/engine_kernels.hpp): cache writes and gathers move 16-byte
// pieces (8 bf16), one thread a piece; the greedy choice is one block a row.
#include "kc/engine/engine_kernels.hpp"

#include <cub/block/block_reduce.cuh>

#include <cstdint>

#include "kc/common/error.hpp"

namespace kc::engine {
namespace {

constexpr int kThreads = 256;
constexpr int kPiece = 8;  // bf16 elements in 16 bytes

void require_rows(int head_dim, const void* const* pointers, int count, const char* what) {
  require(head_dim >= kPiece && head_dim % kPiece == 0, "{}: head_dim {} must be a positive multiple of 8", what,
          head_dim);
  for (int i = 0; i < count; ++i)
    require(pointers[i] != nullptr && reinterpret_cast<std::uintptr_t>(pointers[i]) % 16 == 0,
            "{}: every pointer must be non-null and 16-byte aligned", what);
}

unsigned blocks_for(std::int64_t pieces) { return static_cast<unsigned>((pieces + kThreads - 1) / kThreads); }

__global__ void write_kv_cache_kernel(const uint4* k, const uint4* v, const std::int32_t* slots, int tokens,
                                      int kv_heads, int pieces_per_row, int block_size, uint4* k_cache,
                                      uint4* v_cache) {
  const std::int64_t pieces_per_token = static_cast<std::int64_t>(kv_heads) * pieces_per_row;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * pieces_per_token) return;
  const int token = static_cast<int>(i / pieces_per_token);
  const std::int64_t within = i % pieces_per_token;
  const int head = static_cast<int>(within / pieces_per_row), piece = static_cast<int>(within % pieces_per_row);
  const std::int32_t slot = slots[token];
  if (slot < 0) return;
  const std::int64_t block = slot / block_size, row = slot % block_size;
  const std::int64_t to = ((block * kv_heads + head) * block_size + row) * pieces_per_row + piece;
  k_cache[to] = k[i];
  v_cache[to] = v[i];
}

__global__ void gather_kv_pages_kernel(const uint4* k_cache, const uint4* v_cache, const std::int32_t* block_table,
                                       int length, int kv_heads, int pieces_per_row, int block_size, uint4* k_out,
                                       uint4* v_out) {
  const std::int64_t pieces_per_head = static_cast<std::int64_t>(length) * pieces_per_row;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= kv_heads * pieces_per_head) return;
  const int head = static_cast<int>(i / pieces_per_head);
  const std::int64_t within = i % pieces_per_head;
  const int position = static_cast<int>(within / pieces_per_row), piece = static_cast<int>(within % pieces_per_row);
  const std::int64_t block = block_table[position / block_size], row = position % block_size;
  const std::int64_t from = ((block * kv_heads + head) * block_size + row) * pieces_per_row + piece;
  k_out[i] = k_cache[from];
  v_out[i] = v_cache[from];
}

__global__ void gather_rows_kernel(const bf16* x, const std::int32_t* rows, int count, int cols, bf16* out) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<std::int64_t>(count) * cols) return;
  const std::int64_t r = i / cols, c = i % cols;
  out[i] = x[static_cast<std::int64_t>(rows[r]) * cols + c];
}

// One block a row: each thread keeps the best (value, index) of its strided elements, then a block
// reduction keeps the larger value, the lower index on a tie. A NaN anywhere makes the row -1.
struct Best {
  float value;
  int index;
  int has_nan;
};
struct KeepBest {
  __device__ Best operator()(const Best& a, const Best& b) const {
    Best best = (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;
    best.has_nan = a.has_nan | b.has_nan;
    return best;
  }
};

__global__ void __launch_bounds__(kThreads) argmax_rows_kernel(const bf16* logits, int cols, std::int32_t* out) {
  const bf16* row = logits + static_cast<std::int64_t>(blockIdx.x) * cols;
  Best best{-INFINITY, cols, 0};
  for (int c = threadIdx.x; c < cols; c += kThreads) {
    const float value = __bfloat162float(row[c]);
    if (value != value) best.has_nan = 1;
    else if (value > best.value || (value == best.value && c < best.index)) best = Best{value, c, best.has_nan};
  }
  using Reduce = cub::BlockReduce<Best, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const Best result = Reduce(storage).Reduce(best, KeepBest{});
  if (threadIdx.x == 0) out[blockIdx.x] = result.has_nan ? -1 : (result.index < cols ? result.index : 0);
}

}  // namespace

void write_kv_cache(const bf16* k, const bf16* v, const std::int32_t* slots, int tokens, int kv_heads,
                    int head_dim, int block_size, bf16* k_cache, bf16* v_cache, cudaStream_t stream) {
  const void* pointers[] = {k, v, k_cache, v_cache};
  require_rows(head_dim, pointers, 4, "write_kv_cache");
  require(slots != nullptr && tokens >= 1 && kv_heads >= 1 && block_size >= 1,
          "write_kv_cache: slots must be non-null and tokens, kv_heads, block_size >= 1");
  const int pieces_per_row = head_dim / kPiece;
  write_kv_cache_kernel<<<blocks_for(static_cast<std::int64_t>(tokens) * kv_heads * pieces_per_row), kThreads, 0,
                          stream>>>(reinterpret_cast<const uint4*>(k), reinterpret_cast<const uint4*>(v), slots,
                                    tokens, kv_heads, pieces_per_row, block_size,
                                    reinterpret_cast<uint4*>(k_cache), reinterpret_cast<uint4*>(v_cache));
  KC_CUDA_CHECK(cudaGetLastError());
}

void gather_kv_pages(const bf16* k_cache, const bf16* v_cache, const std::int32_t* block_table, int length,
                     int kv_heads, int head_dim, int block_size, bf16* k_out, bf16* v_out, cudaStream_t stream) {
  const void* pointers[] = {k_cache, v_cache, k_out, v_out};
  require_rows(head_dim, pointers, 4, "gather_kv_pages");
  require(block_table != nullptr && length >= 1 && kv_heads >= 1 && block_size >= 1,
          "gather_kv_pages: block_table must be non-null and length, kv_heads, block_size >= 1");
  const int pieces_per_row = head_dim / kPiece;
  gather_kv_pages_kernel<<<blocks_for(static_cast<std::int64_t>(length) * kv_heads * pieces_per_row), kThreads, 0,
                           stream>>>(reinterpret_cast<const uint4*>(k_cache), reinterpret_cast<const uint4*>(v_cache),
                                     block_table, length, kv_heads, pieces_per_row, block_size,
                                     reinterpret_cast<uint4*>(k_out), reinterpret_cast<uint4*>(v_out));
  KC_CUDA_CHECK(cudaGetLastError());
}

void gather_rows(const bf16* x, const std::int32_t* rows, int count, int cols, bf16* out, cudaStream_t stream) {
  require(x != nullptr && rows != nullptr && out != nullptr && count >= 1 && cols >= 1,
          "gather_rows: x, rows and out must be non-null and count, cols >= 1");
  gather_rows_kernel<<<blocks_for(static_cast<std::int64_t>(count) * cols), kThreads, 0, stream>>>(x, rows, count,
                                                                                                   cols, out);
  KC_CUDA_CHECK(cudaGetLastError());
}

void argmax_rows(const bf16* logits, int rows, int cols, std::int32_t* out, cudaStream_t stream) {
  require(logits != nullptr && out != nullptr && rows >= 1 && cols >= 1,
          "argmax_rows: logits and out must be non-null and rows, cols >= 1");
  argmax_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, cols, out);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::engine
