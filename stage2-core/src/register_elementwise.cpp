// Element-wise ops: vector add, scale, activations, bias + activation, SwiGLU.
#include <fmt/format.h>

#include "kc/stage2/kernels.hpp"
#include "kc/stage2/parallel.hpp"
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

std::vector<Problem> vector_problems(const std::string& op, double alpha) {
  std::vector<Problem> problems;
  for (std::int64_t count : {1, 31, 1000, 4097, 65536, 1000003}) problems.push_back({op, {count}, alpha});
  return problems;
}

MemoryOpConfig vector_op(const std::string& name, DType dtype, std::string description, double alpha) {
  MemoryOpConfig config;
  config.name = name;
  config.description = std::move(description);
  config.dtype = dtype;
  config.dim_names = {"count"};
  config.bench_problems = {{name, {kBenchElements}, alpha}};
  config.conformance_problems = vector_problems(name, alpha);
  config.flops = [](const Problem& p) { return elements(p); };
  return config;
}

MemoryOpConfig matrix_op(const std::string& name, DType dtype, std::string description,
                         std::vector<std::string> dim_names) {
  MemoryOpConfig config;
  config.name = name;
  config.description = std::move(description);
  config.dtype = dtype;
  config.dim_names = std::move(dim_names);
  // One shape for every dtype: 8192 x 4096, i.e. 2^25 elements, as the vector ops.
  config.bench_problems = {{name, {8192, 4096}}};
  config.conformance_problems = row_op_conformance_problems(name);
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

template <typename T>
ElementwiseArgs<T> elementwise_args(ElementwiseKind kind, Activation activation, const Problem& p,
                                    Operands& o) {
  ElementwiseArgs<T> a;
  a.kind = kind;
  a.activation = activation;
  a.count = p.dims[0];
  a.alpha = static_cast<float>(p.alpha);
  a.a = o["a"].data<T>();
  if (kind == ElementwiseKind::add) a.b = o["b"].data<T>();
  a.out = o["out"].data<T>();
  return a;
}

template <typename T>
void add_elementwise_ladder(Registry& registry, const std::string& op, ElementwiseKind kind,
                            Activation activation) {
  add_ladder<ElementwiseArgs<T>>(
      registry, op, dtype_of_v<T>,
      [kind, activation](const Problem& p, Operands& o) {
        return elementwise_args<T>(kind, activation, p, o);
      },
      {{{"01_scalar", 1, "one element per thread, 2- or 4-byte accesses"}, &elementwise_01_scalar<T>},
       {{"02_vectorized", 2, "16-byte accesses: 8 bf16/fp16 or 4 float per thread"},
        &elementwise_02_vectorized<T>}});
}

template <typename T>
void register_for(Registry& registry, const std::shared_ptr<CopyScratch>& scratch) {
  constexpr DType dtype = dtype_of_v<T>;
  const std::string type = std::string(dtype_name(dtype));

  {
    MemoryOpConfig config = vector_op(op_name("vector_add", dtype), dtype,
                                      fmt::format("out = a + b, {}", type), 1.0);
    config.operands = {input("a", dtype, kVector), input("b", dtype, kVector),
                       output("out", dtype, kVector)};
    config.reference = [](const Problem&, const HostTensors& in) {
      const std::vector<double>& a = in.at("a");
      const std::vector<double>& b = in.at("b");
      return HostTensors{{"out", generated(a.size(), [&](std::size_t i) { return a[i] + b[i]; })}};
    };
    registry.add_op(make_memory_op(std::move(config), scratch));
    add_elementwise_ladder<T>(registry, op_name("vector_add", dtype), ElementwiseKind::add, Activation::relu);
  }
  {
    // alpha is the problem's scalar: `--alpha` on the kc-bench command line.
    MemoryOpConfig config = vector_op(op_name("scale", dtype), dtype,
                                      fmt::format("out = alpha * a (alpha: the problem's scalar), {}", type),
                                      -1.75);
    config.operands = {input("a", dtype, kVector), output("out", dtype, kVector)};
    config.reference = [](const Problem& p, const HostTensors& in) {
      const double alpha = static_cast<double>(static_cast<float>(p.alpha));  // kernels take a float
      const std::vector<double>& a = in.at("a");
      return HostTensors{{"out", generated(a.size(), [&](std::size_t i) { return alpha * a[i]; })}};
    };
    registry.add_op(make_memory_op(std::move(config), scratch));
    add_elementwise_ladder<T>(registry, op_name("scale", dtype), ElementwiseKind::scale, Activation::relu);
  }
  for (const ActivationOp& act : kActivations) {
    MemoryOpConfig config = vector_op(op_name(act.name, dtype), dtype,
                                      fmt::format("out = {}, {}; limits at +-inf", act.formula, type), 1.0);
    config.operands = {input("a", dtype, kVector, kActivationInputs), output("out", dtype, kVector)};
    const Activation activation = act.activation;
    config.reference = [activation](const Problem&, const HostTensors& in) {
      const std::vector<double>& a = in.at("a");
      return HostTensors{{"out", generated(a.size(), [&](std::size_t i) {
                            return activation_reference(activation, a[i]);
                          })}};
    };
    config.flops = [activation](const Problem& p) {
      return (activation == Activation::relu ? 1.0 : 8.0) * elements(p);
    };
    registry.add_op(make_memory_op(std::move(config), scratch));
    add_elementwise_ladder<T>(registry, op_name(act.name, dtype), ElementwiseKind::activation, activation);

    const std::string bias_op = op_name(std::string("bias_") + act.name, dtype);
    MemoryOpConfig bias = matrix_op(bias_op, dtype,
                                    fmt::format("out = act(x + bias[col]), act(x) = {}, {}", act.formula, type),
                                    {"rows", "cols"});
    bias.operands = {input("x", dtype, kMatrix, kActivationInputs),
                     input("bias", dtype, kRowVector, FillSpec::uniform(-0.5, 0.5)),
                     output("out", dtype, kMatrix)};
    bias.reference = [activation](const Problem& p, const HostTensors& in) {
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
    registry.add_op(make_memory_op(std::move(bias), scratch));
    add_ladder<BiasActivationArgs<T>>(
        registry, bias_op, dtype,
        [activation](const Problem& p, Operands& o) {
          BiasActivationArgs<T> a;
          a.activation = activation;
          a.rows = static_cast<int>(p.dims[0]);
          a.cols = static_cast<int>(p.dims[1]);
          a.x = o["x"].data<T>();
          a.bias = o["bias"].data<T>();
          a.out = o["out"].data<T>();
          return a;
        },
        {{{"01_unfused", 1, "bias kernel, then activation kernel: out makes a DRAM round trip"},
          &bias_activation_01_unfused<T>},
         {{"02_fused", 2, "map(then(Add, act)): one pass, any activation, no new kernel"},
          &bias_activation_02_fused<T>}});
  }
  {
    const std::string op = op_name("swiglu", dtype);
    MemoryOpConfig config = matrix_op(
        op, dtype,
        fmt::format("out = silu(gate) * up from the fused projection [gate | up] (rows x 2*hidden), {}", type),
        {"rows", "hidden"});
    config.operands = {input("gate_up", dtype,
                             [](const Problem& p) { return Shape{p.dims[0], 2 * p.dims[1]}; },
                             FillSpec::uniform(-4.0, 4.0)),
                       output("out", dtype, kMatrix)};
    config.reference = [](const Problem& p, const HostTensors& in) {
      std::vector<double> out(static_cast<std::size_t>(p.dims[0] * p.dims[1]));
      swiglu_reference(in.at("gate_up").data(), p.dims[0], p.dims[1], out.data());
      return HostTensors{{"out", std::move(out)}};
    };
    config.flops = [](const Problem& p) { return 6.0 * elements(p); };
    registry.add_op(make_memory_op(std::move(config), scratch));
    add_ladder<SwigluArgs<T>>(
        registry, op, dtype,
        [](const Problem& p, Operands& o) {
          SwigluArgs<T> a;
          a.rows = static_cast<int>(p.dims[0]);
          a.hidden = static_cast<int>(p.dims[1]);
          a.gate_up = o["gate_up"].data<T>();
          a.out = o["out"].data<T>();
          return a;
        },
        {{{"01_naive", 1, "column-slice views + on_first(Silu, Mul), one element per thread"},
          &swiglu_01_naive<T>},
         {{"02_vectorized", 2, "the same views and functor with 16-byte accesses"}, &swiglu_02_vectorized<T>}});
  }
}

}  // namespace

void register_elementwise_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch) {
  register_for<__nv_bfloat16>(registry, scratch);
  register_for<__half>(registry, scratch);
  register_for<float>(registry, scratch);
}

}  // namespace kc::stage2::detail
