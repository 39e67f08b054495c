#include "kc/common/problem.hpp"

#include <charconv>
#include <cstdlib>

namespace kc {
namespace {

std::string param_names(const std::vector<Param>& params) {
  if (params.empty()) return "none";
  std::string names;
  for (const Param& p : params) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

}  // namespace

double Problem::param(std::string_view name) const {
  for (const Param& p : params)
    if (p.name == name) return p.value;
  throw Error(fmt::format("op '{}' has no parameter '{}' (its parameters: {})", op, name,
                          param_names(params)));
}

bool Problem::has_param(std::string_view name) const {
  for (const Param& p : params)
    if (p.name == name) return true;
  return false;
}

Problem& Problem::set(std::string_view name, double value) {
  for (Param& p : params)
    if (p.name == name) {
      p.value = value;
      return *this;
    }
  throw Error(fmt::format("op '{}' has no parameter '{}' (its parameters: {})", op, name,
                          param_names(params)));
}

std::string Problem::shape() const {
  std::string text;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) text += 'x';
    text += std::to_string(dims[i]);
  }
  return text;
}

std::string Problem::params_text() const {
  std::string text;
  for (const Param& p : params)
    if (!p.is_default()) text += fmt::format("{}{}={:g}", text.empty() ? "" : " ", p.name, p.value);
  return text;
}

std::string Problem::label() const {
  std::string text = shape() + " " + std::string(dtype_name(dtype));
  const std::string extra = params_text();
  if (!extra.empty()) text += " " + extra;
  return text;
}

Problem make_problem(std::string op, const std::vector<ParamSpec>& specs,
                     std::vector<std::int64_t> dims, DType dtype, const ParamValues& values) {
  Problem problem;
  problem.op = std::move(op);
  problem.dims = std::move(dims);
  problem.dtype = dtype;
  for (const ParamSpec& spec : specs)
    problem.params.push_back({spec.name, spec.default_value, spec.default_value});
  for (const auto& [name, value] : values) problem.set(name, value);
  return problem;
}

std::vector<std::int64_t> parse_shape(std::string_view text) {
  std::vector<std::int64_t> dims;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find('x', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view part = text.substr(begin, end - begin);
    std::int64_t value = 0;
    const auto [next, status] = std::from_chars(part.data(), part.data() + part.size(), value);
    require(!part.empty() && status == std::errc() && next == part.data() + part.size() && value >= 1,
            "bad shape '{}': write positive integers joined by 'x', e.g. 4096x4096x4096", text);
    dims.push_back(value);
    begin = end + 1;
  }
  return dims;
}

std::pair<std::string, double> parse_param(std::string_view text) {
  const std::size_t equals = text.find('=');
  require(equals != std::string_view::npos && equals > 0 && equals + 1 < text.size(),
          "bad parameter '{}': write name=value, e.g. causal=1 or alpha=1.5", text);
  const std::string value_text(text.substr(equals + 1));
  char* end = nullptr;
  const double value = std::strtod(value_text.c_str(), &end);
  require(end != value_text.c_str() && *end == '\0',
          "bad parameter '{}': '{}' is not a number", text, value_text);
  return {std::string(text.substr(0, equals)), value};
}

std::size_t Tensor::count() const {
  std::size_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

void Tensor::check_type(DType requested) const {
  // tf32 tensors are stored as float.
  const DType stored = dtype == DType::tf32 ? DType::f32 : dtype;
  require(stored == requested, "tensor '{}' holds {} but was read as {}", name, dtype_name(dtype),
          dtype_name(requested));
}

void Tensor::upload(const void* host, std::size_t byte_count, cudaStream_t stream) {
  require(byte_count <= bytes(), "tensor '{}': {} bytes do not fit its {} bytes", name, byte_count,
          bytes());
  KC_CUDA_CHECK(cudaMemcpyAsync(raw(), host, byte_count, cudaMemcpyHostToDevice, stream));
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
}

Tensor& Operands::add(std::string name, DType dtype, std::vector<std::int64_t> shape,
                      bool is_output) {
  for (const Tensor& t : tensors_)
    require(t.name != name, "operand '{}' added twice", name);
  Tensor& tensor = tensors_.emplace_back();
  tensor.name = std::move(name);
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.is_output = is_output;
  tensor.storage = DeviceBuffer<std::byte>(Tensor::kGuardBytes + tensor.bytes() + Tensor::kGuardBytes);
  return tensor;
}

Tensor& Operands::operator[](std::string_view name) {
  for (Tensor& t : tensors_)
    if (t.name == name) return t;
  throw Error(fmt::format("no operand named '{}'", name));
}

const Tensor& Operands::operator[](std::string_view name) const {
  for (const Tensor& t : tensors_)
    if (t.name == name) return t;
  throw Error(fmt::format("no operand named '{}'", name));
}

}  // namespace kc
