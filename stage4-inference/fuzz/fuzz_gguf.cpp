// fuzz/fuzz_gguf.cpp — the GGUF reader (engine/gguf.cpp) on arbitrary bytes.
//
// The input is parsed as a GGUF file held in memory (MappedFile::copy_of: an exact-size heap
// copy, so AddressSanitizer sees a read one byte past the end). When it parses, everything built
// on the parse is exercised too: every metadata value and array element through its accessors,
// every tensor's bytes checked to lie in the data section and dequantized when small, the model
// config and the tokenizer read from the metadata, and a short text encoded and decoded.
//
//   build/fuzz/stage4-inference/fuzz/fuzz_gguf stage4-inference/fuzz/corpus/fuzz_gguf
#include <algorithm>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "kc/engine/gguf.hpp"
#include "kc/engine/model_config.hpp"
#include "kc/engine/tokenizer.hpp"

namespace {

using namespace kc::engine;
using kc::fuzz::expect_kc_errors_only;
using kc::fuzz::touch;

void exercise_value(const GgufValue& value) {
  expect_kc_errors_only([&] { (void)value.as_uint64(); });
  expect_kc_errors_only([&] { (void)value.as_int64(); });
  expect_kc_errors_only([&] { (void)value.as_double(); });
  expect_kc_errors_only([&] { (void)value.as_bool(); });
  expect_kc_errors_only([&] {
    const std::string_view text = value.as_string();
    touch(text.data(), text.size());
  });
  if (value.type() == GgufValueType::array) {
    const GgufArray& array = value.as_array();
    for (std::size_t i = 0; i < array.size(); ++i) exercise_value(array.at(i));
    expect_kc_errors_only([&] { (void)array.at(array.size()); });
  }
}

void exercise(const GgufFile& file) {
  const ByteView bytes = file.bytes();
  KC_FUZZ_CHECK(file.version() == 2 || file.version() == 3);
  KC_FUZZ_CHECK(file.alignment() > 0 && (file.alignment() & (file.alignment() - 1)) == 0);
  KC_FUZZ_CHECK(file.data_offset() % file.alignment() == 0);
  for (const GgufKeyValue& entry : file.metadata()) {
    KC_FUZZ_CHECK(file.find(entry.key) == &entry.value);
    exercise_value(entry.value);
  }
  for (const GgufTensorInfo& tensor : file.tensors()) {
    KC_FUZZ_CHECK(file.find_tensor(tensor.name) == &tensor);
    KC_FUZZ_CHECK(tensor.dims.size() <= 4);
    KC_FUZZ_CHECK(tensor.file_offset == file.data_offset() + tensor.offset);
    KC_FUZZ_CHECK(tensor.file_offset <= bytes.size &&
                  tensor.byte_size <= bytes.size - tensor.file_offset);
    const ByteView data = file.tensor_bytes(tensor);
    KC_FUZZ_CHECK(data.size == tensor.byte_size);
    touch(data.data, data.size);
    if (tensor.element_count <= (1u << 16))
      expect_kc_errors_only([&] {
        const std::vector<float> values = file.tensor_to_float(tensor);
        KC_FUZZ_CHECK(values.size() == tensor.element_count);
      });
  }
  expect_kc_errors_only([&] {
    const ModelConfig config = model_config_from_gguf(file);
    validate_model_config(config, file.path());  // what it returned must pass its own checks
  });
  expect_kc_errors_only([&] {
    const Tokenizer tokenizer = Tokenizer::from_gguf(file);
    const std::vector<TokenId> ids = tokenizer.encode("Hello, world! 123 \xc3\xa9t\xc3\xa9\n");
    for (TokenId id : ids) KC_FUZZ_CHECK(id >= 0 && static_cast<std::size_t>(id) < tokenizer.vocab_size());
    (void)tokenizer.decode(ids);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  expect_kc_errors_only([&] {
    const GgufFile file(MappedFile::copy_of("fuzz.gguf", kc::fuzz::view_of(data, size)));
    exercise(file);
  });
  return 0;
}
