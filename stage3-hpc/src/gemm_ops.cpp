// The two stage-3 GEMM ops: hgemm (C = alpha.A.B^T + beta.C, bf16) and gemm_bias_gelu (the same,
// then + bias and GELU). Both are described through kc::gemm_op_config; the fused op adds its bias
// operand and wraps the reference instead of restating them.
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "hgemm.hpp"
#include "kc/core/gelu.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3 {
namespace {

constexpr int kKMultiple = 8;  // 16 bytes of bf16

GemmOpConfig hgemm_config(const std::string& name) {
  GemmOpConfig config;
  config.name = name;
  config.dtypes = {DType::bf16};
  config.b_layout = BLayout::n_by_k;
  config.math = MathUnit::fp16_tensor;
  for (const Shape& dims : std::vector<Shape>{
           {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192},
           {8192, 14336, 4096},  // Llama-3-8B MLP up/gate projection, 8192 tokens
           {8192, 4096, 14336},  // ... and its down projection
           {4093, 2049, 1032},   // odd M and N: the edge paths, timed
           // decode: a step of 1, 16 or 64 sequences through a 4096 x 4096 projection and
           // Llama-3-8B's down projection (rung 11's shapes)
           {1, 4096, 4096}, {16, 4096, 4096}, {64, 4096, 4096}, {64, 4096, 14336},
           // decode at batch 1 through Llama-3-8B's other projections: K or V (1024 columns),
           // gate and up together (2 x 14336), down; and batch 2, 4, 8 (rung 12's shapes)
           {1, 1024, 4096}, {1, 28672, 4096}, {1, 4096, 14336}, {2, 4096, 4096}, {4, 4096, 4096}, {8, 4096, 4096}})
    config.bench.push_back({dims});
  config.conformance = hgemm_conformance_problems();
  return config;
}

// cuBLASLt plans of the fused baseline, one per shape, made on first use (in the untimed
// warm-up launches).
class LtPlans {
 public:
  const CublasLtGemm& get(cublasLtHandle_t handle, GemmShape s) {
    const auto key = std::make_tuple(s.m, s.n, s.k);
    auto found = plans_.find(key);
    if (found == plans_.end())
      found = plans_.emplace(key, std::make_unique<CublasLtGemm>(handle, s, DType::bf16, DType::bf16,
                                                                 BLayout::n_by_k, LtEpilogue::gelu_bias))
                  .first;
    return *found->second;
  }

 private:
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::unique_ptr<CublasLtGemm>> plans_;
};

}  // namespace

std::vector<ProblemSpec> hgemm_conformance_problems() {
  std::vector<ProblemSpec> problems;
  const std::vector<Shape> shapes = {
      // smaller than one tile in M, N or both; one partial K step
      {1, 1, 8}, {1, 257, 8}, {17, 1, 24}, {65, 129, 72}, {129, 65, 264},
      // edges in M and N, N odd (scalar stores) and N % 8 == 0 (TMA stores), K not a multiple of 64
      {1000, 17, 128}, {17, 4093, 512}, {200, 300, 136}, {127, 255, 1000}, {65, 520, 200},
      // whole tiles
      {128, 128, 64}, {256, 256, 256}, {384, 512, 640}, {1024, 1024, 1024},
      // many tiles with edges: several persistent waves, cluster strips with an odd tile row count
      {4093, 1000, 1024}, {4093, 2049, 1032}, {1000, 4093, 4096}, {2900, 776, 512},
      // refused: K not a multiple of 8 (kHgemmRefusals)
      {17, 17, 17}, {64, 64, 1}, {128, 128, 1031},
      // small M (decode): M = 1, 3, 16, 64; N odd, below one 128-column block and a whole number
      // of them; K tails; short N with long K (rung 11 splits K over many CTAs)
      {3, 1001, 520}, {1, 4096, 4104}, {16, 4096, 4096}, {64, 4093, 1032}, {64, 200, 8192}, {33, 77, 16392},
      // M <= 8 (rung 12): every M from 1 to 8 with odd N, K tails of one piece, a row of K that
      // leaves some threads of a group idle (576 = 72 pieces) and one long enough for 256-thread
      // groups
      {2, 77, 1032}, {4, 129, 8}, {6, 576, 1536}, {7, 33, 576}, {8, 1000, 2056}, {8, 31, 16392},
      // 8 < M <= 64 (rung 14: M in token tiles of 8): 2, 4, 6 and 7 tiles (1, 3, 5 and 8 are
      // above), N odd, K tails of 24, 8, 40 and 56 past a 64-deep tile, 8 to 24 splits that do not
      // divide the K tiles evenly
      {9, 135, 2136}, {31, 1003, 4168}, {47, 389, 1576}, {55, 127, 6200},
  };
  for (const Shape& dims : shapes) problems.push_back({dims});
  problems.push_back({{127, 129, 136}, std::nullopt, {{"alpha", 1.5}}});
  problems.push_back({{127, 129, 136}, std::nullopt, {{"beta", 1.0}}});
  problems.push_back({{1000, 1000, 104}, std::nullopt, {{"alpha", -0.5}, {"beta", 0.25}}});
  problems.push_back({{256, 264, 256}, std::nullopt, {{"alpha", 2.0}, {"beta", -1.0}}});
  problems.push_back({{5, 300, 1000}, std::nullopt, {{"alpha", -0.5}, {"beta", 0.25}}});
  problems.push_back({{17, 257, 3000}, std::nullopt, {{"alpha", 2.0}, {"beta", -1.0}}});
  problems.push_back({{64, 4096, 4096}, std::nullopt, {{"beta", 1.0}}});
  return problems;
}

const std::vector<std::string>& hgemm_refusals() {
  static const std::vector<std::string> refusals = {"17x17x17 bf16", "64x64x1 bf16", "128x128x1031 bf16"};
  return refusals;
}

std::string hgemm_shape_error(const Problem& problem) {
  const GemmShape s = gemm_shape(problem);
  if (s.k % kKMultiple != 0)
    return fmt::format(
        "K must be a multiple of {} (got {}): rows of A and B are moved in 16-byte pieces (vector "
        "loads, cp.async, TMA), which must start 16-byte aligned",
        kKMultiple, s.k);
  return {};
}

std::string small_m_shape_error(const Problem& problem) {
  if (std::string error = hgemm_shape_error(problem); !error.empty()) return error;
  const GemmShape s = gemm_shape(problem);
  if (s.m > kSmallMMaxM)
    return fmt::format(
        "M must be at most {} (got {}): this rung pads the rows of A to at most four 16-row MMA tiles "
        "and streams B once for all of them; larger M is the tile rungs' work",
        kSmallMMaxM, s.m);
  return {};
}

const std::vector<std::string>& small_m_refusals() {
  static const std::vector<std::string> refusals = {
      // K % 8 != 0, as every rung
      "17x17x17 bf16", "64x64x1 bf16", "128x128x1031 bf16",
      // M > 64
      "65x129x72 bf16", "129x65x264 bf16", "1000x17x128 bf16", "200x300x136 bf16", "127x255x1000 bf16",
      "65x520x200 bf16", "128x128x64 bf16", "256x256x256 bf16", "384x512x640 bf16", "1024x1024x1024 bf16",
      "4093x1000x1024 bf16", "4093x2049x1032 bf16", "1000x4093x4096 bf16", "2900x776x512 bf16",
      "127x129x136 bf16 alpha=1.5", "127x129x136 bf16 beta=1", "1000x1000x104 bf16 alpha=-0.5 beta=0.25",
      "256x264x256 bf16 alpha=2 beta=-1"};
  return refusals;
}

std::string small_m_weights_as_a_shape_error(const Problem& problem) {
  if (std::string error = hgemm_shape_error(problem); !error.empty()) return error;
  const GemmShape s = gemm_shape(problem);
  if (s.m > kSmallMMaxM)
    return fmt::format(
        "M must be at most {} (got {}): this rung holds the rows of A as at most {} token tiles of {} "
        "(the MMA's n8 operand) and streams B once for all of them; larger M is the tile rungs' work",
        kSmallMMaxM, s.m, kSmallMMaxTokenTiles, kSmallMTokensPerTile);
  return {};
}

std::string small_m_gemv_shape_error(const Problem& problem) {
  if (std::string error = hgemm_shape_error(problem); !error.empty()) return error;
  const GemmShape s = gemm_shape(problem);
  if (s.m > kSmallMGemvMaxM)
    return fmt::format(
        "M must be at most {} (got {}): this rung keeps M x 2 or 4 FP32 sums per thread and does M "
        "multiply-adds per element of B on the CUDA cores; larger M is rung 11's and the tile rungs' work",
        kSmallMGemvMaxM, s.m);
  return {};
}

const std::vector<std::string>& small_m_gemv_refusals() {
  static const std::vector<std::string> refusals = [] {
    std::vector<std::string> labels = small_m_refusals();  // K % 8 != 0, and M > 64
    for (const char* label : {"17x1x24 bf16", "17x4093x512 bf16", "16x4096x4096 bf16", "64x4093x1032 bf16", "64x200x8192 bf16",
                              "33x77x16392 bf16", "9x135x2136 bf16", "31x1003x4168 bf16", "47x389x1576 bf16",
                              "55x127x6200 bf16", "17x257x3000 bf16 alpha=2 beta=-1", "64x4096x4096 bf16 beta=1"})
      labels.emplace_back(label);  // 8 < M <= 64
    return labels;
  }();
  return refusals;
}

double gelu_tanh_reference(double x) { return core::gelu_tanh<core::ReferenceMath>(x); }

OpSpec make_hgemm_op() { return make_gemm_op(hgemm_config(kHgemmOp)); }

OpSpec make_gemm_bias_gelu_op() {
  OpConfig op = gemm_op_config(hgemm_config(kBiasGeluOp));
  op.description = "C = gelu_tanh(alpha.A.B + beta.C + bias[col]), row-major, A/B/C bf16, B N×K, "
                   "FP32 accumulation, bias bf16 of N";
  op.operands.push_back(input("bias", dims_at({1})));

  const auto gemm_host = op.host_reference;
  op.host_reference = [gemm_host](const Problem& p, const HostTensors& in) {
    HostTensors values = gemm_host(p, in);
    const std::vector<double>& bias = in.at("bias");
    std::vector<double>& c = values.at("C");
    const std::size_t n = bias.size();
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = gelu_tanh_reference(c[i] + bias[i % n]);
    return values;
  };
  const auto gemm_device = op.device_reference;
  op.device_reference = [gemm_device](const Problem& p, const Operands& o, Context& context) {
    References values = gemm_device(p, o, context);
    DeviceBuffer<double>& c = values.at("C");
    const Tensor& bias = o["bias"];
    DeviceBuffer<double> bias64(bias.count());
    convert_to_double(bias.raw(), bias.dtype, bias.count(), bias64.data(), context.stream());
    bias_gelu_reference_inplace(c.data(), bias64.data(), gemm_shape(p).m, gemm_shape(p).n,
                                context.stream());
    return values;
  };
  // The definition (and the separate-kernel peer) stores alpha.A.B + beta.C in bf16 before the
  // activation: two roundings.
  const auto gemm_accuracy = op.accuracy;
  op.accuracy = [gemm_accuracy](const Problem& p, const std::string& output, DType type) {
    Accuracy accuracy = gemm_accuracy(p, output, type);
    accuracy.roundings += 1;
    return accuracy;
  };

  auto plans = std::make_shared<LtPlans>();
  op.baseline_name = "cuBLASLt matmul with its GELU_BIAS epilogue (bf16, FP32 accumulation)";
  op.baseline = [plans](const Problem& p, Operands& o, Context& context) {
    plans->get(context.cublaslt(), gemm_shape(p))
        .run(static_cast<float>(p.param("alpha")), o["A"].raw(), o["B"].raw(),
             static_cast<float>(p.param("beta")), o["C"].raw(), context.stream(), o["bias"].raw());
  };
  const auto gemm_baseline = gemm_op_config(hgemm_config(kHgemmOp)).baseline;
  op.peers.clear();  // the plain GEMM's peers compute no bias or GELU
  op.peers.push_back({"cuBLAS GemmEx + separate bias+GELU kernel", [gemm_baseline](const Problem& p,
                                                                                 Operands& o, Context& context) {
                        gemm_baseline(p, o, context);
                        const GemmShape s = gemm_shape(p);
                        bias_gelu_inplace(o["C"].data<bf16>(), o["bias"].data<bf16>(), static_cast<int>(s.m),
                                          static_cast<int>(s.n), context.stream());
                      }});
  return build_op(std::move(op));
}

}  // namespace kc::stage3
