// kc/engine/tokenizer.hpp — byte-level BPE, the tokenizer of GPT-2, SmolLM2 and Llama 3.
//
// Encoding text to token ids happens in four steps, each matching Hugging Face tokenizers:
//
//   1. added tokens: the text is cut at every added token (<|im_start|>, <|eot_id|> ...), found
//      leftmost-longest; each becomes its id and the text between them goes on to step 2;
//   2. pre-tokenization: a regex splits the text into pieces (words with their leading space,
//      runs of digits, punctuation, white space); the supported regexes are matched by hand
//      (PreTokenizerKind says which);
//   3. byte-level mapping: each piece is a sequence of bytes, every one of the 256 bytes a token;
//   4. BPE: within a piece, the adjacent pair of tokens with the best (lowest) merge rank is merged
//      into one token, again and again, until no pair of the piece has a merge.
//
// Decoding concatenates the tokens' bytes and repairs invalid UTF-8 with U+FFFD; a generator that
// prints tokens as they come uses StreamingDecoder, which holds back a character split across
// tokens until its last byte arrives.
//
// Sources: a Hugging Face tokenizer.json (model BPE, ByteLevel decoding) or a GGUF file's
// tokenizer.ggml.* metadata (model "gpt2"). SentencePiece tokenizers (Llama 2, GGUF model
// "llama") are refused by name. Every problem with a file is a kc::Error naming the file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kc::engine {

class GgufFile;
namespace detail {
struct TokenizerBuilder;
}

using TokenId = std::int32_t;

// The pre-tokenizer regexes the engine knows.
enum class PreTokenizerKind {
  // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  gpt2,
  // SmolLM2 (and StarCoder): every digit split off alone, then GPT-2's regex
  // (GGUF tokenizer.ggml.pre "smollm"; tokenizer.json Sequence[Digits, ByteLevel]).
  smollm,
  // Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (GGUF "llama-bpe")
  llama3,
};
const char* pre_tokenizer_name(PreTokenizerKind kind);

// A token matched in the text before BPE (step 1 above). Special tokens are control tokens
// (<|eot_id|>); decode() can skip them.
struct AddedToken {
  TokenId id = 0;
  std::string content;
  bool special = false;
};

class Tokenizer {
 public:
  // Reads a Hugging Face tokenizer.json. Throws kc::Error naming the file and what it cannot use.
  static Tokenizer from_tokenizer_json(const std::string& path);
  // The same from the text of a tokenizer.json; `origin` names it in errors.
  static Tokenizer parse_tokenizer_json(std::string_view json_text, const std::string& origin);
  // Reads the tokenizer.ggml.* keys (and tokenizer.chat_template) of a GGUF file.
  static Tokenizer from_gguf(const GgufFile& file);

  // Token ids of `text` (UTF-8; invalid UTF-8 is a kc::Error). Added tokens written in the text
  // are always recognized; add_special_tokens adds the BOS/EOS the model's configuration asks for
  // (Hugging Face's post-processor; GGUF's add_bos_token/add_eos_token).
  std::vector<TokenId> encode(std::string_view text, bool add_special_tokens = true) const;
  // The text of `ids`, invalid UTF-8 replaced by U+FFFD. An id outside the vocabulary is a
  // kc::Error.
  std::string decode(const std::vector<TokenId>& ids, bool skip_special_tokens = false) const;

  std::size_t vocab_size() const { return token_text_.size(); }
  // The token as the vocabulary writes it (byte-level characters, e.g. "Ġthe").
  const std::string& token_text(TokenId id) const;
  // The bytes the token stands for (" the"); decoding concatenates these.
  const std::string& token_bytes(TokenId id) const;
  // The id of a token by its vocabulary text, if there is one.
  std::optional<TokenId> find_token(std::string_view text) const;
  bool is_special(TokenId id) const;
  const std::vector<AddedToken>& added_tokens() const { return added_tokens_; }

  PreTokenizerKind pre_tokenizer() const { return pre_tokenizer_; }
  // Llama 3: a piece that is itself a token becomes that token without BPE.
  bool ignore_merges() const { return ignore_merges_; }
  std::size_t merge_count() const { return merge_count_; }

  std::optional<TokenId> bos_id() const { return bos_id_; }
  std::optional<TokenId> eos_id() const { return eos_id_; }
  std::optional<TokenId> padding_id() const { return padding_id_; }
  bool adds_bos() const { return add_bos_; }
  bool adds_eos() const { return add_eos_; }
  // The Jinja chat template the file carries (GGUF tokenizer.chat_template), empty if none.
  const std::string& chat_template() const { return chat_template_; }
  // The file the tokenizer came from, for messages.
  const std::string& source() const { return source_; }

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

 private:
  friend struct detail::TokenizerBuilder;  // the loaders build through it (tokenizer.cpp)
  struct Tables;
  Tokenizer();
  void check_id(TokenId id) const;
  void encode_piece(std::string_view bytes, std::vector<TokenId>& out) const;
  void encode_ordinary(std::string_view text, std::vector<TokenId>& out) const;

  std::string source_;
  std::vector<std::string> token_text_;
  std::vector<std::string> token_bytes_;
  std::vector<AddedToken> added_tokens_;
  PreTokenizerKind pre_tokenizer_ = PreTokenizerKind::gpt2;
  bool ignore_merges_ = false;
  std::size_t merge_count_ = 0;
  std::optional<TokenId> bos_id_, eos_id_, padding_id_;
  bool add_bos_ = false;
  bool add_eos_ = false;
  std::string chat_template_;
  std::unique_ptr<Tables> tables_;  // lookup maps and the BPE cache (tokenizer.cpp)
};

// Turns ids into text one at a time, for printing a generation as it runs. push() returns the
// text that is complete so far and keeps the bytes of a character whose remaining bytes have not
// arrived; finish() returns what is left (U+FFFD for a character that never completed). The
// concatenation of every push() and finish() equals Tokenizer::decode of all the ids.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}
  std::string push(TokenId id);
  std::string finish();
  // Bytes held back, waiting for the rest of a character.
  std::size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
};

}  // namespace kc::engine
