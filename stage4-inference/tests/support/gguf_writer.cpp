#include "support/gguf_writer.hpp"

#include <algorithm>
#include <cstring>

namespace kc::engine::test_support {

Bytes& Bytes::str(std::string_view s) {
  u64(s.size());
  return raw(s.data(), s.size());
}

Bytes& Bytes::raw(const void* source, std::size_t size) {
  const auto* begin = static_cast<const std::byte*>(source);
  data.insert(data.end(), begin, begin + size);
  return *this;
}

Value v_u8(std::uint8_t v) { return {gguf_type::uint8, Bytes().u8(v)}; }
Value v_i8(std::int8_t v) { return {gguf_type::int8, Bytes().i8(v)}; }
Value v_u16(std::uint16_t v) { return {gguf_type::uint16, Bytes().u16(v)}; }
Value v_i16(std::int16_t v) { return {gguf_type::int16, Bytes().i16(v)}; }
Value v_u32(std::uint32_t v) { return {gguf_type::uint32, Bytes().u32(v)}; }
Value v_i32(std::int32_t v) { return {gguf_type::int32, Bytes().i32(v)}; }
Value v_u64(std::uint64_t v) { return {gguf_type::uint64, Bytes().u64(v)}; }
Value v_i64(std::int64_t v) { return {gguf_type::int64, Bytes().i64(v)}; }
Value v_f32(float v) { return {gguf_type::float32, Bytes().f32(v)}; }
Value v_f64(double v) { return {gguf_type::float64, Bytes().f64(v)}; }
Value v_bool(bool v) { return {gguf_type::boolean, Bytes().u8(v ? 1 : 0)}; }
Value v_string(std::string_view v) { return {gguf_type::string, Bytes().str(v)}; }

Value v_array(std::uint32_t element_type, const std::vector<Value>& elements) {
  Value value{gguf_type::array, Bytes().u32(element_type).u64(elements.size())};
  for (const Value& element : elements) value.encoded.append(element.encoded);
  return value;
}

Value v_strings(const std::vector<std::string>& strings) {
  std::vector<Value> elements;
  for (const std::string& s : strings) elements.push_back(v_string(s));
  return v_array(gguf_type::string, elements);
}

GgufWriter& GgufWriter::add(std::string key, Value value) {
  metadata_.emplace_back(std::move(key), std::move(value));
  return *this;
}

GgufWriter& GgufWriter::add_tensor(TensorSpec tensor) {
  tensors_.push_back(std::move(tensor));
  return *this;
}

BuiltGguf GgufWriter::build() const {
  const auto align_up = [&](std::uint64_t n) {
    return (n + alignment - 1) / alignment * alignment;
  };
  // Place the tensors first: an offset not given is the next aligned position.
  std::vector<std::uint64_t> offsets;
  std::uint64_t next = 0;
  for (const TensorSpec& tensor : tensors_) {
    const std::uint64_t offset = tensor.offset.value_or(align_up(next));
    offsets.push_back(offset);
    next = std::max(next, offset + tensor.data.size());
  }

  Bytes file;
  file.raw("GGUF", 4).u32(version);
  file.u64(tensor_count.value_or(tensors_.size()));
  file.u64(metadata_count.value_or(metadata_.size()));
  for (const auto& [key, value] : metadata_) file.str(key).u32(value.type).append(value.encoded);

  BuiltGguf built;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const TensorSpec& tensor = tensors_[i];
    built.tensor_info_offsets.push_back(file.size());
    file.str(tensor.name).u32(static_cast<std::uint32_t>(tensor.dims.size()));
    for (std::uint64_t dim : tensor.dims) file.u64(dim);
    file.u32(tensor.type).u64(offsets[i]);
  }
  built.data_offset = align_up(file.size());
  file.data.resize(built.data_offset);  // zero padding
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const std::vector<std::byte>& data = tensors_[i].data;
    if (data.empty()) continue;
    const std::size_t at = built.data_offset + offsets[i];
    if (file.data.size() < at + data.size()) file.data.resize(at + data.size());
    std::copy(data.begin(), data.end(), file.data.begin() + static_cast<std::ptrdiff_t>(at));
  }
  built.bytes = std::move(file.data);
  return built;
}

std::vector<std::byte> f32_bytes(const std::vector<float>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<std::byte> u16_bytes(const std::vector<std::uint16_t>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(std::uint16_t));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

}  // namespace kc::engine::test_support
