// fuzz/fuzz_tokenizer_encode.cpp — encoding and decoding arbitrary text (invalid UTF-8 included)
// with fixed tokenizers from the committed test data: the GPT-2-style and Llama-3-style synthetic
// tokenizers and SmolLM2's (tests/data/tokenizer/), loaded once.
//
// Input: byte 0 picks the tokenizer and whether BOS/EOS are added; the rest is the text. Text
// that is not UTF-8 must be a kc::Error; text that is must encode to ids inside the vocabulary,
// decode back to itself (these vocabularies hold a token for every byte; SmolLM2's lacks a few
// control bytes, so for it only the decoders are compared), and stream-decode to the same text.
// The same bytes read as little-endian 32-bit ids are then decoded: an id outside the vocabulary
// must be a kc::Error.
//
//   build/fuzz/stage4-inference/fuzz/fuzz_tokenizer_encode stage4-inference/fuzz/corpus/fuzz_tokenizer_encode
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "kc/engine/tokenizer.hpp"
#include "tokenizer_properties.hpp"

namespace {

using namespace kc::engine;

struct Fixed {
  Tokenizer tokenizer;
  bool round_trips;  // decode(encode(text)) == text for all UTF-8 text
};

const std::vector<std::unique_ptr<Fixed>>& fixed_tokenizers() {
  static const std::vector<std::unique_ptr<Fixed>> tokenizers = [] {
    const std::string dir = KC_TOKENIZER_TEST_DATA;
    std::vector<std::unique_ptr<Fixed>> list;
    for (const auto& [name, round_trips] :
         {std::pair{"gpt2-synthetic", true}, {"llama3-synthetic", true}, {"smollm2", false}})
      list.push_back(std::make_unique<Fixed>(Fixed{
          Tokenizer::from_tokenizer_json(dir + "/" + name + ".tokenizer.json"), round_trips}));
    return list;
  }();
  return tokenizers;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto& tokenizers = fixed_tokenizers();
  const Fixed& fixed = *tokenizers[data[0] % tokenizers.size()];
  const bool add_special_tokens = (data[0] / tokenizers.size()) % 2 == 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  kc::fuzz::expect_kc_errors_only([&] {
    const std::vector<TokenId> ids =
        kc::fuzz::check_encode_decode(fixed.tokenizer, text, add_special_tokens);
    if (fixed.round_trips && !add_special_tokens)
      KC_FUZZ_CHECK(fixed.tokenizer.decode(ids) == text);
  });

  std::vector<TokenId> ids((size - 1) / sizeof(TokenId));
  if (!ids.empty()) std::memcpy(ids.data(), data + 1, ids.size() * sizeof(TokenId));
  bool all_inside = true;
  for (TokenId id : ids)
    all_inside = all_inside && id >= 0 && static_cast<std::size_t>(id) < fixed.tokenizer.vocab_size();
  bool refused = false;
  try {
    kc::fuzz::touch(fixed.tokenizer.decode(ids, data[0] & 0x80).data(), 0);
  } catch (const kc::Error&) {
    refused = true;
  }
  KC_FUZZ_CHECK(refused != all_inside);
  return 0;
}
