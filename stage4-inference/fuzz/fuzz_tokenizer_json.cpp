// fuzz/fuzz_tokenizer_json.cpp — the tokenizer.json loader (Tokenizer::parse_tokenizer_json in
// engine/tokenizer.cpp) on arbitrary bytes. A tokenizer that loads is used: a few texts (with
// every added token written in them) are encoded and decoded through tokenizer_properties.hpp,
// every id's text and bytes are read, and an id past the vocabulary must be a kc::Error.
//
//   build/fuzz/stage4-inference/fuzz/fuzz_tokenizer_json stage4-inference/fuzz/corpus/fuzz_tokenizer_json
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "kc/engine/tokenizer.hpp"
#include "tokenizer_properties.hpp"

namespace {

using namespace kc::engine;

void exercise(const Tokenizer& tokenizer) {
  std::string text = "Hello world, it's 2024!\n\n  x\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80 ";
  for (const AddedToken& added : tokenizer.added_tokens()) text += added.content + "a ";
  kc::fuzz::expect_kc_errors_only([&] {  // an added token's content may not be UTF-8
    kc::fuzz::check_encode_decode(tokenizer, text, true);
    kc::fuzz::check_encode_decode(tokenizer, text, false);
  });
  for (std::size_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const auto token = static_cast<TokenId>(id);
    KC_FUZZ_CHECK(tokenizer.find_token(tokenizer.token_text(token)).has_value());
    kc::fuzz::touch(tokenizer.token_bytes(token).data(), tokenizer.token_bytes(token).size());
    (void)tokenizer.is_special(token);
  }
  const auto past_end = static_cast<TokenId>(tokenizer.vocab_size());
  bool refused = false;
  try {
    (void)tokenizer.decode({past_end});
  } catch (const kc::Error&) {
    refused = true;
  }
  KC_FUZZ_CHECK(refused);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kc::fuzz::expect_kc_errors_only([&] {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    exercise(Tokenizer::parse_tokenizer_json(text, "fuzz/tokenizer.json"));
  });
  return 0;
}
