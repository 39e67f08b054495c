#include "kc/engine/gguf.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "file_error.hpp"
#include "kc/common/error.hpp"
#include "kc/engine/dequantize.hpp"

// Numbers are loaded from the file with memcpy, which is only right on a little-endian host.
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader loads little-endian numbers as they are: it needs a little-endian host"
#endif

namespace kc::engine {

namespace {

constexpr std::uint32_t kMagic = 0x46554747;  // the bytes "GGUF" read as a little-endian u32
constexpr std::uint64_t kDefaultAlignment = 32;
constexpr std::size_t kMaxKeyBytes = 65535;      // the spec's limit for a metadata key
constexpr std::size_t kMaxTensorNameBytes = 64;  // the spec's limit for a tensor name
constexpr std::uint32_t kMaxDims = 4;            // ggml tensors have at most 4 dimensions
// Honest files nest arrays one or two deep; the limit keeps a crafted file from exhausting the
// stack of this recursive reader.
constexpr int kMaxArrayDepth = 32;
// The fewest bytes an entry can take, to refuse counts the rest of the file cannot hold before
// reserving memory for them: a metadata entry is a key (u64 length + at least 1 byte), a u32
// type and at least a 1-byte value; a tensor info is a name (u64 length), a u32 dimension
// count, a u32 type and a u64 offset.
constexpr std::uint64_t kMinKeyValueBytes = 8 + 1 + 4 + 1;
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
constexpr std::uint64_t kNoElement = std::numeric_limits<std::uint64_t>::max();

// Bytes of one value of a fixed-size type; 0 for strings and arrays.
std::uint64_t fixed_value_bytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::uint8:
    case GgufValueType::int8:
    case GgufValueType::boolean: return 1;
    case GgufValueType::uint16:
    case GgufValueType::int16: return 2;
    case GgufValueType::uint32:
    case GgufValueType::int32:
    case GgufValueType::float32: return 4;
    case GgufValueType::uint64:
    case GgufValueType::int64:
    case GgufValueType::float64: return 8;
    case GgufValueType::string:
    case GgufValueType::array: return 0;
  }
  return 0;
}

// The fewest bytes a value of `type` can take: a string's length, an array's type and count.
std::uint64_t min_value_bytes(GgufValueType type) {
  if (type == GgufValueType::string) return 8;
  if (type == GgufValueType::array) return 4 + 8;
  return fixed_value_bytes(type);
}

template <typename T>
T load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

// A value of a fixed-size type, from its bytes (booleans were checked to be 0 or 1).
GgufValue decode_fixed(GgufValueType type, const std::byte* p) {
  switch (type) {
    case GgufValueType::uint8: return {type, std::uint64_t{load<std::uint8_t>(p)}};
    case GgufValueType::int8: return {type, std::int64_t{load<std::int8_t>(p)}};
    case GgufValueType::uint16: return {type, std::uint64_t{load<std::uint16_t>(p)}};
    case GgufValueType::int16: return {type, std::int64_t{load<std::int16_t>(p)}};
    case GgufValueType::uint32: return {type, std::uint64_t{load<std::uint32_t>(p)}};
    case GgufValueType::int32: return {type, std::int64_t{load<std::int32_t>(p)}};
    case GgufValueType::uint64: return {type, load<std::uint64_t>(p)};
    case GgufValueType::int64: return {type, load<std::int64_t>(p)};
    case GgufValueType::float32: return {type, double{load<float>(p)}};
    case GgufValueType::float64: return {type, load<double>(p)};
    case GgufValueType::boolean: return {type, load<std::uint8_t>(p) != 0};
    case GgufValueType::string:
    case GgufValueType::array: break;
  }
  throw Error(fmt::format("GGUF {} values are not of a fixed size", gguf_value_type_name(type)));
}

std::string describe(std::string_view what, std::uint64_t element) {
  if (element == kNoElement) return std::string(what);
  return fmt::format("element {} of {}", element, what);
}

// Reads the mapped file front to back; every read is checked against the bytes that are left,
// and a failure names the file and the offset where the faulty field starts.
class Cursor {
 public:
  explicit Cursor(const MappedFile& file) : file_(file) {}

  std::uint64_t offset() const { return offset_; }
  std::uint64_t remaining() const { return file_.size() - offset_; }

  [[noreturn]] void fail(std::uint64_t at, const std::string& what) const {
    detail::throw_file_error(file_.path(), at, what);
  }

  const std::byte* take(std::uint64_t bytes, std::string_view what,
                        std::uint64_t element = kNoElement) {
    if (bytes > remaining())
      fail(offset_, fmt::format("the file ends inside {}: it needs {} bytes, {} are left",
                                describe(what, element), bytes, remaining()));
    const std::byte* p = file_.data() + offset_;
    offset_ += bytes;
    return p;
  }

  template <typename T>
  T read(std::string_view what) {
    return load<T>(take(sizeof(T), what));
  }

  std::string_view read_string(std::string_view what, std::uint64_t element = kNoElement) {
    const std::uint64_t at = offset_;
    const auto length = load<std::uint64_t>(take(8, what, element));
    if (length > remaining())
      fail(at, fmt::format("{} is a string of {} bytes, longer than the {} bytes left in the file",
                           describe(what, element), length, remaining()));
    return {reinterpret_cast<const char*>(take(length, what, element)),
            static_cast<std::size_t>(length)};
  }

  GgufValueType read_value_type(std::string_view what) {
    const std::uint64_t at = offset_;
    const auto raw = read<std::uint32_t>(what);
    if (raw > static_cast<std::uint32_t>(GgufValueType::float64))
      fail(at, fmt::format("unknown metadata value type {} for {} (GGUF defines types 0 to 12)",
                           raw, what));
    return static_cast<GgufValueType>(raw);
  }

  std::shared_ptr<const GgufArray> read_array(const std::string& what, int depth) {
    const std::uint64_t at = offset_;
    if (depth > kMaxArrayDepth)
      fail(at, fmt::format("{} nests arrays more than {} deep", what, kMaxArrayDepth));
    const GgufValueType element_type = read_value_type("the element type of " + what);
    const auto count = read<std::uint64_t>("the element count of " + what);
    const std::uint64_t min_bytes = min_value_bytes(element_type);
    if (count > remaining() / min_bytes)
      fail(at,
           fmt::format("{} claims {} elements of type {} (at least {} bytes each), more than "
                       "the {} bytes left in the file can hold",
                       what, count, gguf_value_type_name(element_type), min_bytes, remaining()));
    const auto size = static_cast<std::size_t>(count);
    const std::byte* fixed_size_elements = nullptr;
    std::vector<std::string_view> strings;
    std::vector<GgufValue> arrays;
    if (element_type == GgufValueType::string) {
      strings.reserve(size);
      for (std::size_t i = 0; i < size; ++i) strings.push_back(read_string(what, i));
    } else if (element_type == GgufValueType::array) {
      arrays.reserve(size);
      for (std::size_t i = 0; i < size; ++i)
        arrays.emplace_back(GgufValueType::array, read_array(describe(what, i), depth + 1));
    } else {
      const std::uint64_t elements_at = offset_;
      fixed_size_elements = take(count * min_bytes, what);  // no overflow: count <= remaining/min
      if (element_type == GgufValueType::boolean)
        for (std::size_t i = 0; i < size; ++i)
          if (std::to_integer<unsigned>(fixed_size_elements[i]) > 1)
            fail(elements_at + i,
                 fmt::format("{} is a boolean stored as {}; GGUF booleans are 0 or 1",
                             describe(what, i), std::to_integer<unsigned>(fixed_size_elements[i])));
    }
    return std::make_shared<const GgufArray>(element_type, size, fixed_size_elements,
                                             std::move(strings), std::move(arrays));
  }

  GgufValue read_value(GgufValueType type, const std::string& what) {
    if (type == GgufValueType::string) return {type, read_string(what)};
    if (type == GgufValueType::array) return {type, read_array(what, 1)};
    const std::uint64_t at = offset_;
    const std::byte* p = take(fixed_value_bytes(type), what);
    if (type == GgufValueType::boolean && std::to_integer<unsigned>(*p) > 1)
      fail(at, fmt::format("{} is a boolean stored as {}; GGUF booleans are 0 or 1", what,
                           std::to_integer<unsigned>(*p)));
    return decode_fixed(type, p);
  }

 private:
  const MappedFile& file_;
  std::uint64_t offset_ = 0;
};

std::string printable_magic(const std::byte* p) {
  std::string text;
  for (int i = 0; i < 4; ++i) {
    const auto c = std::to_integer<unsigned char>(p[i]);
    text += (c >= 0x20 && c < 0x7F) ? std::string(1, static_cast<char>(c))
                                    : fmt::format("\\x{:02x}", c);
  }
  return text;
}

std::uint32_t byte_swapped(std::uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xFF00u) | ((v << 8) & 0xFF0000u) | (v << 24);
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::uint8: return "uint8";
    case GgufValueType::int8: return "int8";
    case GgufValueType::uint16: return "uint16";
    case GgufValueType::int16: return "int16";
    case GgufValueType::uint32: return "uint32";
    case GgufValueType::int32: return "int32";
    case GgufValueType::float32: return "float32";
    case GgufValueType::boolean: return "bool";
    case GgufValueType::string: return "string";
    case GgufValueType::array: return "array";
    case GgufValueType::uint64: return "uint64";
    case GgufValueType::int64: return "int64";
    case GgufValueType::float64: return "float64";
  }
  return "unknown";
}

// --- GgufValue --------------------------------------------------------------------------------

bool GgufValue::is_integer() const {
  return std::holds_alternative<std::uint64_t>(payload_) ||
         std::holds_alternative<std::int64_t>(payload_);
}

bool GgufValue::is_float() const { return std::holds_alternative<double>(payload_); }

std::uint64_t GgufValue::as_uint64() const {
  if (const auto* u = std::get_if<std::uint64_t>(&payload_)) return *u;
  if (const auto* s = std::get_if<std::int64_t>(&payload_)) {
    require(*s >= 0, "the {} value {} is negative, where an unsigned integer is needed",
            gguf_value_type_name(type_), *s);
    return static_cast<std::uint64_t>(*s);
  }
  throw Error(fmt::format("a GGUF {} value is not an integer", gguf_value_type_name(type_)));
}

std::int64_t GgufValue::as_int64() const {
  if (const auto* s = std::get_if<std::int64_t>(&payload_)) return *s;
  if (const auto* u = std::get_if<std::uint64_t>(&payload_)) {
    require(*u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
            "the {} value {} does not fit a signed 64-bit integer", gguf_value_type_name(type_),
            *u);
    return static_cast<std::int64_t>(*u);
  }
  throw Error(fmt::format("a GGUF {} value is not an integer", gguf_value_type_name(type_)));
}

double GgufValue::as_double() const {
  if (const auto* d = std::get_if<double>(&payload_)) return *d;
  if (const auto* u = std::get_if<std::uint64_t>(&payload_)) return static_cast<double>(*u);
  if (const auto* s = std::get_if<std::int64_t>(&payload_)) return static_cast<double>(*s);
  throw Error(fmt::format("a GGUF {} value is not a number", gguf_value_type_name(type_)));
}

bool GgufValue::as_bool() const {
  if (const auto* b = std::get_if<bool>(&payload_)) return *b;
  throw Error(fmt::format("a GGUF {} value is not a bool", gguf_value_type_name(type_)));
}

std::string_view GgufValue::as_string() const {
  if (const auto* s = std::get_if<std::string_view>(&payload_)) return *s;
  throw Error(fmt::format("a GGUF {} value is not a string", gguf_value_type_name(type_)));
}

const GgufArray& GgufValue::as_array() const {
  if (const auto* a = std::get_if<std::shared_ptr<const GgufArray>>(&payload_)) return **a;
  throw Error(fmt::format("a GGUF {} value is not an array", gguf_value_type_name(type_)));
}

// --- GgufArray --------------------------------------------------------------------------------

GgufArray::GgufArray(GgufValueType element_type, std::size_t size,
                     const std::byte* fixed_size_elements, std::vector<std::string_view> strings,
                     std::vector<GgufValue> arrays)
    : element_type_(element_type),
      size_(size),
      fixed_size_elements_(fixed_size_elements),
      strings_(std::move(strings)),
      arrays_(std::move(arrays)) {}

GgufValue GgufArray::at(std::size_t i) const {
  require(i < size_, "element {} of a GGUF array of {} elements", i, size_);
  if (element_type_ == GgufValueType::string) return {element_type_, strings_[i]};
  if (element_type_ == GgufValueType::array) return arrays_[i];
  return decode_fixed(element_type_, fixed_size_elements_ + i * fixed_value_bytes(element_type_));
}

// --- GgufFile ---------------------------------------------------------------------------------

GgufFile::GgufFile(const std::string& path) : GgufFile(MappedFile(path)) {}

GgufFile::GgufFile(MappedFile file) : file_(std::move(file)) {
  Cursor cursor(file_);

  // Header.
  if (file_.size() >= 4 && load<std::uint32_t>(file_.data()) != kMagic)
    cursor.fail(0, fmt::format("not a GGUF file: it starts with \"{}\", not \"GGUF\"",
                               printable_magic(file_.data())));
  cursor.read<std::uint32_t>("the magic number \"GGUF\"");
  version_ = cursor.read<std::uint32_t>("the version");
  if (version_ == 1)
    cursor.fail(4,
                "GGUF version 1 (32-bit counts) is not supported; convert the model again "
                "with a current llama.cpp to get version 3");
  if (version_ != 2 && version_ != 3) {
    const std::uint32_t swapped = byte_swapped(version_);
    if (swapped == 2 || swapped == 3)
      cursor.fail(4, fmt::format("the version reads {} little-endian and {} big-endian: this is "
                                 "a big-endian GGUF file, which this reader does not support",
                                 version_, swapped));
    cursor.fail(4, fmt::format("unsupported GGUF version {}; this reader reads versions 2 and 3",
                               version_));
  }
  const auto tensor_count = cursor.read<std::uint64_t>("the tensor count");
  const auto metadata_count = cursor.read<std::uint64_t>("the metadata count");
  if (metadata_count > cursor.remaining() / kMinKeyValueBytes)
    cursor.fail(16, fmt::format("the header claims {} metadata entries, more than the {} bytes "
                                "left in the file can hold",
                                metadata_count, cursor.remaining()));
  if (tensor_count > cursor.remaining() / kMinTensorInfoBytes)
    cursor.fail(8, fmt::format("the header claims {} tensors, more than the {} bytes left in the "
                               "file can hold",
                               tensor_count, cursor.remaining()));

  // Metadata.
  metadata_.reserve(static_cast<std::size_t>(metadata_count));
  std::vector<std::uint64_t> metadata_offsets;
  for (std::uint64_t i = 0; i < metadata_count; ++i) {
    const std::uint64_t entry_at = cursor.offset();
    const std::string_view key = cursor.read_string(fmt::format("the key of metadata entry {}", i));
    if (key.empty()) cursor.fail(entry_at, fmt::format("metadata entry {} has an empty key", i));
    if (key.size() > kMaxKeyBytes)
      cursor.fail(entry_at, fmt::format("metadata key of {} bytes; GGUF keys are at most {} bytes",
                                        key.size(), kMaxKeyBytes));
    if (const auto seen = metadata_index_.find(key); seen != metadata_index_.end())
      cursor.fail(entry_at, fmt::format("duplicate metadata key '{}' (entries {} and {})", key,
                                        seen->second, i));
    const std::string what = fmt::format("metadata '{}'", key);
    const GgufValueType type = cursor.read_value_type(what);
    metadata_.push_back({std::string(key), cursor.read_value(type, what)});
    metadata_offsets.push_back(entry_at);
    metadata_index_.emplace(std::string(key), metadata_.size() - 1);
  }

  if (const auto found = metadata_index_.find("general.alignment");
      found != metadata_index_.end()) {
    const GgufValue& value = metadata_[found->second].value;
    const std::uint64_t at = metadata_offsets[found->second];
    if (value.type() != GgufValueType::uint32)
      cursor.fail(at, fmt::format("general.alignment is a {}; GGUF stores it as a uint32",
                                  gguf_value_type_name(value.type())));
    alignment_ = value.as_uint64();
    if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
      cursor.fail(at,
                  fmt::format("general.alignment is {}; it must be a power of two", alignment_));
  } else {
    alignment_ = kDefaultAlignment;
  }

  // Tensor infos.
  tensors_.reserve(static_cast<std::size_t>(tensor_count));
  std::vector<std::uint64_t> info_offsets;
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    const std::uint64_t info_at = cursor.offset();
    GgufTensorInfo tensor;
    tensor.name = std::string(cursor.read_string(fmt::format("the name of tensor {}", i)));
    if (tensor.name.size() > kMaxTensorNameBytes)
      cursor.fail(info_at, fmt::format("tensor {} has a name of {} bytes; GGUF tensor names are "
                                       "at most {} bytes",
                                       i, tensor.name.size(), kMaxTensorNameBytes));
    if (const auto seen = tensor_index_.find(tensor.name); seen != tensor_index_.end())
      cursor.fail(info_at, fmt::format("duplicate tensor name '{}' (tensors {} and {})",
                                       tensor.name, seen->second, i));
    const std::string what = fmt::format("tensor '{}'", tensor.name);
    const std::uint64_t dims_at = cursor.offset();
    const auto n_dims = cursor.read<std::uint32_t>("the dimension count of " + what);
    if (n_dims > kMaxDims)
      cursor.fail(dims_at, fmt::format("{} has {} dimensions; ggml tensors have at most {}", what,
                                       n_dims, kMaxDims));
    tensor.element_count = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t dim_at = cursor.offset();
      const auto dim = cursor.read<std::uint64_t>("a dimension of " + what);
      if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        cursor.fail(dim_at, fmt::format("dimension {} of {} is {}, more than ggml's int64 limit", d,
                                        what, dim));
      if (__builtin_mul_overflow(tensor.element_count, dim, &tensor.element_count))
        cursor.fail(dim_at, fmt::format("the dimensions of {} multiply to more than 2^64 "
                                        "elements",
                                        what));
      tensor.dims.push_back(dim);
    }
    const std::uint64_t type_at = cursor.offset();
    const auto type_id = cursor.read<std::uint32_t>("the type of " + what);
    const GgmlTypeInfo* type = find_ggml_type(type_id);
    if (type == nullptr)
      cursor.fail(type_at, fmt::format("{} has unknown ggml type {} (removed from ggml, or newer "
                                       "than this reader)",
                                       what, type_id));
    tensor.type = type->type;
    const std::uint64_t row = tensor.dims.empty() ? 1 : tensor.dims[0];
    if (row % type->block_elements != 0)
      cursor.fail(info_at, fmt::format("{} has rows of {} values, not a whole number of {}'s "
                                       "{}-value blocks",
                                       what, row, type->name, type->block_elements));
    const std::uint64_t blocks = tensor.element_count / type->block_elements;
    if (__builtin_mul_overflow(blocks, std::uint64_t{type->block_bytes}, &tensor.byte_size))
      cursor.fail(info_at, fmt::format("{} ({} elements of {}) takes more than 2^64 bytes", what,
                                       tensor.element_count, type->name));
    tensor.offset = cursor.read<std::uint64_t>("the data offset of " + what);
    tensor_index_.emplace(tensor.name, tensors_.size());
    tensors_.push_back(std::move(tensor));
    info_offsets.push_back(info_at);
  }

  // The data section starts at the next multiple of the alignment; every tensor must lie in it,
  // start at a multiple of the alignment and share no byte with another tensor.
  const std::uint64_t infos_end = cursor.offset();
  data_offset_ = (infos_end + alignment_ - 1) / alignment_ * alignment_;
  const std::uint64_t data_size = file_.size() > data_offset_ ? file_.size() - data_offset_ : 0;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    GgufTensorInfo& tensor = tensors_[i];
    if (tensor.offset % alignment_ != 0)
      cursor.fail(info_offsets[i], fmt::format("tensor '{}' starts at data offset {}, not a "
                                               "multiple of the alignment {}",
                                               tensor.name, tensor.offset, alignment_));
    if (tensor.offset > data_size || tensor.byte_size > data_size - tensor.offset)
      cursor.fail(info_offsets[i],
                  fmt::format("tensor '{}' ({} bytes of {} at data offset {}) runs past the end "
                              "of the file: its data section (from byte {}) holds {} bytes",
                              tensor.name, tensor.byte_size, ggml_type_name(tensor.type),
                              tensor.offset, data_offset_, data_size));
    tensor.file_offset = data_offset_ + tensor.offset;
  }
  std::vector<std::size_t> by_offset(tensors_.size());
  std::iota(by_offset.begin(), by_offset.end(), std::size_t{0});
  std::sort(by_offset.begin(), by_offset.end(),
            [&](std::size_t a, std::size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  const GgufTensorInfo* previous = nullptr;
  for (std::size_t index : by_offset) {
    const GgufTensorInfo& tensor = tensors_[index];
    if (tensor.byte_size == 0) continue;
    if (previous != nullptr && previous->offset + previous->byte_size > tensor.offset)
      cursor.fail(info_offsets[index],
                  fmt::format("tensors '{}' (data bytes {} to {}) and '{}' (from {}) overlap",
                              previous->name, previous->offset,
                              previous->offset + previous->byte_size, tensor.name, tensor.offset));
    previous = &tensor;
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto found = metadata_index_.find(key);
  return found == metadata_index_.end() ? nullptr : &metadata_[found->second].value;
}

const GgufValue& GgufFile::at(std::string_view key) const {
  const GgufValue* value = find(key);
  require(value != nullptr, "{}: has no metadata key '{}'", path(), key);
  return *value;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto found = tensor_index_.find(name);
  return found == tensor_index_.end() ? nullptr : &tensors_[found->second];
}

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  const GgufTensorInfo* tensor = find_tensor(name);
  require(tensor != nullptr, "{}: has no tensor named '{}'", path(), name);
  return *tensor;
}

ByteView GgufFile::tensor_bytes(const GgufTensorInfo& tensor) const {
  require(
      tensor.file_offset <= file_.size() && tensor.byte_size <= file_.size() - tensor.file_offset,
      "{}: tensor '{}' does not lie inside this file (is it from another one?)", path(),
      tensor.name);
  if (tensor.byte_size == 0) return {};
  return {file_.data() + tensor.file_offset, static_cast<std::size_t>(tensor.byte_size)};
}

std::vector<float> GgufFile::tensor_to_float(const GgufTensorInfo& tensor) const {
  return dequantize(tensor.type, tensor_bytes(tensor),
                    static_cast<std::size_t>(tensor.element_count));
}

}  // namespace kc::engine
