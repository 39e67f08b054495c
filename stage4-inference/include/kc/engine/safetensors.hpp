// kc/engine/safetensors.hpp — a reader for Hugging Face safetensors checkpoints.
//
// A .safetensors file:
//
//   u64 (little-endian) N     the length of the header
//   N bytes of JSON           {"<tensor>": {"dtype": "BF16", "shape": [576, 1536],
//                                           "data_offsets": [begin, end]}, ...,
//                              "__metadata__": {"<key>": "<string>", ...}}   (optional)
//   data section              the tensors' bytes, row-major; begin and end count from here
//
// A large model is split into shards, model-00001-of-00002.safetensors and so on, with
// model.safetensors.index.json naming each tensor's shard in its "weight_map".
//
// Files are memory-mapped and tensors are views into the mapping. Every malformed input — a
// header length past the end, bad JSON, a duplicate name, an unknown dtype, a shape whose bytes
// differ from its data_offsets, offsets out of range or overlapping, an index naming a tensor a
// shard does not hold — throws kc::Error naming the file, a byte offset and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kc/engine/mapped_file.hpp"

namespace kc::engine {

// The dtypes a safetensors header can name.
enum class SafetensorsDType {
  f64,
  f32,
  f16,
  bf16,
  f8_e4m3,
  f8_e5m2,
  i64,
  i32,
  i16,
  i8,
  u64,
  u32,
  u16,
  u8,
  boolean
};

// As the header spells it: "F32", "BF16", "F8_E4M3", "BOOL" ...
std::string_view safetensors_dtype_name(SafetensorsDType dtype);
std::size_t safetensors_dtype_bytes(SafetensorsDType dtype);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDType dtype;
  std::vector<std::uint64_t> shape;  // row-major, outermost first; [] is a scalar
  std::uint64_t element_count = 0;
  std::uint64_t data_begin = 0;  // data_offsets as the header states them
  std::uint64_t data_end = 0;
  ByteView data;  // the bytes, inside the mapping
};

class SafetensorsFile {
 public:
  // Maps and parses the file; throws kc::Error (file, offset, what) when it is not valid.
  explicit SafetensorsFile(const std::string& path);
  // The same for bytes already in hand (MappedFile::copy_of); errors name file.path().
  explicit SafetensorsFile(MappedFile file);

  const std::string& path() const { return file_.path(); }
  std::uint64_t data_offset() const { return data_offset_; }  // 8 + header length
  // The whole mapped file.
  ByteView bytes() const { return file_.bytes(); }

  // Tensors sorted by name.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;
  const SafetensorsTensor& tensor(std::string_view name) const;
  // The header's "__metadata__" (empty when it has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile file_;
  std::uint64_t data_offset_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A whole checkpoint: one file, or the shards an index names, with each tensor found by name.
class SafetensorsCheckpoint {
 public:
  // `path` is a model directory (its model.safetensors.index.json, or else its
  // model.safetensors), an index file, or a single .safetensors file.
  explicit SafetensorsCheckpoint(const std::string& path);

  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  // Every tensor name, sorted.
  std::vector<std::string> tensor_names() const;
  const SafetensorsTensor* find(std::string_view name) const;
  const SafetensorsTensor& tensor(std::string_view name) const;
  // The shard that holds the tensor.
  const SafetensorsFile& shard_of(std::string_view name) const;

 private:
  struct Entry {
    const SafetensorsTensor* tensor;
    const SafetensorsFile* shard;
  };
  const Entry& entry(std::string_view name) const;

  std::string origin_;  // the index or the single file
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, Entry, std::less<>> tensors_;
};

}  // namespace kc::engine
