// kc/engine/gguf.hpp — a reader for GGUF, llama.cpp's model file format (versions 2 and 3).
//
// A GGUF file, all little-endian:
//
//   header        "GGUF", u32 version, u64 tensor_count, u64 metadata_kv_count
//   metadata      metadata_kv_count x (string key, u32 value type, value)
//   tensor infos  tensor_count x (string name, u32 n_dims, u64 dims[n_dims], u32 ggml type,
//                                 u64 offset into the data section)
//   padding       zeros up to a multiple of the alignment (metadata general.alignment, else 32)
//   data section  the tensors' bytes, each starting at a multiple of the alignment
//
// A string is a u64 byte count and that many UTF-8 bytes (no terminator). An array value is a
// u32 element type, a u64 element count and the elements, which may themselves be arrays.
// dims[0] is the innermost dimension (ggml's ne[0], the length of a row). Version 1 (32-bit
// counts) is not read; version 3 differs from 2 only in allowing big-endian files, which this
// reader does not accept.
//
// The file is memory-mapped: tensor_bytes() returns views into the mapping, no copies. Every
// malformed input — truncation, counts that cannot fit in the file, lengths past its end, unknown
// types, misaligned or overlapping tensor data, duplicate names — throws kc::Error naming the
// file, the byte offset and what is wrong, before anything reads outside the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kc/engine/ggml_types.hpp"
#include "kc/engine/mapped_file.hpp"

namespace kc::engine {

// GGUF's metadata value types (gguf_metadata_value_type).
enum class GgufValueType : std::uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};

std::string_view gguf_value_type_name(GgufValueType type);

class GgufArray;

// One metadata value. Strings are views into the mapped file and arrays are shared, so a value is
// cheap to copy; both stay valid while the GgufFile that produced them lives. The accessors throw
// kc::Error when the value is not of a kind they can return exactly.
class GgufValue {
 public:
  using Payload = std::variant<std::uint64_t, std::int64_t, double, bool, std::string_view,
                               std::shared_ptr<const GgufArray>>;
  GgufValue(GgufValueType type, Payload payload) : type_(type), payload_(std::move(payload)) {}

  GgufValueType type() const { return type_; }
  bool is_integer() const;  // uint8 ... int64
  bool is_float() const;    // float32, float64

  // Any integer type whose value fits the result (a negative value is not a uint64).
  std::uint64_t as_uint64() const;
  std::int64_t as_int64() const;
  // float32, float64 or an integer type.
  double as_double() const;
  bool as_bool() const;
  std::string_view as_string() const;
  const GgufArray& as_array() const;

 private:
  GgufValueType type_;
  Payload payload_;
};

// An array value: one element type, any number of elements (arrays of arrays are allowed).
// Numbers and booleans are read in place from the file when asked for, so a vocabulary's scores
// or token types cost no copy; strings are views; nested arrays are parsed once.
class GgufArray {
 public:
  GgufArray(GgufValueType element_type, std::size_t size, const std::byte* fixed_size_elements,
            std::vector<std::string_view> strings, std::vector<GgufValue> arrays);

  GgufValueType element_type() const { return element_type_; }
  std::size_t size() const { return size_; }
  // Element i (throws kc::Error when i >= size()).
  GgufValue at(std::size_t i) const;

 private:
  GgufValueType element_type_;
  std::size_t size_;
  const std::byte* fixed_size_elements_;   // numbers and booleans: size_ elements, in the file
  std::vector<std::string_view> strings_;  // string elements
  std::vector<GgufValue> arrays_;          // array elements
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<std::uint64_t> dims;  // dims[0] innermost (ggml ne[0]); 0 to 4 of them
  GgmlType type;
  std::uint64_t offset = 0;       // into the data section, as the file states it
  std::uint64_t file_offset = 0;  // from the start of the file
  std::uint64_t element_count = 0;
  std::uint64_t byte_size = 0;
};

class GgufFile {
 public:
  // Maps and parses the file; throws kc::Error (file, offset, what) when it is not a valid GGUF.
  explicit GgufFile(const std::string& path);
  // The same for bytes already in hand (MappedFile::copy_of); errors name file.path().
  explicit GgufFile(MappedFile file);

  const std::string& path() const { return file_.path(); }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_offset_; }  // start of the data section
  // The whole mapped file.
  ByteView bytes() const { return file_.bytes(); }

  // Metadata in file order; find() is nullptr when the key is absent, at() throws naming it.
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  const GgufValue& at(std::string_view key) const;

  // Tensors in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  const GgufTensorInfo& tensor(std::string_view name) const;

  // The tensor's bytes, inside the mapping (zero-copy).
  ByteView tensor_bytes(const GgufTensorInfo& tensor) const;
  // The tensor dequantized to float (dequantize.hpp says which types can be).
  std::vector<float> tensor_to_float(const GgufTensorInfo& tensor) const;

 private:
  MappedFile file_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::map<std::string, std::size_t, std::less<>> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;
};

}  // namespace kc::engine
