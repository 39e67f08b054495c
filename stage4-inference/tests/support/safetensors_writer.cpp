#include "support/safetensors_writer.hpp"

#include <cstring>
#include <nlohmann/json.hpp>

namespace kc::engine::test_support {

std::vector<std::byte> safetensors_file(const std::vector<StTensor>& tensors,
                                        const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<std::byte> data;
  for (const StTensor& tensor : tensors) {
    header[tensor.name] = {{"dtype", tensor.dtype},
                           {"shape", tensor.shape},
                           {"data_offsets", {data.size(), data.size() + tensor.data.size()}}};
    data.insert(data.end(), tensor.data.begin(), tensor.data.end());
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  return safetensors_raw(header.dump(), data);
}

std::vector<std::byte> safetensors_raw(std::string_view header,
                                       const std::vector<std::byte>& data) {
  std::vector<std::byte> file(8 + header.size());
  const std::uint64_t length = header.size();
  std::memcpy(file.data(), &length, 8);
  std::memcpy(file.data() + 8, header.data(), header.size());
  file.insert(file.end(), data.begin(), data.end());
  return file;
}

std::vector<std::byte> byte_ramp(std::size_t count, unsigned start) {
  std::vector<std::byte> bytes(count);
  for (std::size_t i = 0; i < count; ++i) bytes[i] = static_cast<std::byte>((start + i) & 0xFF);
  return bytes;
}

}  // namespace kc::engine::test_support
