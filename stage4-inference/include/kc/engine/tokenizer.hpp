// kc/engine/tokenizer.hpp — BPE tokenizers of two kinds: byte-level (GPT-2, SmolLM2, Llama 3) and
// SentencePiece-style (Llama 2).
//
// Byte-level BPE encodes text to token ids in four steps, each matching Hugging Face tokenizers:
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
// SentencePiece-style BPE (Llama 2, as Hugging Face's tokenizer.json writes it) differs in steps
// 2 and 3: every space becomes "▁" and a "▁" goes before the text (SpacePrefix says where); there
// is no regex, so the whole text between two added tokens is one piece; the piece starts as its
// characters, and a character that is not in the vocabulary becomes one <0xXX> token per UTF-8
// byte ("byte fallback"). BPE then merges as in step 4, with a priority queue of adjacent pairs,
// so a piece of thousands of characters costs O(n log n), not O(n^2).
//
// Decoding concatenates the tokens' text. Byte-level: the bytes each token stands for, invalid
// UTF-8 repaired with U+FFFD. SentencePiece-style: "▁" becomes a space, each run of <0xXX> tokens
// becomes its bytes (a run that is not valid UTF-8 becomes one U+FFFD per byte, as Hugging Face's
// ByteFallback decoder does), and one leading space is stripped (with a Metaspace decoder
// instead: every "▁" of the first token dropped, <0xXX> tokens left as written, as Hugging Face's
// does). A generator that prints tokens as they come uses StreamingDecoder, which holds back
// what later tokens could still change: a character split across byte-level tokens, or a whole
// run of <0xXX> tokens.
//
// Sources: a Hugging Face tokenizer.json (model BPE; ByteLevel decoding, or byte_fallback with
// Llama 2's normalizer or Metaspace pre-tokenizer) or a GGUF file's tokenizer.ggml.* metadata:
// model "gpt2" (byte-level, with merges), or model "llama" (Llama 2, TinyLlama, Mistral 7B v0.1:
// SentencePiece-style, tokens with scores and no merges), converted as transformers converts it:
// every cut of a token into two tokens is a merge, ranked by the token's score (a token's cuts by
// their halves' scores); Llama 2's legacy normalizer; the control tokens and the unknown and BOS
// tokens special; the decoder ByteFallback, Fuse, Replace("▁", " "), Strip, which unlike Llama 2's
// tokenizer.json turns a "▁" spelled in <0xXX> tokens into a space; a BOS or EOS added only when
// the file's add_bos_token / add_eos_token say so (transformers adds none). Every problem with a
// file is a kc::Error naming the file (and, for GGUF, the metadata key).
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

// The two kinds of BPE the engine reads (the header comment above tells them apart).
enum class TokenizerKind {
  byte_level,     // GPT-2, SmolLM2, Llama 3
  sentencepiece,  // Llama 2: "▁" for spaces, characters, <0xXX> byte fallback
};
const char* tokenizer_kind_name(TokenizerKind kind);

// Where a SentencePiece-style tokenizer puts the "▁" that stands for the space before a word.
enum class SpacePrefix {
  // The "legacy" normalizer Prepend("▁") of Llama 2's tokenizer.json: before every text between
  // added tokens, even one that starts with a space ("<s>Hi" -> <s> "▁Hi").
  every_segment,
  // Pre-tokenizer Metaspace, prepend_scheme "first" (transformers' legacy=False): before the
  // start of the text only, and not when it starts with a space ("<s>Hi" -> <s> "Hi").
  first,
  // Metaspace, prepend_scheme "always": before every text between added tokens that does not
  // start with a space.
  always,
};

// The pre-tokenizer regexes the engine knows.
enum class PreTokenizerKind {
  // No regex: the text between added tokens is one piece (Llama 2's SentencePiece-style BPE).
  none,
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
  // Matched in the normalized text (tokenizer.json "normalized": true). With Llama 2's legacy
  // normalizer the pattern is itself normalized ("<pad>" is found as "▁<pad>"), and Hugging Face
  // then decodes the token as "▁<pad>" and never skips it as special; the engine does the same.
  bool normalized = false;
};

class Tokenizer {
 public:
  // Reads a Hugging Face tokenizer.json. Throws kc::Error naming the file and what it cannot use.
  static Tokenizer from_tokenizer_json(const std::string& path);
  // The same from the text of a tokenizer.json; `origin` names it in errors.
  static Tokenizer parse_tokenizer_json(std::string_view json_text, const std::string& origin);
  // Reads the tokenizer.ggml.* keys (and tokenizer.chat_template) of a GGUF file: model "gpt2"
  // (byte-level) or "llama" (SentencePiece-style, merges built from the scores).
  static Tokenizer from_gguf(const GgufFile& file);

  // Token ids of `text` (UTF-8; invalid UTF-8 is a kc::Error). Added tokens written in the text
  // are always recognized; add_special_tokens adds the BOS/EOS the model's configuration asks for
  // (Hugging Face's post-processor; GGUF's add_bos_token/add_eos_token).
  std::vector<TokenId> encode(std::string_view text, bool add_special_tokens = true) const;
  // The text of `ids`, invalid UTF-8 replaced by U+FFFD. An id outside the vocabulary is a
  // kc::Error.
  std::string decode(const std::vector<TokenId>& ids, bool skip_special_tokens = false) const;

  std::size_t vocab_size() const { return token_text_.size(); }
  // The token as the vocabulary writes it (byte-level characters, e.g. "Ġthe"; "▁the", "<0xE6>").
  const std::string& token_text(TokenId id) const;
  // The bytes the token stands for (" the"; a <0xXX> token's one byte); decoding concatenates
  // these, apart from the SentencePiece-style decoder's rules at the start of the text and for
  // <0xXX> runs that are not valid UTF-8.
  const std::string& token_bytes(TokenId id) const;
  // The id of a token by its vocabulary text, if there is one.
  std::optional<TokenId> find_token(std::string_view text) const;
  bool is_special(TokenId id) const;
  const std::vector<AddedToken>& added_tokens() const { return added_tokens_; }

  TokenizerKind kind() const { return kind_; }
  // SentencePiece-style only: where "▁" goes (meaningless for byte-level tokenizers).
  SpacePrefix space_prefix() const { return space_prefix_; }
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
  friend class StreamingDecoder;           // decodes with the tables (tokenizer.cpp)
  struct Tables;
  Tokenizer();
  void check_id(TokenId id) const;
  std::vector<TokenId> merge(std::vector<TokenId> symbols) const;
  bool cached(const std::string& piece, std::vector<TokenId>& out) const;
  void cache(const std::string& piece, const std::vector<TokenId>& ids) const;
  void encode_piece(std::string_view bytes, std::vector<TokenId>& out) const;
  void encode_ordinary(std::string_view text, std::vector<TokenId>& out) const;
  void encode_sentencepiece_piece(std::string_view piece, std::vector<TokenId>& out) const;
  void encode_sentencepiece_segment(std::string_view text, bool starts_text,
                                    std::vector<TokenId>& out) const;

  std::string source_;
  std::vector<std::string> token_text_;
  std::vector<std::string> token_bytes_;
  std::vector<AddedToken> added_tokens_;
  TokenizerKind kind_ = TokenizerKind::byte_level;
  SpacePrefix space_prefix_ = SpacePrefix::every_segment;
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
// text that is final so far and holds back what a later token could still change: byte-level,
// the bytes of a character whose remaining bytes have not arrived; SentencePiece-style, a run of
// <0xXX> tokens until a token that is not a byte ends it (Hugging Face decodes the run as a whole,
// and one invalid byte anywhere in it turns every byte of it into U+FFFD). finish() returns what
// is left. The concatenation of every push() and finish() equals Tokenizer::decode of all the
// ids; for SentencePiece-style tokenizers decode() is this decoder run over the ids.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);
  std::string push(TokenId id);
  std::string finish();
  // Bytes held back: of a character still incomplete, or of a run of <0xXX> tokens.
  std::size_t pending_bytes() const { return pending_.size(); }

 private:
  // SentencePiece-style: the text of a token that is not a byte, after the decoder's rule for
  // the start of the text.
  std::string emit(std::string text);
  std::string flush_byte_run();

  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
  std::size_t tokens_decoded_ = 0;  // SentencePiece-style: tokens seen, skipped ones not counted
  std::size_t spaces_to_strip_ = 0;  // SentencePiece-style: leading spaces the decoder still strips
};

}  // namespace kc::engine
