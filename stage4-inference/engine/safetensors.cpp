#include "kc/engine/safetensors.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>

#include "file_error.hpp"
#include "kc/common/error.hpp"
#include "strict_json.hpp"

namespace kc::engine {

namespace {

using nlohmann::json;

// The safetensors library refuses headers above 100 MB; so does this reader.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::uint64_t kHeaderStart = 8;

struct DTypeInfo {
  SafetensorsDType dtype;
  std::string_view name;
  std::size_t bytes;
};

constexpr DTypeInfo kDTypes[] = {
    {SafetensorsDType::f64, "F64", 8},         {SafetensorsDType::f32, "F32", 4},
    {SafetensorsDType::f16, "F16", 2},         {SafetensorsDType::bf16, "BF16", 2},
    {SafetensorsDType::f8_e4m3, "F8_E4M3", 1}, {SafetensorsDType::f8_e5m2, "F8_E5M2", 1},
    {SafetensorsDType::i64, "I64", 8},         {SafetensorsDType::i32, "I32", 4},
    {SafetensorsDType::i16, "I16", 2},         {SafetensorsDType::i8, "I8", 1},
    {SafetensorsDType::u64, "U64", 8},         {SafetensorsDType::u32, "U32", 4},
    {SafetensorsDType::u16, "U16", 2},         {SafetensorsDType::u8, "U8", 1},
    {SafetensorsDType::boolean, "BOOL", 1},
};

const DTypeInfo& dtype_info(SafetensorsDType dtype) {
  for (const DTypeInfo& info : kDTypes)
    if (info.dtype == dtype) return info;
  throw Error("unknown safetensors dtype");
}

std::string dtype_names() {
  std::string names;
  for (const DTypeInfo& info : kDTypes)
    names += (names.empty() ? "" : ", ") + std::string(info.name);
  return names;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Reports a problem in an index file (model.safetensors.index.json).
[[noreturn]] void index_error(const std::string& path, const std::string& what) {
  detail::throw_file_error(path, 0, what);
}

// Reports a problem in the JSON header, which starts at byte 8.
[[noreturn]] void header_error(const std::string& path, const std::string& what) {
  detail::throw_file_error(path, kHeaderStart, "in the JSON header: " + what);
}

std::uint64_t header_uint(const std::string& path, const json& value, const std::string& what) {
  if (!value.is_number_unsigned())
    header_error(path, fmt::format("{} is {} ({}), not a non-negative integer", what,
                                   detail::json_kind(value), value.dump()));
  return value.get<std::uint64_t>();
}

SafetensorsTensor parse_tensor(const std::string& path, const std::string& name, const json& entry,
                               std::uint64_t data_size) {
  const std::string what = fmt::format("tensor '{}'", name);
  if (!entry.is_object())
    header_error(path, fmt::format("{} is {}, not an object with dtype, shape and data_offsets",
                                   what, detail::json_kind(entry)));
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(field)) header_error(path, fmt::format("{} has no \"{}\"", what, field));

  SafetensorsTensor tensor;
  tensor.name = name;
  const json& dtype = entry.at("dtype");
  if (!dtype.is_string())
    header_error(
        path, fmt::format("the dtype of {} is {}, not a string", what, detail::json_kind(dtype)));
  const auto known = std::find_if(std::begin(kDTypes), std::end(kDTypes), [&](const DTypeInfo& d) {
    return d.name == dtype.get<std::string>();
  });
  if (known == std::end(kDTypes))
    header_error(path, fmt::format("{} has the unknown dtype \"{}\" (known: {})", what,
                                   dtype.get<std::string>(), dtype_names()));
  tensor.dtype = known->dtype;

  const json& shape = entry.at("shape");
  if (!shape.is_array())
    header_error(
        path, fmt::format("the shape of {} is {}, not an array", what, detail::json_kind(shape)));
  tensor.element_count = 1;
  for (const json& dim : shape) {
    tensor.shape.push_back(header_uint(path, dim, "a dimension of " + what));
    if (__builtin_mul_overflow(tensor.element_count, tensor.shape.back(), &tensor.element_count))
      header_error(
          path, fmt::format("the shape {} of {} has more than 2^64 elements", shape.dump(), what));
  }

  const json& offsets = entry.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2)
    header_error(
        path, fmt::format("the data_offsets of {} are {}, not [begin, end]", what, offsets.dump()));
  tensor.data_begin = header_uint(path, offsets[0], "the begin offset of " + what);
  tensor.data_end = header_uint(path, offsets[1], "the end offset of " + what);
  if (tensor.data_begin > tensor.data_end)
    header_error(path, fmt::format("{} has data_offsets [{}, {}], which end before they begin",
                                   what, tensor.data_begin, tensor.data_end));
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(tensor.element_count, std::uint64_t{known->bytes}, &bytes) ||
      bytes != tensor.data_end - tensor.data_begin)
    header_error(path, fmt::format("{} has shape {} of {} ({} elements of {} bytes), but its "
                                   "data_offsets [{}, {}] hold {} bytes",
                                   what, shape_text(tensor.shape), known->name,
                                   tensor.element_count, known->bytes, tensor.data_begin,
                                   tensor.data_end, tensor.data_end - tensor.data_begin));
  if (tensor.data_end > data_size)
    detail::throw_file_error(
        path, kHeaderStart,
        fmt::format("in the JSON header: {} has data_offsets [{}, {}], past the end of the data "
                    "section, which holds {} bytes",
                    what, tensor.data_begin, tensor.data_end, data_size));
  return tensor;
}

}  // namespace

std::string_view safetensors_dtype_name(SafetensorsDType dtype) { return dtype_info(dtype).name; }

std::size_t safetensors_dtype_bytes(SafetensorsDType dtype) { return dtype_info(dtype).bytes; }

// --- SafetensorsFile --------------------------------------------------------------------------

SafetensorsFile::SafetensorsFile(const std::string& path) : SafetensorsFile(MappedFile(path)) {}

SafetensorsFile::SafetensorsFile(MappedFile file) : file_(std::move(file)) {
  const std::string& path = file_.path();
  if (file_.size() < kHeaderStart)
    detail::throw_file_error(path, 0,
                             fmt::format("the file has {} bytes, fewer than the 8 of "
                                         "the header length: not a safetensors file",
                                         file_.size()));
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file_.data(), sizeof header_bytes);  // little-endian hosts only
  if (header_bytes > file_.size() - kHeaderStart)
    detail::throw_file_error(path, 0,
                             fmt::format("the header length is {} bytes, but only {} "
                                         "follow it: truncated, or not a safetensors file",
                                         header_bytes, file_.size() - kHeaderStart));
  if (header_bytes > kMaxHeaderBytes)
    detail::throw_file_error(path, 0,
                             fmt::format("the header length is {} bytes, more than the "
                                         "{} safetensors allows",
                                         header_bytes, kMaxHeaderBytes));
  data_offset_ = kHeaderStart + header_bytes;
  const std::uint64_t data_size = file_.size() - data_offset_;

  const std::string_view text(reinterpret_cast<const char*>(file_.data() + kHeaderStart),
                              static_cast<std::size_t>(header_bytes));
  const json header = detail::parse_strict_json(text, path, kHeaderStart);
  if (!header.is_object())
    header_error(path, fmt::format("the header is {}, not an object", detail::json_kind(header)));

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        header_error(path, fmt::format("__metadata__ is {}, not an object of strings",
                                       detail::json_kind(entry)));
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          header_error(path, fmt::format("__metadata__ \"{}\" is {}; safetensors metadata "
                                         "values are strings",
                                         key, detail::json_kind(value)));
        metadata_.emplace(key, value.get<std::string>());
      }
      continue;
    }
    tensors_.push_back(parse_tensor(path, name, entry, data_size));
  }
  // header.items() walks the keys in sorted order, so tensors_ is sorted by name.

  std::vector<const SafetensorsTensor*> by_offset;
  for (const SafetensorsTensor& tensor : tensors_)
    if (tensor.data_end > tensor.data_begin) by_offset.push_back(&tensor);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
              return a->data_begin < b->data_begin;
            });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->data_end > by_offset[i]->data_begin)
      detail::throw_file_error(
          path, data_offset_ + by_offset[i]->data_begin,
          fmt::format("tensors '{}' (data bytes {} to {}) and '{}' (from {}) overlap",
                      by_offset[i - 1]->name, by_offset[i - 1]->data_begin,
                      by_offset[i - 1]->data_end, by_offset[i]->name, by_offset[i]->data_begin));

  for (SafetensorsTensor& tensor : tensors_)
    if (tensor.data_end > tensor.data_begin)
      tensor.data = {file_.data() + data_offset_ + tensor.data_begin,
                     static_cast<std::size_t>(tensor.data_end - tensor.data_begin)};
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  const auto found =
      std::lower_bound(tensors_.begin(), tensors_.end(), name,
                       [](const SafetensorsTensor& t, std::string_view n) { return t.name < n; });
  return found != tensors_.end() && found->name == name ? &*found : nullptr;
}

const SafetensorsTensor& SafetensorsFile::tensor(std::string_view name) const {
  const SafetensorsTensor* tensor = find(name);
  require(tensor != nullptr, "{}: has no tensor named '{}'", path(), name);
  return *tensor;
}

// --- SafetensorsCheckpoint --------------------------------------------------------------------

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path index_path;
  fs::path single_path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(fs::path(path) / "model.safetensors.index.json", ec))
      index_path = fs::path(path) / "model.safetensors.index.json";
    else if (fs::exists(fs::path(path) / "model.safetensors", ec))
      single_path = fs::path(path) / "model.safetensors";
    else
      throw Error(
          fmt::format("'{}' holds neither model.safetensors.index.json nor "
                      "model.safetensors",
                      path));
  } else if (path.size() >= 11 && path.compare(path.size() - 11, 11, ".index.json") == 0) {
    index_path = path;
  } else {
    single_path = path;
  }

  if (!single_path.empty()) {
    origin_ = single_path.string();
    shards_.push_back(std::make_unique<SafetensorsFile>(origin_));
    for (const SafetensorsTensor& tensor : shards_.front()->tensors())
      tensors_.emplace(tensor.name, Entry{&tensor, shards_.front().get()});
    return;
  }

  origin_ = index_path.string();
  const MappedFile index_file(origin_);
  const std::string_view text(reinterpret_cast<const char*>(index_file.data()), index_file.size());
  const json index = detail::parse_strict_json(text, origin_, 0);
  if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object())
    index_error(origin_,
                "a safetensors index is an object with a \"weight_map\" object (tensor name -> "
                "shard file)");

  // Shards are opened once each, in name order, from the index's directory.
  std::map<std::string, const SafetensorsFile*> shard_by_name;
  for (const auto& [tensor_name, shard] : index.at("weight_map").items()) {
    if (!shard.is_string())
      index_error(origin_, fmt::format("weight_map[\"{}\"] is {}, not a shard file name",
                                       tensor_name, detail::json_kind(shard)));
    const std::string shard_name = shard.get<std::string>();
    if (shard_name.empty() || shard_name == "." || shard_name == ".." ||
        shard_name.find('/') != std::string::npos || shard_name.find('\\') != std::string::npos)
      index_error(origin_,
                  fmt::format("weight_map[\"{}\"] names the shard \"{}\"; a shard is a file "
                              "name in the index's directory, without a path",
                              tensor_name, shard_name));
    shard_by_name.emplace(shard_name, nullptr);
  }
  for (auto& [shard_name, shard] : shard_by_name) {
    shards_.push_back(
        std::make_unique<SafetensorsFile>((index_path.parent_path() / shard_name).string()));
    shard = shards_.back().get();
  }

  for (const auto& [tensor_name, shard] : index.at("weight_map").items()) {
    const SafetensorsFile* file = shard_by_name.at(shard.get<std::string>());
    const SafetensorsTensor* tensor = file->find(tensor_name);
    if (tensor == nullptr)
      index_error(origin_,
                  fmt::format("weight_map puts '{}' in {}, which has no tensor of that name",
                              tensor_name, file->path()));
    tensors_.emplace(tensor_name, Entry{tensor, file});
  }
  for (const auto& shard : shards_)
    for (const SafetensorsTensor& tensor : shard->tensors()) {
      const auto listed = tensors_.find(tensor.name);
      if (listed == tensors_.end() || listed->second.shard != shard.get())
        index_error(origin_, fmt::format("{} holds the tensor '{}', which the weight_map {}",
                                         shard->path(), tensor.name,
                                         listed == tensors_.end()
                                             ? std::string("does not list")
                                             : "puts in " + listed->second.shard->path()));
    }
}

std::vector<std::string> SafetensorsCheckpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& entry : tensors_) names.push_back(entry.first);
  return names;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(std::string_view name) const {
  const auto found = tensors_.find(name);
  return found == tensors_.end() ? nullptr : found->second.tensor;
}

const SafetensorsCheckpoint::Entry& SafetensorsCheckpoint::entry(std::string_view name) const {
  const auto found = tensors_.find(name);
  require(found != tensors_.end(), "{}: the checkpoint has no tensor named '{}'", origin_, name);
  return found->second;
}

const SafetensorsTensor& SafetensorsCheckpoint::tensor(std::string_view name) const {
  return *entry(name).tensor;
}

const SafetensorsFile& SafetensorsCheckpoint::shard_of(std::string_view name) const {
  return *entry(name).shard;
}

}  // namespace kc::engine
