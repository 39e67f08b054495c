#include "kc/common/problem.hpp"

#include <charconv>

namespace kc {

std::string Problem::shape() const {
  std::string text;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) text += 'x';
    text += std::to_string(dims[i]);
  }
  return text;
}

std::string Problem::label() const {
  std::string text = shape();
  if (alpha != 1.0 || beta != 0.0) text += fmt::format(" a={:g} b={:g}", alpha, beta);
  return text;
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

Tensor& Operands::add(std::string name, DType dtype, std::vector<std::int64_t> shape,
                      bool is_output) {
  for (const Tensor& t : tensors_)
    require(t.name != name, "operand '{}' added twice", name);
  Tensor& tensor = tensors_.emplace_back();
  tensor.name = std::move(name);
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.is_output = is_output;
  tensor.storage = DeviceBuffer<std::byte>(dtype_bytes(dtype, tensor.count()));
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
