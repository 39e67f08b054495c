// Test support: a small GGUF writer, so the tests can make the files they read — valid ones with
// every value and tensor type, and broken ones with a field set to what a reader must refuse.
//
// It writes what it is told: element types are not checked against the elements, offsets may
// be given by hand, nothing is validated. That is the point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kc::engine::test_support {

// Little-endian bytes, appended to.
class Bytes {
 public:
  Bytes& u8(std::uint8_t v) { return put(v); }
  Bytes& i8(std::int8_t v) { return put(v); }
  Bytes& u16(std::uint16_t v) { return put(v); }
  Bytes& i16(std::int16_t v) { return put(v); }
  Bytes& u32(std::uint32_t v) { return put(v); }
  Bytes& i32(std::int32_t v) { return put(v); }
  Bytes& u64(std::uint64_t v) { return put(v); }
  Bytes& i64(std::int64_t v) { return put(v); }
  Bytes& f32(float v) { return put(v); }
  Bytes& f64(double v) { return put(v); }
  // A GGUF string: u64 byte count, then the bytes.
  Bytes& str(std::string_view s);
  Bytes& raw(const void* data, std::size_t size);
  Bytes& append(const Bytes& other) { return raw(other.data.data(), other.data.size()); }

  std::size_t size() const { return data.size(); }
  std::vector<std::byte> data;

 private:
  template <typename T>
  Bytes& put(T v) {
    return raw(&v, sizeof v);
  }
};

// A metadata value: its GGUF type id and its encoding (what follows the type id).
struct Value {
  std::uint32_t type;
  Bytes encoded;
};

// GGUF value type ids, as the writer takes them (the reader's enum is what is under test).
namespace gguf_type {
constexpr std::uint32_t uint8 = 0, int8 = 1, uint16 = 2, int16 = 3, uint32 = 4, int32 = 5,
                        float32 = 6, boolean = 7, string = 8, array = 9, uint64 = 10, int64 = 11,
                        float64 = 12;
}

Value v_u8(std::uint8_t v);
Value v_i8(std::int8_t v);
Value v_u16(std::uint16_t v);
Value v_i16(std::int16_t v);
Value v_u32(std::uint32_t v);
Value v_i32(std::int32_t v);
Value v_u64(std::uint64_t v);
Value v_i64(std::int64_t v);
Value v_f32(float v);
Value v_f64(double v);
Value v_bool(bool v);
Value v_string(std::string_view v);
// An array of `element_type`; each element contributes its encoding (its own type id is not
// written, as in GGUF).
Value v_array(std::uint32_t element_type, const std::vector<Value>& elements);
Value v_strings(const std::vector<std::string>& strings);

struct TensorSpec {
  std::string name;
  std::vector<std::uint64_t> dims;      // dims[0] innermost, as GGUF writes them
  std::uint32_t type = 0;               // ggml type id
  std::vector<std::byte> data;          // the tensor's bytes (may be left empty for broken files)
  std::optional<std::uint64_t> offset;  // data offset; by default the next aligned position
};

struct BuiltGguf {
  std::vector<std::byte> bytes;
  std::vector<std::size_t> tensor_info_offsets;  // where each tensor info starts
  std::size_t data_offset = 0;                   // where the data section starts
};

class GgufWriter {
 public:
  std::uint32_t version = 3;
  std::uint64_t alignment = 32;  // of the layout; general.alignment is a key the test adds
  std::optional<std::uint64_t> tensor_count;    // written instead of the real count
  std::optional<std::uint64_t> metadata_count;  // written instead of the real count

  GgufWriter& add(std::string key, Value value);
  GgufWriter& add_tensor(TensorSpec tensor);
  BuiltGguf build() const;

 private:
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<TensorSpec> tensors_;
};

// Little helpers for tensor data.
std::vector<std::byte> f32_bytes(const std::vector<float>& values);
std::vector<std::byte> u16_bytes(const std::vector<std::uint16_t>& values);

}  // namespace kc::engine::test_support
