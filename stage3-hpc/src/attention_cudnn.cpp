// cuDNN SDPA as the attention_fwd op's baseline (kc/stage3/attention_cudnn.hpp). Compiled with
// KC_HAS_CUDNN=1 where CMake found cuDNN and the vendored cudnn-frontend headers
// (third_party/cudnn_frontend), with KC_HAS_CUDNN=0 otherwise: then only the fallback's name is
// left.
#include "kc/stage3/attention_cudnn.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kc/stage3/attention.hpp"

#if KC_HAS_CUDNN
#include <cudnn.h>

#include <cudnn_frontend.h>
#endif

namespace kc::stage3 {

std::string CudnnAttention::known_limits(const Problem& problem) {
  const AttentionShape s = attention_shape(problem);
  if (problem.dtype != DType::bf16 && problem.dtype != DType::f16)
    return fmt::format("cuDNN SDPA runs bf16 and f16 here, not {}", dtype_name(problem.dtype));
  if (s.head_dim % 8 != 0 || s.head_dim > 256)
    return fmt::format("cuDNN SDPA (FP16/BF16) needs D a multiple of 8 and at most 256 (got D = {})", s.head_dim);
  if (attention_causal(problem) && s.q_len > s.kv_len)
    return fmt::format("cuDNN's bottom-right causal mask does not take Sq > Sk (Sq = {}, Sk = {}): the "
                       "first Sq - Sk rows see no key, which kc defines as O = 0 and LSE = -inf",
                       s.q_len, s.kv_len);
  return {};
}

#if KC_HAS_CUDNN

namespace fe = cudnn_frontend;

namespace {

constexpr std::int64_t kUidQ = 1, kUidK = 2, kUidV = 3, kUidO = 4, kUidLse = 5;

void check_cudnn(cudnnStatus_t status, const char* call) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw Error(fmt::format("cuDNN: {} failed: {} ({})", call, cudnnGetErrorString(status),
                            static_cast<int>(status)));
}

std::string version_text(std::size_t version) {
  // cuDNN 9 encodes its version as major * 10000 + minor * 100 + patch.
  return fmt::format("{}.{}.{}", version / 10000, (version / 100) % 100, version % 100);
}

// (dims, dtype, causal, scale bits): what a graph is built for.
using GraphKey = std::tuple<std::vector<std::int64_t>, int, bool, std::uint32_t>;

GraphKey key_of(const Problem& problem) {
  const auto scale = static_cast<float>(attention_scale(problem));
  std::uint32_t bits = 0;
  std::memcpy(&bits, &scale, sizeof bits);
  return {problem.dims, static_cast<int>(problem.dtype), attention_causal(problem), bits};
}

// A built graph and its workspace, or the reason cuDNN gave for not running the problem.
struct CachedGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  DeviceBuffer<std::byte> workspace;
  std::string refusal;
};

std::string refusal_text(const char* step, fe::error_t status) {
  return fmt::format("cuDNN SDPA does not run this problem ({}: {})", step, status.get_message());
}

CachedGraph build_graph(const Problem& problem, cudnnHandle_t handle) {
  const AttentionShape s = attention_shape(problem);
  const bool causal = attention_causal(problem);
  const fe::DataType_t io = problem.dtype == DType::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;

  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // kc's layout, contiguous [B, H, S, D]: the strides say so, element by element.
  const auto bhsd = [&](const char* name, std::int64_t uid, std::int64_t heads, std::int64_t len) {
    return fe::graph::Tensor_attributes()
        .set_name(name)
        .set_uid(uid)
        .set_dim({s.batch, heads, len, s.head_dim})
        .set_stride({heads * len * s.head_dim, len * s.head_dim, s.head_dim, 1});
  };
  auto q = graph->tensor(bhsd("Q", kUidQ, s.q_heads, s.q_len));
  // Grouped-query attention: K and V have Hkv heads; cuDNN maps query head h to h / (Hq / Hkv),
  // kc's mapping.
  auto k = graph->tensor(bhsd("K", kUidK, s.kv_heads, s.kv_len));
  auto v = graph->tensor(bhsd("V", kUidV, s.kv_heads, s.kv_len));

  auto options = fe::graph::SDPA_attributes()
                     .set_name("attention_fwd")
                     .set_generate_stats(true)
                     .set_attn_scale(static_cast<float>(attention_scale(problem)));
  // With Sq == Sk the top-left and bottom-right diagonals are one mask; take the plain causal mask
  // there (the one PyTorch's cuDNN backend asks for) and the bottom-right one for Sq < Sk.
  if (causal && s.q_len == s.kv_len) options.set_causal_mask(true);
  if (causal && s.q_len != s.kv_len) options.set_causal_mask_bottom_right(true);
  auto [o, stats] = graph->sdpa(q, k, v, options);
  o->set_output(true)
      .set_uid(kUidO)
      .set_dim({s.batch, s.q_heads, s.q_len, s.head_dim})
      .set_stride({s.q_heads * s.q_len * s.head_dim, s.q_len * s.head_dim, s.head_dim, 1});
  // The softmax statistics: per row max + ln(sum exp), FP32, [B, Hq, Sq, 1] — kc's LSE.
  stats->set_output(true)
      .set_uid(kUidLse)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({s.batch, s.q_heads, s.q_len, 1})
      .set_stride({s.q_heads * s.q_len, s.q_len, 1, 1});

  CachedGraph cached;
  if (fe::error_t status = graph->validate(); status.is_bad()) {
    cached.refusal = refusal_text("validate", status);
    return cached;
  }
  if (fe::error_t status = graph->build_operation_graph(handle); status.is_bad()) {
    cached.refusal = refusal_text("build_operation_graph", status);
    return cached;
  }
  if (fe::error_t status = graph->create_execution_plans({fe::HeurMode_t::A}); status.is_bad()) {
    cached.refusal = refusal_text("create_execution_plans", status);
    return cached;
  }
  if (fe::error_t status = graph->check_support(handle); status.is_bad()) {
    cached.refusal = refusal_text("check_support", status);
    return cached;
  }
  if (fe::error_t status = graph->build_plans(handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
      status.is_bad()) {
    cached.refusal = refusal_text("build_plans", status);
    return cached;
  }
  std::int64_t workspace_bytes = 0;
  if (fe::error_t status = graph->get_workspace_size(workspace_bytes); status.is_bad())
    throw Error(fmt::format("cuDNN SDPA: get_workspace_size failed: {}", status.get_message()));
  if (workspace_bytes > 0) cached.workspace = DeviceBuffer<std::byte>(static_cast<std::size_t>(workspace_bytes));
  cached.graph = std::move(graph);
  return cached;
}

}  // namespace

struct CudnnAttention::Impl {
  cudnnHandle_t handle = nullptr;
  std::map<GraphKey, CachedGraph> graphs;

  ~Impl() {
    if (handle != nullptr) cudnnDestroy(handle);
  }

  CachedGraph& graph_for(const Problem& problem, Context& context) {
    if (handle == nullptr) check_cudnn(cudnnCreate(&handle), "cudnnCreate");
    check_cudnn(cudnnSetStream(handle, context.stream()), "cudnnSetStream");
    const GraphKey key = key_of(problem);
    auto found = graphs.find(key);
    if (found == graphs.end()) found = graphs.emplace(key, build_graph(problem, handle)).first;
    return found->second;
  }
};

CudnnAttention::CudnnAttention() : impl_(std::make_unique<Impl>()) {}
CudnnAttention::~CudnnAttention() = default;

std::string CudnnAttention::unsupported_reason(const Problem& problem, Context& context) {
  if (std::string reason = known_limits(problem); !reason.empty()) return reason;
  return impl_->graph_for(problem, context).refusal;
}

void CudnnAttention::run(const Problem& problem, Operands& operands, Context& context) {
  const std::string limit = known_limits(problem);
  require(limit.empty(), "{}: {}", problem.label(), limit);
  CachedGraph& cached = impl_->graph_for(problem, context);
  require(cached.refusal.empty(), "{}: {}", problem.label(), cached.refusal);
  std::unordered_map<std::int64_t, void*> pointers = {
      {kUidQ, operands["Q"].raw()}, {kUidK, operands["K"].raw()}, {kUidV, operands["V"].raw()},
      {kUidO, operands["O"].raw()}, {kUidLse, operands["LSE"].raw()}};
  fe::error_t status = cached.graph->execute(impl_->handle, pointers, cached.workspace.data());
  if (status.is_bad())
    throw Error(fmt::format("cuDNN SDPA: execute failed on {}: {}", problem.label(), status.get_message()));
}

bool cudnn_attention_built() { return true; }

std::string cudnn_attention_versions() {
  return fmt::format("cuDNN {} (built against {}), cudnn-frontend {}.{}.{}", version_text(cudnnGetVersion()),
                     version_text(CUDNN_VERSION), CUDNN_FRONTEND_MAJOR_VERSION, CUDNN_FRONTEND_MINOR_VERSION,
                     CUDNN_FRONTEND_PATCH_VERSION);
}

void use_cudnn_attention_baseline(OpConfig& op) {
  auto cudnn = std::make_shared<CudnnAttention>();
  op.baseline_name = fmt::format("cuDNN SDPA, fused ({}; the graph built once per problem, only its "
                                 "execution timed)",
                                 cudnn_attention_versions());
  op.baseline = [cudnn](const Problem& p, Operands& o, Context& context) { cudnn->run(p, o, context); };
  op.baseline_supports = [cudnn](const Problem& p, Context& context) {
    return cudnn->unsupported_reason(p, context);
  };
}

#else  // !KC_HAS_CUDNN

struct CudnnAttention::Impl {};

CudnnAttention::CudnnAttention() : impl_(std::make_unique<Impl>()) {}
CudnnAttention::~CudnnAttention() = default;

std::string CudnnAttention::unsupported_reason(const Problem& problem, Context&) {
  if (std::string reason = known_limits(problem); !reason.empty()) return reason;
  return cudnn_attention_versions();
}

void CudnnAttention::run(const Problem& problem, Operands&, Context&) {
  throw Error(fmt::format("{}: {}", problem.label(), cudnn_attention_versions()));
}

bool cudnn_attention_built() { return false; }

std::string cudnn_attention_versions() {
  return "cuDNN not available: this build has no cuDNN (configure with KC_WITH_CUDNN=ON and "
         "KC_CUDNN_ROOT pointing at a cuDNN 9 install)";
}

void use_cudnn_attention_baseline(OpConfig& op) {
  op.baseline_name += " — cuDNN not available: baseline is the unfused cuBLAS path";
}

#endif

}  // namespace kc::stage3
