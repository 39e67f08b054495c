// The deliberately wrong kernels. The FP32 ones are the naive SGEMM with exactly one flaw, so a
// failure can only come from that flaw. The bf16 ones are cuBLAS with one realistic flaw around it
// (a dropped k column, split-K with 16-bit partial sums, the wrong activation): fast enough to run
// at the benchmark shapes, where the bounds must catch them. The attention ones are a naive
// attention kernel (a thread per query row, FP32) with one flaw each: a wrong softmax scale, the
// causal mask one key too far, the last K/V tile of 64 keys never visited. The decode ones are a
// naive paged decode kernel (a thread per query row) with one flaw each: pages taken as contiguous,
// the NaN rows past a sequence's length read, no mask among the new tokens, 0 / 0 for a row that
// sees no key.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kc/common/gemm.hpp"
#include "kc/core/dtype_traits.hpp"
#include "kc/stage1/sgemm.hpp"
#include "kc/stage1/register.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/attention_decode.hpp"
#include "kc/stage3/register.hpp"
#include "kc/testing/negative_controls.hpp"

namespace kc::testing {
namespace {

using stage1::SgemmArgs;

enum class Flaw { none, skips_edge_tile, rounds_through_fp16, drops_last_k, reads_c_when_beta_zero };

constexpr int kTile = 16;

template <Flaw flaw>
__global__ void flawed_sgemm_kernel(SgemmArgs args) {
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  if (row >= args.m || col >= args.n) return;
  if (flaw == Flaw::skips_edge_tile) {
    // Forgets the partial tile at the bottom and right edges.
    const bool full_rows = (blockIdx.y + 1) * kTile <= static_cast<unsigned>(args.m);
    const bool full_cols = (blockIdx.x + 1) * kTile <= static_cast<unsigned>(args.n);
    if (!full_rows || !full_cols) return;
  }
  const int k_end = flaw == Flaw::drops_last_k ? args.k - 1 : args.k;
  float acc = 0.f;
  for (int p = 0; p < k_end; ++p) {
    float a = args.a[row * args.lda + p];
    float b = args.b[p * args.ldb + col];
    if (flaw == Flaw::rounds_through_fp16) {
      a = __half2float(__float2half(a));
      b = __half2float(__float2half(b));
    }
    acc += a * b;
  }
  float* c = &args.c[row * args.ldc + col];
  if (flaw == Flaw::reads_c_when_beta_zero)
    *c = args.alpha * acc + args.beta * *c;  // NaN * 0 is NaN: C must not be read when beta == 0
  else
    *c = args.beta == 0.f ? args.alpha * acc : args.alpha * acc + args.beta * *c;
}

__global__ void plant_nan_kernel(SgemmArgs args) {
  args.c[(args.m / 2) * args.ldc + args.n / 2] = nanf("");
}

template <Flaw flaw>
void launch_flawed(const SgemmArgs& args, cudaStream_t stream) {
  const dim3 block(kTile, kTile);
  const dim3 grid((args.n + kTile - 1) / kTile, (args.m + kTile - 1) / kTile);
  flawed_sgemm_kernel<flaw><<<grid, block, 0, stream>>>(args);
}

void writes_nothing(const SgemmArgs&, cudaStream_t) {}

void returns_nan(const SgemmArgs& args, cudaStream_t stream) {
  launch_flawed<Flaw::none>(args, stream);
  plant_nan_kernel<<<1, 1, 0, stream>>>(args);
}

struct Control {
  const char* name;
  const char* flaw;
  void (*launch)(const SgemmArgs&, cudaStream_t);
};

const Control kControls[] = {
    {"nc_writes_nothing", "launches nothing: C keeps its NaN poison", &writes_nothing},
    {"nc_skips_edge_tile", "skips the last partial tile in M and N",
     &launch_flawed<Flaw::skips_edge_tile>},
    {"nc_rounds_through_fp16", "rounds A and B to fp16 before multiplying",
     &launch_flawed<Flaw::rounds_through_fp16>},
    {"nc_returns_nan", "correct, then writes NaN into one element", &returns_nan},
    {"nc_drops_last_k", "stops the K loop one step early", &launch_flawed<Flaw::drops_last_k>},
    {"nc_reads_c_when_beta_zero", "computes beta*C even when beta == 0 (NaN*0 = NaN)",
     &launch_flawed<Flaw::reads_c_when_beta_zero>},
};

// ---- bf16: C = alpha.A.B^T + beta.C, A M x K, B N x K, row-major (stage 3's hgemm) ----------------

using bf16 = __nv_bfloat16;

// C (ldc) = alpha . A (lda) . B^T (ldb) + beta . C over the first `k` columns of A and B, through
// cuBLAS in column-major terms (C^T = B . A^T), FP32 accumulation, bf16 out.
void gemm_bf16(cublasHandle_t handle, cudaStream_t stream, int m, int n, int k, float alpha,
               const bf16* a, int lda, const bf16* b, int ldb, float beta, bf16* c, int ldc) {
  KC_CUBLAS_CHECK(cublasSetStream(handle, stream));
  KC_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16BF, ldb, a,
                               CUDA_R_16BF, lda, &beta, c, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
}

// c = round(float(p1) + float(p2) + beta . c): the reduction of split-K partials that were
// stored in bf16.
__global__ void add_partials_kernel(const bf16* p1, const bf16* p2, bf16* c, std::size_t count, float beta) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float sum = __bfloat162float(p1[i]) + __bfloat162float(p2[i]);
    if (beta != 0.f) sum += beta * __bfloat162float(c[i]);
    c[i] = __float2bfloat16(sum);
  }
}

// c = max(c + bias[col], 0): ReLU where the op asks for GELU.
__global__ void bias_relu_kernel(bf16* c, const bf16* bias, std::size_t count, int n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    c[i] = __float2bfloat16(fmaxf(__bfloat162float(c[i]) + __bfloat162float(bias[i % n]), 0.f));
}

// One cuBLAS handle for the bf16 controls, created on their first launch (registering them must
// work without a GPU: kc-bench --list).
class LazyCublas {
 public:
  cublasHandle_t get() {
    if (!handle_) handle_ = std::make_unique<CublasHandle>();
    return handle_->get();
  }

 private:
  std::unique_ptr<CublasHandle> handle_;
};

struct Bf16Control {
  const char* op;
  const char* name;
  const char* flaw;
  void (*launch)(cublasHandle_t, const GemmArgs<bf16>&, const bf16* bias, cudaStream_t);
};

void drops_last_k(cublasHandle_t handle, const GemmArgs<bf16>& g, const bf16*, cudaStream_t stream) {
  gemm_bf16(handle, stream, g.m, g.n, g.k - 1, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc);
}

void split_k_bf16_partials(cublasHandle_t handle, const GemmArgs<bf16>& g, const bf16*, cudaStream_t stream) {
  const int half = g.k / 2;
  const std::size_t count = static_cast<std::size_t>(g.m) * g.n;
  DeviceBuffer<bf16> first(count), second(count);
  gemm_bf16(handle, stream, g.m, g.n, half, g.alpha, g.a, g.lda, g.b, g.ldb, 0.f, first.data(), g.n);
  gemm_bf16(handle, stream, g.m, g.n, g.k - half, g.alpha, g.a + half, g.lda, g.b + half, g.ldb, 0.f,
            second.data(), g.n);
  add_partials_kernel<<<1024, 256, 0, stream>>>(first.data(), second.data(), g.c, count, g.beta);
  KC_CHECK_LAUNCH();
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));  // the partials are freed on return
}

void relu_instead_of_gelu(cublasHandle_t handle, const GemmArgs<bf16>& g, const bf16* bias, cudaStream_t stream) {
  gemm_bf16(handle, stream, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc);
  bias_relu_kernel<<<1024, 256, 0, stream>>>(g.c, bias, static_cast<std::size_t>(g.m) * g.n, g.n);
  KC_CHECK_LAUNCH();
}

const Bf16Control kBf16Controls[] = {
    {stage3::kHgemmOp, "nc_drops_last_k", "cuBLAS over the first K - 1 columns: one k column missing",
     &drops_last_k},
    {stage3::kHgemmOp, "nc_split_k_bf16_partials",
     "split-K in two halves whose partial sums are stored in bf16, then added", &split_k_bf16_partials},
    {stage3::kBiasGeluOp, "nc_relu_instead_of_gelu", "cuBLAS, then bias + ReLU where the op asks for GELU",
     &relu_instead_of_gelu},
};

// ---- attention_fwd: O = softmax(scale.Q.K^T [causal]).V and LSE (kc/stage3/attention.hpp) --------

enum class AttentionFlaw { wrong_scale, mask_off_by_one, skips_last_kv_tile };

constexpr int kAttentionMaxHeadDim = 128;
constexpr int kAttentionKvTile = 64;  // the tile the skipped-tile flaw forgets the last of

template <typename T>
struct NaiveAttention {
  const T* q;
  const T* k;
  const T* v;
  T* o;
  float* lse;
  int batch, q_heads, kv_heads, q_len, kv_len, head_dim;
  float scale;
  bool causal;
};

// One query row of attention, by one thread, in FP32: the maximum of the scaled scores over keys
// j < visible, then the weights and O. key_row(j) and value_row(j) give the rows of K and V; with
// `empty_rows_zero` false a row that sees no key computes 0 / 0 (a flaw of its own).
template <typename T, class KeyRow, class ValueRow>
__device__ void naive_attention_row(const T* q, int head_dim, float scale, int visible, KeyRow key_row,
                                    ValueRow value_row, bool empty_rows_zero, T* o, float* lse) {
  const auto score = [&](int j) {
    const T* k = key_row(j);
    float dot = 0.f;
    for (int c = 0; c < head_dim; ++c) dot += core::to_float(q[c]) * core::to_float(k[c]);
    return scale * dot;
  };
  float max = -INFINITY;
  for (int j = 0; j < visible; ++j) max = fmaxf(max, score(j));
  float acc[kAttentionMaxHeadDim] = {};
  float sum = 0.f;
  for (int j = 0; j < visible; ++j) {
    const float weight = expf(score(j) - max);
    sum += weight;
    const T* v = value_row(j);
    for (int c = 0; c < head_dim; ++c) acc[c] += weight * core::to_float(v[c]);
  }
  const bool divide = visible > 0 || !empty_rows_zero;
  for (int c = 0; c < head_dim; ++c) o[c] = core::from_float<T>(divide ? acc[c] / sum : 0.f);
  *lse = divide ? max + logf(sum) : -INFINITY;
}

// One thread per query row: the scores' maximum, then the weights and O, in FP32 — right but for
// `flaw`.
template <typename T, AttentionFlaw flaw>
__global__ void flawed_attention_kernel(NaiveAttention<T> a) {
  const long long row = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (row >= static_cast<long long>(a.batch) * a.q_heads * a.q_len) return;
  const int i = static_cast<int>(row % a.q_len);
  const long long head = row / a.q_len;  // b * Hq + h
  const long long b = head / a.q_heads;
  const long long kv_head = b * a.kv_heads + (head % a.q_heads) / (a.q_heads / a.kv_heads);
  const T* q = a.q + row * a.head_dim;
  const T* k = a.k + kv_head * a.kv_len * a.head_dim;
  const T* v = a.v + kv_head * a.kv_len * a.head_dim;
  T* o = a.o + row * a.head_dim;

  // Bottom-right causal mask: keys j <= i + Sk - Sq (one more with the off-by-one flaw).
  const long long reach = static_cast<long long>(i) + a.kv_len - a.q_len + (flaw == AttentionFlaw::mask_off_by_one ? 2 : 1);
  int visible = a.causal ? static_cast<int>(reach < 0 ? 0 : (reach < a.kv_len ? reach : a.kv_len)) : a.kv_len;
  if (flaw == AttentionFlaw::skips_last_kv_tile) {
    const int tiled_keys = (a.kv_len - 1) / kAttentionKvTile * kAttentionKvTile;  // start of the last tile
    visible = visible < tiled_keys ? visible : tiled_keys;
  }
  const float scale = flaw == AttentionFlaw::wrong_scale ? 1.25f * a.scale : a.scale;
  naive_attention_row(
      q, a.head_dim, scale, visible, [&](int j) { return k + j * a.head_dim; },
      [&](int j) { return v + j * a.head_dim; }, true, o, a.lse + row);
}

// One thread per query row: the grid of a naive control over `rows` rows.
constexpr int kRowThreads = 128;
inline unsigned row_blocks(long long rows) { return static_cast<unsigned>((rows + kRowThreads - 1) / kRowThreads); }

template <typename T, AttentionFlaw flaw>
void launch_flawed_attention(const Problem& problem, Operands& operands, cudaStream_t stream) {
  const stage3::AttentionShape s = stage3::attention_shape(problem);
  require(s.head_dim <= kAttentionMaxHeadDim, "the attention negative controls hold D <= {}", kAttentionMaxHeadDim);
  const NaiveAttention<T> a{operands["Q"].data<T>(), operands["K"].data<T>(), operands["V"].data<T>(),
                            operands["O"].data<T>(), operands["LSE"].data<float>(),
                            static_cast<int>(s.batch), static_cast<int>(s.q_heads), static_cast<int>(s.kv_heads),
                            static_cast<int>(s.q_len), static_cast<int>(s.kv_len), static_cast<int>(s.head_dim),
                            static_cast<float>(stage3::attention_scale(problem)), stage3::attention_causal(problem)};
  flawed_attention_kernel<T, flaw><<<row_blocks(s.batch * s.q_heads * s.q_len), kRowThreads, 0, stream>>>(a);
  KC_CHECK_LAUNCH();
}

using ControlLaunch = void (*)(const Problem&, Operands&, cudaStream_t);

// The bf16 or the f16 launch, as the problem's dtype says.
template <ControlLaunch kBf16, ControlLaunch kF16>
void launch_for_dtype(const Problem& problem, Operands& operands, cudaStream_t stream) {
  (problem.dtype == DType::bf16 ? kBf16 : kF16)(problem, operands, stream);
}

template <AttentionFlaw flaw>
void flawed_attention(const Problem& problem, Operands& operands, cudaStream_t stream) {
  launch_for_dtype<&launch_flawed_attention<bf16, flaw>, &launch_flawed_attention<__half, flaw>>(problem, operands,
                                                                                                 stream);
}

struct AttentionControl {
  const char* name;
  const char* flaw;
  ControlLaunch launch;
};

const AttentionControl kAttentionControls[] = {
    {"nc_wrong_scale", "softmax scale 1.25x the problem's", &flawed_attention<AttentionFlaw::wrong_scale>},
    {"nc_mask_off_by_one", "causal mask lets each row see one key past i + Sk - Sq",
     &flawed_attention<AttentionFlaw::mask_off_by_one>},
    {"nc_skips_last_kv_tile", "never visits the last K/V tile of 64 keys",
     &flawed_attention<AttentionFlaw::skips_last_kv_tile>},
};

// ---- attention_decode_paged: attention over a paged KV cache (kc/stage3/attention_decode.hpp) ----

enum class DecodeFlaw { contiguous_pages, reads_block_tail, new_tokens_see_all_keys, empty_rows_divide_by_zero };

template <typename T>
struct NaiveDecode {
  const T* q;
  const T* k_cache;
  const T* v_cache;
  const std::int32_t* block_table;
  const std::int32_t* seq_lens;
  T* o;
  float* lse;
  int batch, q_heads, kv_heads, q_len, head_dim, block_size, max_blocks, num_blocks;
  float scale;
};

// One thread per query row (sequence, query head, new token) walks the sequence's keys through
// the block table: the scores' maximum, then the weights and O, in FP32 — right but for `flaw`.
template <typename T, DecodeFlaw flaw>
__global__ void flawed_decode_kernel(NaiveDecode<T> a) {
  const long long row = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (row >= static_cast<long long>(a.batch) * a.q_heads * a.q_len) return;
  const int token = static_cast<int>(row % a.q_len);
  const int head = static_cast<int>(row / a.q_len % a.q_heads);
  const long long b = row / a.q_len / a.q_heads;
  const int kv_head = head / (a.q_heads / a.kv_heads);
  const int length = a.seq_lens[b];
  const std::int32_t* table_row = a.block_table + b * a.max_blocks;

  // Keys j < L - (Sq - 1 - t); the flaws widen that.
  int visible = length - (a.q_len - 1 - token);
  visible = visible < 0 ? 0 : visible;
  if (flaw == DecodeFlaw::new_tokens_see_all_keys) visible = length;  // no mask among the new tokens
  if (flaw == DecodeFlaw::reads_block_tail && token == a.q_len - 1)   // the whole last block, past L
    visible = (length + a.block_size - 1) / a.block_size * a.block_size;
  const auto key_row = [&](const T* pool, int j) {
    const int slot = j / a.block_size;
    // The contiguous-pages flaw takes the sequence's first block and assumes the rest follow it.
    const int block = flaw == DecodeFlaw::contiguous_pages ? (table_row[0] + slot) % a.num_blocks : table_row[slot];
    return pool + ((static_cast<long long>(block) * a.kv_heads + kv_head) * a.block_size + j % a.block_size) *
                      a.head_dim;
  };
  // The divide-by-zero flaw forgets rows that see no key (an empty sequence): 0 / 0 = NaN.
  naive_attention_row(
      a.q + row * a.head_dim, a.head_dim, a.scale, visible, [&](int j) { return key_row(a.k_cache, j); },
      [&](int j) { return key_row(a.v_cache, j); }, flaw != DecodeFlaw::empty_rows_divide_by_zero,
      a.o + row * a.head_dim, a.lse + row);
}

template <typename T, DecodeFlaw flaw>
void launch_flawed_decode(const Problem& problem, Operands& operands, cudaStream_t stream) {
  const stage3::DecodeShape s = stage3::decode_shape(problem);
  require(s.head_dim <= kAttentionMaxHeadDim, "the decode negative controls hold D <= {}", kAttentionMaxHeadDim);
  const NaiveDecode<T> a{operands["Q"].data<T>(),
                         operands["K_cache"].data<T>(),
                         operands["V_cache"].data<T>(),
                         operands["block_table"].data<std::int32_t>(),
                         operands["seq_lens"].data<std::int32_t>(),
                         operands["O"].data<T>(),
                         operands["LSE"].data<float>(),
                         static_cast<int>(s.batch),
                         static_cast<int>(s.q_heads),
                         static_cast<int>(s.kv_heads),
                         static_cast<int>(s.q_len),
                         static_cast<int>(s.head_dim),
                         static_cast<int>(s.block_size),
                         static_cast<int>(s.max_blocks()),
                         static_cast<int>(stage3::decode_num_blocks(problem)),
                         static_cast<float>(stage3::attention_scale(problem))};
  flawed_decode_kernel<T, flaw><<<row_blocks(s.batch * s.q_heads * s.q_len), kRowThreads, 0, stream>>>(a);
  KC_CHECK_LAUNCH();
}

template <DecodeFlaw flaw>
void flawed_decode(const Problem& problem, Operands& operands, cudaStream_t stream) {
  launch_for_dtype<&launch_flawed_decode<bf16, flaw>, &launch_flawed_decode<__half, flaw>>(problem, operands, stream);
}

const AttentionControl kDecodeControls[] = {
    {"nc_contiguous_pages", "reads a sequence's blocks as if they followed its first one in the pool",
     &flawed_decode<DecodeFlaw::contiguous_pages>},
    {"nc_reads_block_tail", "the last new token reads its sequence's whole last block, rows past L included",
     &flawed_decode<DecodeFlaw::reads_block_tail>},
    {"nc_new_tokens_see_all_keys", "no causal mask among the Sq new tokens: each sees all L keys",
     &flawed_decode<DecodeFlaw::new_tokens_see_all_keys>},
    {"nc_empty_rows_divide_by_zero", "a row that sees no key (an empty sequence) divides 0 by 0",
     &flawed_decode<DecodeFlaw::empty_rows_divide_by_zero>},
};

// An attention control (bf16 and f16) of `op`.
void add_attention_control(Registry& registry, const char* op, const AttentionControl& control) {
  KernelEntry entry = negative_control_entry(std::string("stage3/") + op + "/" + control.name, op, control.flaw,
                                             {DType::bf16, DType::f16});
  entry.launch = control.launch;
  registry.add_kernel(std::move(entry));
}

}  // namespace

KernelEntry negative_control_entry(std::string id, std::string op, const std::string& flaw,
                                   std::vector<DType> dtypes) {
  KernelEntry entry;
  entry.id = std::move(id);
  entry.op = std::move(op);
  entry.rung = 0;
  entry.idea = "NEGATIVE CONTROL: " + flaw;
  entry.dtypes = std::move(dtypes);
  entry.report = "negative-controls";
  return entry;
}

std::vector<NegativeControl> negative_controls() {
  std::vector<NegativeControl> list;
  for (const Control& c : kControls) list.push_back({std::string("stage1/sgemm/") + c.name, c.flaw});
  for (const Bf16Control& c : kBf16Controls)
    list.push_back({std::string("stage3/") + c.op + "/" + c.name, c.flaw});
  for (const AttentionControl& c : kAttentionControls)
    list.push_back({std::string("stage3/") + stage3::kAttentionFwdOp + "/" + c.name, c.flaw});
  for (const AttentionControl& c : kDecodeControls)
    list.push_back({std::string("stage3/") + stage3::kAttentionDecodeOp + "/" + c.name, c.flaw});
  for (const NegativeControl& c : grouped_gemm_controls()) list.push_back(c);
  for (const NegativeControl& c : fp8_gemm_controls()) list.push_back(c);
  for (const NegativeControl& c : fp8_grouped_gemm_controls()) list.push_back(c);
  for (const NegativeControl& c : int8_gemm_controls()) list.push_back(c);
  for (const NegativeControl& c : small_m_gemm_controls()) list.push_back(c);
  for (const NegativeControl& c : quantize_gguf_controls()) list.push_back(c);
  for (const NegativeControl& c : gemv_int4_controls()) list.push_back(c);
  for (const NegativeControl& c : quantize_int4_controls()) list.push_back(c);
  for (const NegativeControl& c : decode_fused_combine_controls()) list.push_back(c);
  return list;
}

void register_negative_controls(Registry& registry) {
  if (!registry.has_op("sgemm")) registry.add_op(stage1::make_sgemm_op());
  for (const Control& c : kControls) {
    KernelEntry entry = negative_control_entry(std::string("stage1/sgemm/") + c.name, "sgemm", c.flaw, {DType::f32});
    const auto launch = c.launch;
    entry.launch = [launch](const Problem& problem, Operands& operands, cudaStream_t stream) {
      launch(gemm_args<float>(problem, operands, BLayout::k_by_n), stream);
    };
    registry.add_kernel(std::move(entry));
  }
  if (!registry.has_op(stage3::kHgemmOp)) registry.add_op(stage3::make_hgemm_op());
  if (!registry.has_op(stage3::kBiasGeluOp)) registry.add_op(stage3::make_gemm_bias_gelu_op());
  auto handle = std::make_shared<LazyCublas>();
  for (const Bf16Control& c : kBf16Controls) {
    KernelEntry entry =
        negative_control_entry(std::string("stage3/") + c.op + "/" + c.name, c.op, c.flaw, {DType::bf16});
    const auto launch = c.launch;
    const bool has_bias = std::string(c.op) == stage3::kBiasGeluOp;
    entry.launch = [launch, handle, has_bias](const Problem& problem, Operands& operands, cudaStream_t stream) {
      launch(handle->get(), gemm_args<bf16>(problem, operands, BLayout::n_by_k),
             has_bias ? operands["bias"].data<bf16>() : nullptr, stream);
    };
    registry.add_kernel(std::move(entry));
  }
  if (!registry.has_op(stage3::kAttentionFwdOp)) registry.add_op(stage3::make_attention_fwd_op());
  for (const AttentionControl& c : kAttentionControls) add_attention_control(registry, stage3::kAttentionFwdOp, c);
  if (!registry.has_op(stage3::kAttentionDecodeOp)) registry.add_op(stage3::make_attention_decode_op());
  for (const AttentionControl& c : kDecodeControls) add_attention_control(registry, stage3::kAttentionDecodeOp, c);
  register_grouped_gemm_controls(registry);
  register_fp8_gemm_controls(registry);
  register_fp8_grouped_gemm_controls(registry);
  register_int8_gemm_controls(registry);
  register_small_m_gemm_controls(registry);
  register_quantize_gguf_controls(registry);
  register_gemv_int4_controls(registry);
  register_quantize_int4_controls(registry);
  register_decode_fused_combine_controls(registry);
}

}  // namespace kc::testing
