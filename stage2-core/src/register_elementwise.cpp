// Element-wise ops: vector add, scale, activations, bias + activation, SwiGLU.
#include <fmt/format.h>

#include "kc/common/parallel.hpp"
#include "kc/stage2/kernels.hpp"
#include "kc/stage2/references.hpp"
#include "register_helpers.hpp"

namespace kc::stage2::detail {
namespace {

// 2^25 elements: 64 MiB per bf16 tensor, more than the L2 holds, and a CPU reference that takes a
// fraction of a second (kc-bench checks every kernel before timing it).
constexpr std::int64_t kBenchElements = std::int64_t{1} << 25;
const ShapeFn kVector = dims_at({0});
const ShapeFn kMatrix = dims_at({0, 1});
const ShapeFn kRowVector = dims_at({1});
// Wide enough to cover the curved parts of SiLU and GELU and their flat tails.
const FillSpec kActivationInputs = FillSpec::uniform(-8.0, 8.0);

struct ActivationOp {
  Activation activation;
  const char* name;
  const char* formula;
};

constexpr ActivationOp kActivations[] = {
    {Activation::relu, "relu", "max(x, 0)"},
    {Activation::silu, "silu", "x * sigmoid(x)"},
    {Activation::gelu_tanh, "gelu_tanh", "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"},
    {Activation::gelu_erf, "gelu_erf", "0.5 x (1 + erf(x / sqrt(2)))"},
};

OpConfig vector_op(const std::string& name, std::string description,
                   const std::shared_ptr<CopyScratch>& scratch, const ParamValues& params = {}) {
  OpConfig config = memory_op(name, std::move(description), {"count"}, scratch);
  config.bench = {{{kBenchElements}, std::nullopt, params}};
  for (std::int64_t count : {1, 31, 1000, 4097, 65536, 1000003})
    config.conformance.push_back({{count}, std::nullopt, params});
  config.flops = [](const Problem& p) { return elements(p); };
  return config;
}

OpConfig matrix_op(const std::string& name, std::string description,
                   std::vector<std::string> dim_names, const std::shared_ptr<CopyScratch>& scratch) {
  OpConfig config = memory_op(name, std::move(description), std::move(dim_names), scratch);
  // One shape for every dtype: 8192 x 4096, i.e. 2^25 elements, as the vector ops.
  config.bench = {{{8192, 4096}}};
  config.conformance = row_op_conformance_problems();
  return config;
}

// out[i] = f(i) for i < count, on the host's cores (the CPU side of map()).
template <typename F>
std::vector<double> generated(std::size_t count, const F& f) {
  std::vector<double> out(count);
  parallel_for(static_cast<std::int64_t>(count), 8, [&](std::int64_t begin, std::int64_t end) {
    for (auto i = static_cast<std::size_t>(begin); i < static_cast<std::size_t>(end); ++i) out[i] = f(i);
  });
  return out;
}

void add_elementwise_ladder(Registry& registry, const std::string& op, ElementwiseKind kind,
                            Activation activation) {
  add_ladder<ElementwiseArgs>(
      registry, op,
      [kind, activation](const Problem& p, Operands& o, auto type) {
        using T = typename decltype(type)::type;
        ElementwiseArgs<T> a;
        a.kind = kind;
        a.activation = activation;
        a.count = p.dims[0];
        if (kind == ElementwiseKind::scale) a.alpha = static_cast<float>(p.param("alpha"));
        a.a = o["a"].data<T>();
        if (kind == ElementwiseKind::add) a.b = o["b"].data<T>();
        a.out = o["out"].data<T>();
        return a;
      },
      {rung<ElementwiseArgs>("01_scalar", 1, "one element per thread, 2- or 4-byte accesses",
                             [](const auto& a, cudaStream_t s) { elementwise_01_scalar(a, s); }),
       rung<ElementwiseArgs>("02_vectorized", 2, "16-byte accesses: 8 bf16/fp16 or 4 float per thread",
                             [](const auto& a, cudaStream_t s) { elementwise_02_vectorized(a, s); })});
}

}  // namespace

void register_elementwise_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch) {
  {
    OpConfig config = vector_op("vector_add", "out = a + b", scratch);
    config.operands = {input("a", kVector), input("b", kVector), output("out", kVector)};
    config.host_reference = [](const Problem&, const HostTensors& in) {
      const std::vector<double>& a = in.at("a");
      const std::vector<double>& b = in.at("b");
      return HostTensors{{"out", generated(a.size(), [&](std::size_t i) { return a[i] + b[i]; })}};
    };
    registry.add_op(build_op(std::move(config)));
    add_elementwise_ladder(registry, "vector_add", ElementwiseKind::add, Activation::relu);
  }
  {
    // alpha is a parameter: `--param alpha=X` on the kc-bench command line.
    OpConfig config = vector_op("scale", "out = alpha * a, alpha rounded to float", scratch,
                                {{"alpha", -1.75}});
    config.params = {{"alpha", 1.0, "the factor"}};
    config.operands = {input("a", kVector), output("out", kVector)};
    config.host_reference = [](const Problem& p, const HostTensors& in) {
      const double alpha = static_cast<double>(static_cast<float>(p.param("alpha")));  // kernels take a float
      const std::vector<double>& a = in.at("a");
      return HostTensors{{"out", generated(a.size(), [&](std::size_t i) { return alpha * a[i]; })}};
    };
    registry.add_op(build_op(std::move(config)));
    add_elementwise_ladder(registry, "scale", ElementwiseKind::scale, Activation::relu);
  }
  for (const ActivationOp& act : kActivations) {
    OpConfig config = vector_op(act.name, fmt::format("out = {}; limits at +-inf", act.formula), scratch);
    config.operands = {input("a", kVector, kActivationInputs), output("out", kVector)};
    const Activation activation = act.activation;
    config.host_reference = [activation](const Problem&, const HostTensors& in) {
      const std::vector<double>& a = in.at("a");
      return HostTensors{{"out", generated(a.size(), [&](std::size_t i) {
                            return activation_reference(activation, a[i]);
                          })}};
    };
    config.flops = [activation](const Problem& p) {
      return (activation == Activation::relu ? 1.0 : 8.0) * elements(p);
    };
    registry.add_op(build_op(std::move(config)));
    add_elementwise_ladder(registry, act.name, ElementwiseKind::activation, activation);

    const std::string bias_op = std::string("bias_") + act.name;
    OpConfig bias = matrix_op(bias_op, fmt::format("out = act(x + bias[col]), act(x) = {}", act.formula),
                              {"rows", "cols"}, scratch);
    bias.operands = {input("x", kMatrix, kActivationInputs),
                     input("bias", kRowVector, FillSpec::uniform(-0.5, 0.5)), output("out", kMatrix)};
    bias.host_reference = [activation](const Problem& p, const HostTensors& in) {
      const std::vector<double>& x = in.at("x");
      const std::vector<double>& b = in.at("bias");
      const auto cols = static_cast<std::size_t>(p.dims[1]);
      return HostTensors{{"out", generated(x.size(), [&](std::size_t i) {
                            return activation_reference(activation, x[i] + b[i % cols]);
                          })}};
    };
    bias.flops = [activation](const Problem& p) {
      return (activation == Activation::relu ? 2.0 : 9.0) * elements(p);
    };
    // Rung 01 stores x + bias in the dtype before the activation: a second rounding, of an
    // intermediate up to 8.5 in magnitude (the fills), through activations of slope below 1.13.
    bias.accuracy = [](const Problem&, const std::string&, DType output) {
      Accuracy accuracy;
      accuracy.output = output;
      accuracy.roundings = 2;
      accuracy.intermediate_error = 1.13 * unit_roundoff(output) * 8.5;
      return accuracy;
    };
    registry.add_op(build_op(std::move(bias)));
    add_ladder<BiasActivationArgs>(
        registry, bias_op,
        [activation](const Problem& p, Operands& o, auto type) {
          using T = typename decltype(type)::type;
          BiasActivationArgs<T> a;
          a.activation = activation;
          a.rows = static_cast<int>(p.dims[0]);
          a.cols = static_cast<int>(p.dims[1]);
          a.x = o["x"].data<T>();
          a.bias = o["bias"].data<T>();
          a.out = o["out"].data<T>();
          return a;
        },
        {rung<BiasActivationArgs>("01_unfused", 1,
                                  "bias kernel, then activation kernel: out makes a DRAM round trip",
                                  [](const auto& a, cudaStream_t s) { bias_activation_01_unfused(a, s); }),
         rung<BiasActivationArgs>("02_fused", 2, "map(then(Add, act)): one pass, any activation, no new kernel",
                                  [](const auto& a, cudaStream_t s) { bias_activation_02_fused(a, s); })});
  }
  {
    OpConfig config = matrix_op(
        "swiglu", "out = silu(gate) * up from the fused projection [gate | up] (rows x 2*hidden)",
        {"rows", "hidden"}, scratch);
    config.operands = {input("gate_up", [](const Problem& p) { return Shape{p.dims[0], 2 * p.dims[1]}; },
                             FillSpec::uniform(-4.0, 4.0)),
                       output("out", kMatrix)};
    config.host_reference = [](const Problem& p, const HostTensors& in) {
      std::vector<double> out(static_cast<std::size_t>(p.dims[0] * p.dims[1]));
      swiglu_reference(in.at("gate_up").data(), p.dims[0], p.dims[1], out.data());
      return HostTensors{{"out", std::move(out)}};
    };
    config.flops = [](const Problem& p) { return 6.0 * elements(p); };
    registry.add_op(build_op(std::move(config)));
    add_ladder<SwigluArgs>(
        registry, "swiglu",
        [](const Problem& p, Operands& o, auto type) {
          using T = typename decltype(type)::type;
          SwigluArgs<T> a;
          a.rows = static_cast<int>(p.dims[0]);
          a.hidden = static_cast<int>(p.dims[1]);
          a.gate_up = o["gate_up"].data<T>();
          a.out = o["out"].data<T>();
          return a;
        },
        {rung<SwigluArgs>("01_naive", 1, "column-slice views + on_first(Silu, Mul), one element per thread",
                          [](const auto& a, cudaStream_t s) { swiglu_01_naive(a, s); }),
         rung<SwigluArgs>("02_vectorized", 2, "the same views and functor with 16-byte accesses",
                          [](const auto& a, cudaStream_t s) { swiglu_02_vectorized(a, s); })});
  }
}

}  // namespace kc::stage2::detail
