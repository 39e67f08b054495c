#include "kc/common/op_builder.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "kc/common/timing.hpp"

namespace kc {
namespace {

std::size_t element_count(const Shape& shape) {
  std::size_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

bool is_read(const OperandSpec& spec, const Problem& p) { return !spec.is_read || spec.is_read(p); }

// Fills, poisons and guards every operand: the values make_operands promises.
void initialize_operands(const std::vector<OperandSpec>& specs, const Problem& p, Operands& operands,
                         std::uint64_t seed, cudaStream_t stream) {
  std::uint64_t index = 0;
  for (const OperandSpec& spec : specs) {
    Tensor& tensor = operands[spec.name];
    const std::uint64_t operand_seed = seed * 16 + index++;
    if (spec.initialize)
      spec.initialize(p, tensor, operand_seed, stream);
    else if (spec.role == Role::output || !is_read(spec, p))
      poison(tensor.raw(), tensor.dtype, tensor.count(), stream);
    else
      fill_random(tensor.raw(), tensor.dtype, tensor.count(), operand_seed, spec.fill, stream);
    tensor.fill_guards(stream);
  }
}

std::vector<Problem> expand(const OpSpec& op, const std::vector<ProblemSpec>& specs) {
  std::vector<Problem> problems;
  for (const ProblemSpec& spec : specs) {
    if (spec.dtype) {
      problems.push_back(op.problem(spec.dims, *spec.dtype, spec.params));
    } else {
      for (DType t : op.dtypes) problems.push_back(op.problem(spec.dims, t, spec.params));
    }
  }
  return problems;
}

}  // namespace

ShapeFn dims_at(std::initializer_list<int> indices) {
  return [picked = std::vector<int>(indices)](const Problem& p) {
    Shape shape;
    for (int i : picked) shape.push_back(p.dims[static_cast<std::size_t>(i)]);
    return shape;
  };
}

OperandSpec input(std::string name, ShapeFn shape, FillSpec fill, std::optional<DType> dtype) {
  OperandSpec spec;
  spec.name = std::move(name);
  spec.dtype = dtype;
  spec.shape = std::move(shape);
  spec.role = Role::input;
  spec.fill = fill;
  return spec;
}

OperandSpec output(std::string name, ShapeFn shape, std::optional<DType> dtype) {
  OperandSpec spec;
  spec.name = std::move(name);
  spec.dtype = dtype;
  spec.shape = std::move(shape);
  spec.role = Role::output;
  return spec;
}

void CopyScratch::copy(std::size_t bytes, cudaStream_t stream) {
  if (source_.size() < bytes) {
    source_ = DeviceBuffer<std::byte>();  // free before allocating the larger pair
    destination_ = DeviceBuffer<std::byte>();
    source_ = DeviceBuffer<std::byte>(bytes);
    destination_ = DeviceBuffer<std::byte>(bytes);
    // Copy written data, never untouched memory, as every kc input is.
    fill_random(source_.data(), DType::i8, bytes, 99, FillSpec::uniform(-127, 127), stream);
  }
  static const bool use_kernel = [] {
    const char* method = std::getenv("KC_COPY_BASELINE");
    return method != nullptr && std::string(method) == "kernel";
  }();
  if (use_kernel) {
    const std::size_t vectors = bytes / 16 * 16;  // the kernel moves 16-byte vectors; the rest:
    copy_with_kernel(destination_.data(), source_.data(), vectors, stream);
    if (bytes > vectors)
      KC_CUDA_CHECK(cudaMemcpyAsync(destination_.data() + vectors, source_.data() + vectors,
                                    bytes - vectors, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  KC_CUDA_CHECK(cudaMemcpyAsync(destination_.data(), source_.data(), bytes,
                                cudaMemcpyDeviceToDevice, stream));
}

double operand_bytes(const std::vector<OperandSpec>& operands, const Problem& problem) {
  double bytes = 0.0;
  for (const OperandSpec& spec : operands) {
    const bool read = spec.role != Role::output && is_read(spec, problem);
    const bool written = spec.role != Role::input;
    const double once =
        static_cast<double>(dtype_bytes(spec.dtype_for(problem), element_count(spec.shape(problem))));
    bytes += (read ? once : 0.0) + (written ? once : 0.0);
  }
  return bytes;
}

HostTensors host_inputs(const std::vector<OperandSpec>& specs, const Operands& operands,
                        cudaStream_t stream) {
  HostTensors inputs;
  for (const OperandSpec& spec : specs)
    if (spec.role != Role::output) {
      const Tensor& tensor = operands[spec.name];
      inputs[spec.name] = to_host_double(tensor.raw(), tensor.dtype, tensor.count(), stream);
    }
  return inputs;
}

References upload_references(HostTensors host, cudaStream_t stream) {
  References references;
  for (auto& [name, values] : host) {
    DeviceBuffer<double> buffer(values.size());
    if (!values.empty()) buffer.copy_from_host(values, stream);
    references.emplace(name, std::move(buffer));
  }
  return references;
}

double round_to(DType dtype, double x) {
  switch (dtype) {
    case DType::f64: return x;
    case DType::f32:
    case DType::tf32: return static_cast<double>(static_cast<float>(x));
    case DType::f16: return static_cast<double>(__half2float(__double2half(x)));
    case DType::bf16: return static_cast<double>(__bfloat162float(__double2bfloat16(x)));
    default: break;
  }
  throw Error(fmt::format("round_to: {} is not a floating-point type kc rounds references to",
                          dtype_name(dtype)));
}

OpSpec build_op(OpConfig config) {
  require(!config.name.empty() && !config.operands.empty(), "an op needs a name and operands");
  require(static_cast<bool>(config.host_reference) || static_cast<bool>(config.device_reference),
          "op '{}' needs a reference (host_reference, device_reference or both)", config.name);
  require(!config.dtypes.empty(), "op '{}' must name the dtypes it is defined for", config.name);
  require(static_cast<bool>(config.baseline) || config.copy_scratch != nullptr,
          "op '{}': without a baseline of its own a memory-bound op needs the copy scratch",
          config.name);
  OpSpec op;
  op.name = config.name;
  op.description = config.description;
  op.dim_names = config.dim_names;
  op.dtypes = config.dtypes;
  op.params = config.params;
  op.bound = config.bound;
  op.math = config.math;
  const auto operands = std::make_shared<const std::vector<OperandSpec>>(std::move(config.operands));

  op.work = [operands, flops = config.flops, bytes = config.bytes](const Problem& p) {
    Work work;
    work.flops = flops ? flops(p) : 0.0;
    work.bytes = bytes ? bytes(p) : operand_bytes(*operands, p);
    return work;
  };

  const std::string name = config.name;
  const std::size_t dims = config.dim_names.size();
  op.supports = [name, dims, extra = config.supports](const Problem& p) -> std::string {
    if (p.dims.size() != dims) return fmt::format("{} takes {} dimensions, got {}", name, dims, p.shape());
    for (std::int64_t d : p.dims)
      if (d < 1 || d > INT32_MAX)
        return fmt::format("{}: every dimension must be in [1, 2^31 - 1] (got {})", name, p.shape());
    return extra ? extra(p) : std::string();
  };

  op.make_operands = [operands](const Problem& p, std::uint64_t seed, Context& context) {
    Operands result;
    for (const OperandSpec& spec : *operands)
      result.add(spec.name, spec.dtype_for(p), spec.shape(p), spec.role != Role::input);
    initialize_operands(*operands, p, result, seed, context.stream());
    return result;
  };
  op.reset_operands = [operands](const Problem& p, Operands& o, std::uint64_t seed, Context& context) {
    initialize_operands(*operands, p, o, seed, context.stream());
  };

  op.reference = [operands, host = config.host_reference, device = config.device_reference,
                  work = config.reference_work](const Problem& p, const Operands& o, Context& context) {
    bool use_host = static_cast<bool>(host);
    if (host && device) {
      double size = 0.0;
      if (work) {
        size = work(p);
      } else {
        for (const OperandSpec& spec : *operands)
          if (spec.role != Role::input) size += static_cast<double>(element_count(spec.shape(p)));
      }
      use_host = size <= static_cast<double>(context.cpu_reference_limit);
    }
    if (!use_host) return device(p, o, context);
    return upload_references(host(p, host_inputs(*operands, o, context.stream())), context.stream());
  };

  op.accuracy = [accuracy = config.accuracy](const Problem& p, const Tensor& output) {
    return accuracy ? accuracy(p, output.name, output.dtype) : Accuracy{output.dtype};
  };

  if (config.baseline) {
    op.baseline_name = config.baseline_name;
    op.baseline = config.baseline;
    op.baseline_supports = config.baseline_supports;
    op.baseline_computes_op = true;
  } else {
    op.baseline_name = "copy of the same bytes (cudaMemcpy)";
    op.baseline = [operands, bytes = config.bytes, scratch = config.copy_scratch](
                      const Problem& p, Operands&, Context& context) {
      const double total = bytes ? bytes(p) : operand_bytes(*operands, p);
      // A copy reads and writes: half the op's traffic each way.
      scratch->copy(static_cast<std::size_t>(total / 2.0), context.stream());
    };
    op.baseline_computes_op = false;
  }
  op.peers = std::move(config.peers);
  op.compare_choice = std::move(config.compare_choice);
  op.bench_problems = expand(op, config.bench);
  op.conformance_problems = expand(op, config.conformance);
  return op;
}

}  // namespace kc
