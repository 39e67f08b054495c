// fuzz/tokenizer_properties.hpp — what every tokenizer the fuzz targets build must satisfy:
// encode() gives ids inside the vocabulary, decode() of them succeeds, and StreamingDecoder fed
// the ids one at a time produces exactly decode()'s text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "kc/engine/tokenizer.hpp"

namespace kc::fuzz {

// Encodes `text` (kc::Error for invalid UTF-8 is the caller's to catch) and checks the ids and
// both decoders; returns the ids.
inline std::vector<engine::TokenId> check_encode_decode(const engine::Tokenizer& tokenizer,
                                                        std::string_view text,
                                                        bool add_special_tokens) {
  const std::vector<engine::TokenId> ids = tokenizer.encode(text, add_special_tokens);
  for (engine::TokenId id : ids)
    KC_FUZZ_CHECK(id >= 0 && static_cast<std::size_t>(id) < tokenizer.vocab_size());
  for (bool skip_special : {false, true}) {
    const std::string decoded = tokenizer.decode(ids, skip_special);
    engine::StreamingDecoder stream(tokenizer, skip_special);
    std::string streamed;
    for (engine::TokenId id : ids) streamed += stream.push(id);
    streamed += stream.finish();
    KC_FUZZ_CHECK(streamed == decoded);
  }
  return ids;
}

}  // namespace kc::fuzz
