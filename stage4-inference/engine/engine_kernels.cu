// The engine's own kernels (kc/engine/engine_kernels.hpp): cache writes and gathers move 16-byte
// pieces (8 bf16), one thread a piece; the greedy choice is one block a row, or a cluster of 8
// CTAs a row where the rows are few (Hopper). The kernels of the
// decode step (RoPE + cache write, the row gather, the greedy choice) keep the contract of
// kc/core/dependent_launch.hpp — they wait for the previous kernel before touching memory — and
// launch through core::launch_dependent: as programmatic dependents inside the step's
// core::ProgrammaticLaunchScope (RunnerOptions::programmatic_launch), ordinarily elsewhere.
#include "kc/engine/engine_kernels.hpp"

#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kc/common/error.hpp"
#include "kc/core/dependent_launch.cuh"
#include "kc/core/launch.hpp"
#include "kc/core/rope.cuh"
#include "kc/core/vector_io.hpp"

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

// One thread per (token, head, 8 pairs): the q heads of the token, then its kv heads. A thread
// reads the 8 elements at [j0, j0 + 8) and the 8 at [half + j0, ...) of its head (16-byte
// accesses, kc/core/vector_io.hpp), rotates them with the 8 angles of the token's position, and
// writes them back (q) or to the cache row of the token's slot (k, with v's two pieces copied
// beside them).
__global__ void rope_write_kv_kernel(bf16* q, const bf16* k, const uint4* v, const int* positions,
                                     const std::int32_t* slots, const float* cos_sin, int tokens, int q_heads,
                                     int kv_heads, int head_dim, int block_size, bf16* k_cache, uint4* v_cache) {
  core::let_dependent_grids_start();  // a programmatic dependent in the decode step (header above)
  core::wait_for_previous_grids();
  const int chunks = head_dim / (2 * kPiece);  // 16-byte pieces in half a head
  const int heads = q_heads + kv_heads;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<std::int64_t>(tokens) * heads * chunks) return;
  const int token = static_cast<int>(i / (heads * chunks));
  const int head = static_cast<int>(i / chunks % heads), chunk = static_cast<int>(i % chunks);
  const int half = head_dim / 2, j0 = chunk * kPiece;
  const float* angles = cos_sin + static_cast<std::int64_t>(positions[token]) * head_dim;
  const bool is_q = head < q_heads;
  const std::int64_t row = is_q ? static_cast<std::int64_t>(token) * q_heads + head
                                : static_cast<std::int64_t>(token) * kv_heads + (head - q_heads);
  const bf16* source = (is_q ? q : k) + row * head_dim;
  float a[kPiece], b[kPiece];
  core::load_floats<bf16, kPiece>(source + j0, a);
  core::load_floats<bf16, kPiece>(source + half + j0, b);
#pragma unroll
  for (int e = 0; e < kPiece; ++e) core::rotate_pair(a[e], b[e], angles[j0 + e], angles[half + j0 + e]);
  if (is_q) {
    core::store_floats<bf16, kPiece>(q + row * head_dim + j0, a);
    core::store_floats<bf16, kPiece>(q + row * head_dim + half + j0, b);
    return;
  }
  const std::int32_t slot = slots[token];
  if (slot < 0) return;
  const int kv_head = head - q_heads;
  const std::int64_t to = ((static_cast<std::int64_t>(slot / block_size) * kv_heads + kv_head) * block_size +
                           slot % block_size) * head_dim;
  core::store_floats<bf16, kPiece>(k_cache + to + j0, a);
  core::store_floats<bf16, kPiece>(k_cache + to + half + j0, b);
  const int pieces_per_row = head_dim / kPiece;
  v_cache[to / kPiece + chunk] = v[row * pieces_per_row + chunk];
  v_cache[to / kPiece + chunks + chunk] = v[row * pieces_per_row + chunks + chunk];
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
  core::let_dependent_grids_start();
  core::wait_for_previous_grids();
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<std::int64_t>(count) * cols) return;
  const std::int64_t r = i / cols, c = i % cols;
  out[i] = x[static_cast<std::int64_t>(rows[r]) * cols + c];
}

// One block a row: each thread keeps the best (value, index) of its strided elements, then a block
// reduction keeps the larger value, the lower index on a tie. A NaN anywhere makes the row -1.
// A row of a decode step is one vocabulary (49 152 logits for SmolLM2, 128 256 for Llama 3) and a
// batch of one sequence is one block: so the block is wide (1024 threads) and, where the row
// allows it (a multiple of 8 logits, 16-byte aligned), each thread reads 16-byte pieces of 8
// logits, several in flight — 6 pieces a thread for SmolLM2's row, where 2-byte loads took 48.
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

constexpr int kArgmaxThreads = 1024;

// Elements reach a thread in increasing index order, so a strictly larger value replaces the best
// and an equal one keeps the lower index.
__device__ __forceinline__ void keep_if_better(Best& best, float value, int index) {
  if (value != value)
    best.has_nan = 1;
  else if (value > best.value)
    best = Best{value, index, best.has_nan};
}

// This thread's best of slice `slice` (of `slices` equal slices, in whole 16-byte pieces where the
// row is in pieces) of a row of `cols` logits, read by kThreadCount threads: the whole row for the
// block kernel (slice 0 of 1), an eighth of it for a CTA of the cluster kernel.
template <int kThreadCount>
__device__ __forceinline__ Best best_of_slice(const bf16* row, int cols, int slice, int slices) {
  Best best{-INFINITY, cols, 0};
  if (cols % kPiece == 0 && reinterpret_cast<std::uintptr_t>(row) % 16 == 0) {
    const int pieces = cols / kPiece;
    const int share = (pieces + slices - 1) / slices;
    const int end = min(pieces, (slice + 1) * share);
    const uint4* row_pieces = reinterpret_cast<const uint4*>(row);
#pragma unroll 4
    for (int p = slice * share + static_cast<int>(threadIdx.x); p < end; p += kThreadCount) {
      const uint4 piece = row_pieces[p];
      const bf16* values = reinterpret_cast<const bf16*>(&piece);
#pragma unroll
      for (int j = 0; j < kPiece; ++j) keep_if_better(best, __bfloat162float(values[j]), p * kPiece + j);
    }
  } else {
    const int share = (cols + slices - 1) / slices;
    const int end = min(cols, (slice + 1) * share);
    for (int c = slice * share + static_cast<int>(threadIdx.x); c < end; c += kThreadCount)
      keep_if_better(best, __bfloat162float(row[c]), c);
  }
  return best;
}

// The token a row's best gives: -1 for a NaN, 0 for a row with no value above -inf.
__device__ __forceinline__ std::int32_t greedy_token(const Best& best, int cols) {
  return best.has_nan ? -1 : (best.index < cols ? best.index : 0);
}

__global__ void __launch_bounds__(kArgmaxThreads) argmax_rows_kernel(const bf16* logits, int cols, std::int32_t* out) {
  core::let_dependent_grids_start();
  core::wait_for_previous_grids();
  const bf16* row = logits + static_cast<std::int64_t>(blockIdx.x) * cols;
  const Best best = best_of_slice<kArgmaxThreads>(row, cols, 0, 1);
  using Reduce = cub::BlockReduce<Best, kArgmaxThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const Best result = Reduce(storage).Reduce(best, KeepBest{});
  if (threadIdx.x == 0) out[blockIdx.x] = greedy_token(result, cols);
}

// A row too long for one SM to read quickly (a decode step of one sequence: a single block of
// argmax_rows_kernel reads the whole vocabulary through one SM's load path) shared by a cluster of
// kArgmaxClusterCtas CTAs on as many SMs (Hopper): CTA r of the cluster reduces the r-th slice of
// the row's 16-byte pieces (or of its logits, where the row is not in pieces), then CTA 0 reads the
// others' results from their shared memory (distributed shared memory, cluster.map_shared_rank) and
// keeps the best — the larger value, the lower index on a tie, -1 for a NaN anywhere: the block
// kernel's answer. The second cluster barrier keeps every CTA's shared memory alive until CTA 0 has
// read it. Rows of the grid's y dimension, one cluster a row.
constexpr int kArgmaxClusterCtas = 8;  // the portable cluster size
constexpr int kArgmaxClusterThreads = 512;

__global__ void __launch_bounds__(kArgmaxClusterThreads)
    argmax_rows_cluster_kernel(const bf16* logits, int cols, std::int32_t* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  core::let_dependent_grids_start();
  core::wait_for_previous_grids();
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const bf16* row = logits + static_cast<std::int64_t>(blockIdx.y) * cols;
  const Best best = best_of_slice<kArgmaxClusterThreads>(row, cols, rank, kArgmaxClusterCtas);
  using Reduce = cub::BlockReduce<Best, kArgmaxClusterThreads>;
  __shared__ typename Reduce::TempStorage storage;
  __shared__ Best cta_best;
  const Best result = Reduce(storage).Reduce(best, KeepBest{});
  if (threadIdx.x == 0) cta_best = result;
  cluster.sync();  // every CTA's best is in its shared memory
  if (rank == 0 && threadIdx.x == 0) {
    Best all = cta_best;
    for (int r = 1; r < kArgmaxClusterCtas; ++r) all = KeepBest{}(all, *cluster.map_shared_rank(&cta_best, r));
    out[blockIdx.y] = greedy_token(all, cols);
  }
  cluster.sync();  // no CTA leaves (and frees its shared memory) before CTA 0 has read it
#else
  (void)logits;
  (void)cols;
  (void)out;
#endif
}

// Whether this build and GPU run argmax_rows_cluster_kernel: compute capability 9.0 or newer and
// code for it in the binary (an sm_80-only build has none: its body compiles to nothing there).
bool cluster_argmax_available() {
  thread_local int known_device = -1;
  thread_local bool known = false;
  int device = 0;
  KC_CUDA_CHECK(cudaGetDevice(&device));
  if (device != known_device) {
    int major = 0;
    KC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    cudaFuncAttributes attributes{};
    KC_CUDA_CHECK(cudaFuncGetAttributes(&attributes, argmax_rows_cluster_kernel));
    known = major >= 9 && attributes.binaryVersion >= 90;
    known_device = device;
  }
  return known;
}

// The warming link (engine_kernels.hpp, "Warming the L2"): one warp a CTA, one chunk of the
// ranges a thread per trip, the ranges one after the other in chunk order. Small CTAs, so that
// the prefetches leave from many SMs (each SM's copy engine issues its own) and the link takes no
// slot the attention's blocks would want.
constexpr int kL2WarmThreads = 32;
struct L2WarmArgs {
  const char* begin[kL2WarmMaxRanges];
  std::size_t bytes[kL2WarmMaxRanges];
  int count;
};

__global__ void __launch_bounds__(kL2WarmThreads) warm_l2_kernel(L2WarmArgs args) {
  core::let_dependent_grids_start();  // the attention's blocks may take their slots now
  core::wait_for_previous_grids();    // the projection ahead has ended: DRAM is the weights' now
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t chunk = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int r = 0; r < args.count; ++r) {
    const std::size_t chunks = (args.bytes[r] + kL2WarmChunkBytes - 1) / kL2WarmChunkBytes;
    for (; chunk < chunks; chunk += threads) {
      const std::size_t offset = chunk * kL2WarmChunkBytes;
      const std::size_t left = args.bytes[r] - offset;
      core::prefetch_to_l2(args.begin[r] + offset,
                           static_cast<std::uint32_t>(left < kL2WarmChunkBytes ? left : kL2WarmChunkBytes));
    }
    chunk -= chunks;  // this thread's chunk, counted from the next range's start
  }
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

void rope_write_kv(bf16* q, const bf16* k, const bf16* v, const int* positions, const std::int32_t* slots,
                   const float* cos_sin, int max_position, int tokens, int q_heads, int kv_heads, int head_dim,
                   int block_size, bf16* k_cache, bf16* v_cache, cudaStream_t stream) {
  const void* pointers[] = {q, k, v, k_cache, v_cache};
  require_rows(head_dim, pointers, 5, "rope_write_kv");
  require(head_dim % (2 * kPiece) == 0, "rope_write_kv: head_dim {} must be a multiple of 16 (8 pairs a thread)",
          head_dim);
  require(positions != nullptr && slots != nullptr && cos_sin != nullptr && max_position >= 1 && tokens >= 1 &&
              q_heads >= 1 && kv_heads >= 1 && block_size >= 1,
          "rope_write_kv: positions, slots and cos_sin must be non-null and max_position, tokens, q_heads, "
          "kv_heads, block_size >= 1");
  const std::int64_t threads = static_cast<std::int64_t>(tokens) * (q_heads + kv_heads) * (head_dim / (2 * kPiece));
  core::launch_dependent(rope_write_kv_kernel, dim3(blocks_for(threads)), dim3(kThreads), 0, stream, q, k,
                         reinterpret_cast<const uint4*>(v), positions, slots, cos_sin, tokens, q_heads, kv_heads,
                         head_dim, block_size, k_cache, reinterpret_cast<uint4*>(v_cache));
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
  core::launch_dependent(gather_rows_kernel, dim3(blocks_for(static_cast<std::int64_t>(count) * cols)), dim3(kThreads),
                         0, stream, x, rows, count, cols, out);
}

void argmax_rows_block_per_row(const bf16* logits, int rows, int cols, std::int32_t* out, cudaStream_t stream) {
  require(logits != nullptr && out != nullptr && rows >= 1 && cols >= 1,
          "argmax_rows: logits and out must be non-null and rows, cols >= 1");
  core::launch_dependent(argmax_rows_kernel, dim3(static_cast<unsigned>(rows)), dim3(kArgmaxThreads), 0, stream, logits,
                         cols, out);
}

bool argmax_rows_cluster_available() { return cluster_argmax_available(); }

void argmax_rows_cluster(const bf16* logits, int rows, int cols, std::int32_t* out, cudaStream_t stream) {
  require(logits != nullptr && out != nullptr && rows >= 1 && rows <= 65535 && cols >= 1,
          "argmax_rows_cluster: logits and out must be non-null, rows in [1, 65535] and cols >= 1");
  require(cluster_argmax_available(),
          "argmax_rows_cluster: needs a GPU of compute capability 9.0 or newer and a build with sm_90 code "
          "(thread block clusters); argmax_rows_block_per_row runs everywhere");
  core::launch_dependent_in_clusters(argmax_rows_cluster_kernel, dim3(kArgmaxClusterCtas, static_cast<unsigned>(rows)),
                                     dim3(kArgmaxClusterThreads), kArgmaxClusterCtas, 0, stream, logits, cols, out);
}

std::vector<L2Range> l2_warm_after_attention(const void* o, std::size_t o_bytes, const void* gate_up,
                                             std::size_t gate_up_bytes, std::size_t budget) {
  std::vector<L2Range> ranges;
  const auto take = [&](const void* begin, std::size_t bytes) {
    const std::size_t taken = (bytes < budget ? bytes : budget) / 16 * 16;
    if (begin != nullptr && taken > 0) ranges.push_back({begin, taken});
    budget -= taken;
  };
  take(o, o_bytes);
  take(gate_up, gate_up_bytes);
  return ranges;
}

void warm_l2(const std::vector<L2Range>& ranges, cudaStream_t stream) {
  require(!ranges.empty() && ranges.size() <= static_cast<std::size_t>(kL2WarmMaxRanges),
          "warm_l2: {} ranges; one launch takes 1 to {}", ranges.size(), kL2WarmMaxRanges);
  L2WarmArgs args{};
  args.count = static_cast<int>(ranges.size());
  std::int64_t chunks = 0;
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    require(ranges[r].begin != nullptr && reinterpret_cast<std::uintptr_t>(ranges[r].begin) % 16 == 0 &&
                ranges[r].bytes > 0 && ranges[r].bytes % 16 == 0,
            "warm_l2: range {} must start 16-byte aligned (got {}) and hold a positive multiple of 16 bytes (got {})",
            r, ranges[r].begin, ranges[r].bytes);
    args.begin[r] = static_cast<const char*>(ranges[r].begin);
    args.bytes[r] = ranges[r].bytes;
    chunks += core::ceil_div(static_cast<std::int64_t>(ranges[r].bytes), kL2WarmChunkBytes);
  }
  const std::int64_t blocks = core::ceil_div(chunks, kL2WarmThreads);
  core::launch_dependent(warm_l2_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kL2WarmThreads), 0, stream, args);
}

bool warm_l2_takes_effect() { return core::programmatic_launch_active(); }

void argmax_rows(const bf16* logits, int rows, int cols, std::int32_t* out, cudaStream_t stream) {
  if (rows <= kArgmaxClusterMaxRows && cluster_argmax_available())
    argmax_rows_cluster(logits, rows, cols, out, stream);
  else
    argmax_rows_block_per_row(logits, rows, cols, out, stream);
}

}  // namespace kc::engine
