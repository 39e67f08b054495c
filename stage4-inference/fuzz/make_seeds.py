#!/usr/bin/env python3
"""Writes the seed corpora of the stage-4 reader fuzzers (corpus/<target>/seed_*): small valid
files of each format, so the fuzzer starts from inputs that reach deep into each reader.

    python3 stage4-inference/fuzz/make_seeds.py

Deterministic; the fuzzers' own finds (merged with -merge=1) sit beside the seeds in the same
folders. Standard library only."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(folder, "seed_" + name), "wb") as f:
        f.write(data)


def byte_alphabet():
    """GPT-2's byte-level alphabet: byte -> printable character."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


ALPHABET = byte_alphabet()
MERGES = [("h", "e"), ("l", "l"), ("he", "ll"), ("Ġ", "w"), ("o", "r"), ("Ġw", "or"), ("1", "2")]


def small_vocab():
    tokens = [ALPHABET[b] for b in range(256)]
    for left, right in MERGES:
        tokens.append(left + right)
    return tokens


# --- GGUF ---------------------------------------------------------------------------------------

def gguf_string(s):
    data = s.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64 = 4, 5, 6, 7, 8, 9, 10


def gguf_value(kind, value):
    if kind == T_U32:
        return struct.pack("<I", value)
    if kind == T_I32:
        return struct.pack("<i", value)
    if kind == T_F32:
        return struct.pack("<f", value)
    if kind == T_BOOL:
        return struct.pack("<B", value)
    if kind == T_U64:
        return struct.pack("<Q", value)
    if kind == T_STR:
        return gguf_string(value)
    if kind == T_ARR:
        element_kind, elements = value
        body = struct.pack("<IQ", element_kind, len(elements))
        return body + b"".join(gguf_value(element_kind, e) for e in elements)
    raise ValueError(kind)


def gguf(metadata, tensors, alignment=32):
    """metadata: [(key, kind, value)]; tensors: [(name, dims, ggml type, data bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, kind, value in metadata:
        out += gguf_string(key) + struct.pack("<I", kind) + gguf_value(kind, value)
    offset, blobs = 0, []
    for name, dims, ggml_type, data in tensors:
        out += gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ggml_type, offset)
        blobs.append((offset, data))
        offset += (len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    data_start = len(out)
    for blob_offset, data in blobs:
        out += b"\0" * (data_start + blob_offset - len(out)) + data
    return out


def q8_0_block():
    return struct.pack("<e", 0.5) + bytes((i * 7) % 256 for i in range(32))


def llama_metadata(vocab_size):
    return [
        ("general.architecture", T_STR, "llama"),
        ("llama.embedding_length", T_U32, 64),
        ("llama.feed_forward_length", T_U32, 128),
        ("llama.block_count", T_U32, 2),
        ("llama.attention.head_count", T_U32, 4),
        ("llama.attention.head_count_kv", T_U32, 2),
        ("llama.context_length", T_U32, 256),
        ("llama.attention.layer_norm_rms_epsilon", T_F32, 1e-5),
        ("llama.rope.freq_base", T_F32, 10000.0),
        ("llama.vocab_size", T_U32, vocab_size),
        ("llama.rope.dimension_count", T_U32, 16),
    ]


def tokenizer_metadata(pre, tokens, with_types):
    meta = [
        ("tokenizer.ggml.model", T_STR, "gpt2"),
        ("tokenizer.ggml.pre", T_STR, pre),
        ("tokenizer.ggml.tokens", T_ARR, (T_STR, tokens)),
        ("tokenizer.ggml.merges", T_ARR, (T_STR, [l + " " + r for l, r in MERGES])),
        ("tokenizer.ggml.bos_token_id", T_U32, len(tokens) - 1),
        ("tokenizer.ggml.eos_token_id", T_U32, len(tokens) - 1),
        ("tokenizer.ggml.add_bos_token", T_BOOL, 1),
    ]
    if with_types:
        types = [1] * (len(tokens) - 1) + [3]
        meta.append(("tokenizer.ggml.token_type", T_ARR, (T_I32, types)))
    return meta


def gguf_seeds():
    write("fuzz_gguf", "empty.gguf", gguf([], []))
    f32 = struct.pack("<8f", *[0.25 * i for i in range(8)])
    f16 = struct.pack("<4e", 1.0, -2.0, 0.5, 65504.0)
    write("fuzz_gguf", "tensors.gguf", gguf(
        [("general.alignment", T_U32, 64),
         ("general.name", T_STR, "seed"),
         ("nested", T_ARR, (T_ARR, [(T_U64, [1, 2]), (T_BOOL, [0, 1, 1])])),
         ("floats", T_ARR, (T_F32, [1.5, -0.0]))],
        [("token_embd.weight", [4, 2], 0, f32), ("blk.0.attn_q.weight", [32, 1], 8, q8_0_block()),
         ("output_norm.weight", [4], 1, f16), ("empty", [0, 3], 0, b"")],
        alignment=64))
    tokens = small_vocab() + ["<|end|>"]
    model = llama_metadata(len(tokens)) + tokenizer_metadata("smollm", tokens, True)
    model.append(("tokenizer.chat_template", T_STR,
                  "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"))
    write("fuzz_gguf", "model.gguf", gguf(model, [("output.weight", [32, 2], 8, q8_0_block() * 2)]))
    write("fuzz_gguf", "llama3_tokenizer.gguf",
          gguf(tokenizer_metadata("llama-bpe", small_vocab() + ["<|eot|>"], False), []))


# --- safetensors --------------------------------------------------------------------------------

def safetensors(header, data):
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    write("fuzz_safetensors", "empty.safetensors", safetensors({}, b""))
    header = {
        "__metadata__": {"format": "pt"},
        "model.embed_tokens.weight": {"dtype": "BF16", "shape": [4, 2], "data_offsets": [0, 16]},
        "model.norm.weight": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]},
        "scalar": {"dtype": "I64", "shape": [], "data_offsets": [24, 32]},
        "none": {"dtype": "F8_E4M3", "shape": [0, 5], "data_offsets": [32, 32]},
        "flags": {"dtype": "BOOL", "shape": [3], "data_offsets": [32, 35]},
    }
    write("fuzz_safetensors", "tensors.safetensors", safetensors(header, bytes(range(35))))


# --- config.json --------------------------------------------------------------------------------

def config_seeds():
    smollm2 = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
        "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
        "num_key_value_heads": 3, "vocab_size": 49152, "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-05, "rope_theta": 100000, "rope_scaling": None,
        "tie_word_embeddings": True, "bos_token_id": 0, "eos_token_id": 0,
        "torch_dtype": "bfloat16", "head_dim": 64,
    }
    write("fuzz_model_config", "smollm2.json", json.dumps(smollm2, indent=2))
    llama3 = dict(smollm2, hidden_size=2048, num_attention_heads=32, num_key_value_heads=8,
                  vocab_size=128256, eos_token_id=[128001, 128008, 128009], bos_token_id=128000,
                  rope_theta=500000.0, head_dim=64,
                  rope_scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                "original_max_position_embeddings": 8192, "rope_type": "llama3"})
    del llama3["torch_dtype"]
    llama3["dtype"] = "bfloat16"
    write("fuzz_model_config", "llama3.json", json.dumps(llama3))
    old = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 100,
           "rope_scaling": {"type": "default"}}
    write("fuzz_model_config", "minimal.json", json.dumps(old))
    gptq = dict(smollm2, quantization_config={
        "quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True,
        "checkpoint_format": "gptq"})
    write("fuzz_model_config", "gptq.json", json.dumps(gptq))
    awq = dict(llama3, quantization_config={
        "quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True, "version": "GEMM",
        "modules_to_not_convert": None})
    write("fuzz_model_config", "awq.json", json.dumps(awq))


# --- tokenizer.json -----------------------------------------------------------------------------

def tokenizer_json(pre_tokenizer, post_processor, added, ignore_merges, pair_merges):
    tokens = small_vocab()
    vocab = {t: i for i, t in enumerate(tokens)}
    added_tokens = []
    for content, special in added:
        added_tokens.append({"id": len(vocab) + len(added_tokens), "content": content,
                             "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": special})
    merges = [[l, r] if pair_merges else l + " " + r for l, r in MERGES]
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
        "normalizer": None, "pre_tokenizer": pre_tokenizer, "post_processor": post_processor,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
                  "vocab": vocab, "merges": merges},
    }, ensure_ascii=False, separators=(",", ":"))


def tokenizer_seeds():
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    write("fuzz_tokenizer_json", "gpt2.json",
          tokenizer_json(byte_level, None, [("<|endoftext|>", True)], False, False))
    smollm = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, byte_level]}
    write("fuzz_tokenizer_json", "smollm.json",
          tokenizer_json(smollm, {"type": "ByteLevel"},
                         [("<|im_start|>", True), ("<|im_end|>", True), ("<tool>", False)],
                         False, True))
    llama3_regex = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
    llama3 = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": llama3_regex}, "behavior": "Isolated",
         "invert": False},
        dict(byte_level, use_regex=False)]}
    post = {"type": "Sequence", "processors": [
        {"type": "ByteLevel"},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}}],
         "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>",
                                                  "ids": [263], "tokens": ["<|begin_of_text|>"]}}}]}
    write("fuzz_tokenizer_json", "llama3.json",
          tokenizer_json(llama3, post, [("<|begin_of_text|>", True), ("<|eot_id|>", True)],
                         True, True))

    # fuzz_tokenizer_encode: byte 0 picks the tokenizer (0 gpt2, 1 llama3, 2 smollm2; +3 adds
    # BOS/EOS), the rest is the text.
    texts = [
        "Hello, world! It's 12345 o'clock.\n\n  \t",
        "<|endoftext|>after<|im_start|>user\nhi<|im_end|>\n<|eot_id|>",
        "caf\u00e9 \u4e2d\u6587 \U0001F600 \u0645\u0631\u062d\u0628\u0627 I'LL DON'T",
    ]
    for selector in range(6):
        write("fuzz_tokenizer_encode", f"text{selector}", bytes([selector]) +
              texts[selector % 3].encode("utf-8"))
    write("fuzz_tokenizer_encode", "invalid_utf8", b"\x00ok \xc3\x28 \xed\xa0\x80 \xf4\x90\x80\x80")
    write("fuzz_tokenizer_encode", "ids", b"\x81" + struct.pack("<4i", 0, 1, 300, 1200))


def request_seeds():
    """fuzz_request_json: byte 0 picks the endpoint (even: completions, odd: chat), then the body."""
    completions = [
        {"model": "kc", "prompt": "Once upon a time", "max_tokens": 16},
        {"model": "kc", "prompt": "caf\u00e9 \U0001F600", "max_tokens": 64, "temperature": 0.7, "top_p": 0.9,
         "seed": 42, "stop": ["\n", "END"], "stream": True, "stream_options": {"include_usage": True},
         "n": 1, "unknown_field": [1, {"a": None}]},
        {"prompt": "x", "max_tokens": 0},
    ]
    chats = [
        {"model": "kc", "messages": [{"role": "user", "content": "What is the capital of France?"}]},
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                      {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "A haiku."}],
         "max_completion_tokens": 32, "max_tokens": 8, "temperature": 0, "stop": "stop", "stream": True},
        {"messages": [{"role": "tool", "content": 3}], "top_p": 0},
    ]
    for i, body in enumerate(completions):
        write("fuzz_request_json", f"completion{i}.json", b"\x00" + json.dumps(body).encode("utf-8"))
    for i, body in enumerate(chats):
        write("fuzz_request_json", f"chat{i}.json", b"\x01" + json.dumps(body).encode("utf-8"))
    write("fuzz_request_json", "deep.json", b"\x00" + b"[" * 80 + b"]" * 80)
    write("fuzz_request_json", "bad_utf8.json", b"\x01{\"messages\": [{\"role\": \"user\", \"content\": \"\xc3\x28\"}]}")


# --- GPTQ / AWQ checkpoints ----------------------------------------------------------------------

def int4_checkpoint(selector):
    """fuzz_int4_checkpoint's input: the selector byte, then a tiny Llama's safetensors file whose
    layer projections are packed in groups of 32 as the selector's format says (bits 0-1: GPTQ v1,
    GPTQ v2, AWQ; bit 2: tied) with q = (n + k) % 16, z = 8 and s = 1/64."""
    method = selector & 3
    tied = bool(selector & 4)
    hidden, inter, vocab, group = 64, 96, 16, 32
    tensors = []  # (name, dtype, shape, bytes)

    def bf16_ones(shape):
        count = 1
        for d in shape:
            count *= d
        return struct.pack(f"<{count}H", *([0x3F80] * count))

    def words(values):
        return struct.pack(f"<{len(values)}I", *values)

    def packed(prefix, n, k):
        def q(col, kk):
            return (col + kk) % 16
        if method == 2:  # AWQ: along N in AWQ's order
            order = (0, 2, 4, 6, 1, 3, 5, 7)
            qweight = [sum(q(8 * j + order[i], kk) << (4 * i) for i in range(8)) for kk in range(k) for j in range(n // 8)]
            qzeros = [sum(8 << (4 * i) for i in range(8)) for _ in range(k // group) for _ in range(n // 8)]
            tensors.append((prefix + ".qweight", "I32", [k, n // 8], words(qweight)))
        else:  # GPTQ: along K; v1 stores z - 1
            qweight = [sum(q(col, 8 * r + i) << (4 * i) for i in range(8)) for r in range(k // 8) for col in range(n)]
            stored_zero = 7 if method != 1 else 8
            qzeros = [sum(stored_zero << (4 * i) for i in range(8)) for _ in range(k // group) for _ in range(n // 8)]
            tensors.append((prefix + ".qweight", "I32", [k // 8, n], words(qweight)))
            tensors.append((prefix + ".g_idx", "I32", [k], words([kk // group for kk in range(k)])))
        tensors.append((prefix + ".qzeros", "I32", [k // group, n // 8], words(qzeros)))
        count = (k // group) * n
        tensors.append((prefix + ".scales", "F16", [k // group, n], struct.pack(f"<{count}H", *([0x2400] * count))))

    tensors.append(("model.embed_tokens.weight", "BF16", [vocab, hidden], bf16_ones([vocab, hidden])))
    pre = "model.layers.0."
    tensors.append((pre + "input_layernorm.weight", "BF16", [hidden], bf16_ones([hidden])))
    tensors.append((pre + "post_attention_layernorm.weight", "BF16", [hidden], bf16_ones([hidden])))
    for name, n, k in (("self_attn.q_proj", 64, hidden), ("self_attn.k_proj", 32, hidden), ("self_attn.v_proj", 32, hidden),
                       ("self_attn.o_proj", hidden, 64), ("mlp.gate_proj", inter, hidden),
                       ("mlp.up_proj", inter, hidden), ("mlp.down_proj", hidden, inter)):
        packed(pre + name, n, k)
    tensors.append(("model.norm.weight", "BF16", [hidden], bf16_ones([hidden])))
    if not tied:
        tensors.append(("lm_head.weight", "BF16", [vocab, hidden], bf16_ones([vocab, hidden])))
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return bytes([selector]) + safetensors(header, data)


def int4_checkpoint_seeds():
    write("fuzz_int4_checkpoint", "gptq_v1.bin", int4_checkpoint(0))
    write("fuzz_int4_checkpoint", "gptq_v2_tied.bin", int4_checkpoint(1 | 4))
    write("fuzz_int4_checkpoint", "awq.bin", int4_checkpoint(2))


if __name__ == "__main__":
    request_seeds()
    gguf_seeds()
    safetensors_seeds()
    config_seeds()
    tokenizer_seeds()
    int4_checkpoint_seeds()
