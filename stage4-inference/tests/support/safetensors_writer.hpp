// Test support: safetensors files made in the test — valid ones from a list of tensors, and
// broken ones from a header text written by hand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kc::engine::test_support {

struct StTensor {
  std::string name;
  std::string dtype;  // as the header spells it: "F32", "BF16" ...
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> data;
};

// A valid file: the tensors' data back to back in the order given, the header (written with
// nlohmann/json) naming each one's data_offsets, and `metadata` as "__metadata__" when not empty.
std::vector<std::byte> safetensors_file(const std::vector<StTensor>& tensors,
                                        const std::map<std::string, std::string>& metadata = {});

// Exactly: the u64 length of `header`, `header`, then `data`.
std::vector<std::byte> safetensors_raw(std::string_view header, const std::vector<std::byte>& data);

// `count` bytes 0, 1, 2, ... (mod 256), to tell tensors' data apart.
std::vector<std::byte> byte_ramp(std::size_t count, unsigned start = 0);

}  // namespace kc::engine::test_support
