// fuzz/fuzz_safetensors.cpp — the safetensors reader (engine/safetensors.cpp) on arbitrary bytes:
// the u64 header length, the JSON header and the tensors' data_offsets.
//
// The input is parsed as a .safetensors file held in memory (MappedFile::copy_of: an exact-size
// heap copy, so AddressSanitizer sees a read past the end). When it parses, every tensor's view
// is checked to lie in the data section, to hold shape x dtype bytes and to share no byte with
// another tensor, and every byte of it is read.
//
//   build/fuzz/stage4-inference/fuzz/fuzz_safetensors stage4-inference/fuzz/corpus/fuzz_safetensors
#include <algorithm>
#include <vector>

#include "fuzz_check.hpp"
#include "kc/engine/safetensors.hpp"

namespace {

using namespace kc::engine;
using kc::fuzz::touch;

void exercise(const SafetensorsFile& file) {
  const ByteView bytes = file.bytes();
  KC_FUZZ_CHECK(file.data_offset() >= 8 && file.data_offset() <= bytes.size);
  const std::uint64_t data_size = bytes.size - file.data_offset();
  std::vector<const SafetensorsTensor*> with_bytes;
  for (std::size_t i = 0; i < file.tensors().size(); ++i) {
    const SafetensorsTensor& tensor = file.tensors()[i];
    if (i > 0) KC_FUZZ_CHECK(file.tensors()[i - 1].name < tensor.name);
    KC_FUZZ_CHECK(file.find(tensor.name) == &tensor);
    KC_FUZZ_CHECK(tensor.data_begin <= tensor.data_end && tensor.data_end <= data_size);
    std::uint64_t elements = 1;
    for (std::uint64_t dim : tensor.shape) elements *= dim;  // no overflow: the reader checked
    KC_FUZZ_CHECK(elements == tensor.element_count);
    KC_FUZZ_CHECK(tensor.element_count * safetensors_dtype_bytes(tensor.dtype) ==
                  tensor.data_end - tensor.data_begin);
    KC_FUZZ_CHECK(tensor.data.size == tensor.data_end - tensor.data_begin);
    if (tensor.data.size > 0) {
      KC_FUZZ_CHECK(tensor.data.data == bytes.data + file.data_offset() + tensor.data_begin);
      with_bytes.push_back(&tensor);
    }
    touch(tensor.data.data, tensor.data.size);
    (void)safetensors_dtype_name(tensor.dtype);
  }
  std::sort(with_bytes.begin(), with_bytes.end(),
            [](const auto* a, const auto* b) { return a->data_begin < b->data_begin; });
  for (std::size_t i = 1; i < with_bytes.size(); ++i)
    KC_FUZZ_CHECK(with_bytes[i - 1]->data_end <= with_bytes[i]->data_begin);
  for (const auto& [key, value] : file.metadata()) touch(value.data(), value.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kc::fuzz::expect_kc_errors_only([&] {
    const SafetensorsFile file(
        MappedFile::copy_of("fuzz.safetensors", kc::fuzz::view_of(data, size)));
    exercise(file);
  });
  return 0;
}
