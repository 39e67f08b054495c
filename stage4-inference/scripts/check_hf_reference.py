#!/usr/bin/env python3
"""Checks a folder written by hf_reference.py against the format in
stage4-inference/tests/hf_reference_format.md, before the engine's parity tests trust it.

    python3 stage4-inference/scripts/check_hf_reference.py DIR [--recompute] [--device cpu|cuda]
        [--gguf PATH] [--hash]

DIR holds one folder per case (or is one case's folder). For every case it checks:
  reference.json  every key and its type, the format name, the case name, the config (heads
                  that divide, Llama 3 RoPE scaling complete), an ISO 8601 UTC date; per sequence
                  ids inside the vocabulary, n = prompt_length + 32, greedy = ids[prompt_length:],
                  and the recorded margins and their histograms (absolute and over the row's
                  RMS) and the greedy/argmax agreement recomputed from the logits file
  seq<k>.f32      exactly n x vocab little-endian float32 values, all finite
  the model       random cases (the case's folder): config.json with the reference's sizes
                  and RoPE (as rope_parameters, or rope_theta and rope_scaling, or both, which
                  must agree); generation_config.json;
                  model.safetensors with exactly a Llama's tensors, all bf16, in the shapes the
                  config gives (lm_head only when untied), its data section exactly covered.
                  The GGUF case: its path, size and sha256 recorded; the file's size (and with
                  --hash its sha256) when the file is there or given with --gguf; the prompt and
                  greedy texts
  engine_model    a case with one (gqa4_gptq, gqa1_awq): the GPTQ or AWQ checkpoint in the
                  case's gptq/ or awq/ folder, its config.json the model's with the reference's
                  quantization_config, and its model.safetensors unpacked here (GPTQ v1: qweight,
                  qzeros, scales, g_idx; AWQ's GEMM packing: qweight, qzeros, scales) and
                  dequantized, s (q - z) rounded to bf16, equal bit for bit to the projections of
                  the model transformers ran; its other tensors equal to that model's
With --recompute (needs PyTorch and transformers) it also loads each model as hf_reference.py did
and recomputes every sequence's logits and greedy continuation: the logits must lie within the
reference's own bf16-vs-float32 difference, and it reports how many greedy tokens match.

It prints one line per case and closes with "N passed, N failed"; the exit status is 0 only when
every case passed.
"""
import argparse
import datetime
import json
import os
import re
import struct
import sys

os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF reader has a bar of its own

# The format's constants and the file hash are the writer's (hf_reference.py imports nothing
# beyond the standard library at module level).
from hf_reference import FORMAT, MARGIN_BINS, NEW_TOKENS, sha256_of  # noqa: E402

CONFIG_INTS = ("hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
               "head_dim", "vocab_size")
LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor",
               "original_max_position_embeddings")
# reference.json's config key -> config.json's key (the RoPE is compared apart)
HF_KEYS = {"hidden_size": "hidden_size", "intermediate_size": "intermediate_size",
           "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads",
           "num_kv_heads": "num_key_value_heads", "head_dim": "head_dim",
           "vocab_size": "vocab_size", "tie_word_embeddings": "tie_word_embeddings",
           "rms_norm_eps": "rms_norm_eps", "max_position_embeddings": "max_position_embeddings",
           "initializer_range": "initializer_range"}
NOISE_KEYS = ("max_abs_diff", "median_row_max_abs_diff", "worst_over_rms", "mean_over_rms",
              "top1_agree", "judged", "top1_agree_judged", "greedy_same_run")

try:
    import numpy as np
except ImportError:
    print("check_hf_reference.py: needs numpy (pip install numpy)", file=sys.stderr)
    sys.exit(2)


class Bad(Exception):
    """A check that failed; the message says where and what."""


def need(condition, message):
    if not condition:
        raise Bad(message)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_keys(obj, keys, where):
    need(isinstance(obj, dict), f"{where} is not a JSON object")
    missing = [k for k in keys if k not in obj]
    need(not missing, f"{where} lacks {', '.join(missing)}")


def check_config(config):
    check_keys(config, CONFIG_INTS + ("tie_word_embeddings", "rope_theta", "rope_scaling"),
               "config")
    for k in CONFIG_INTS:
        need(is_int(config[k]) and config[k] > 0, f"config.{k} is {config[k]!r}, not a positive "
                                                  "integer")
    need(config["num_heads"] % config["num_kv_heads"] == 0,
         f"config: {config['num_kv_heads']} KV heads do not divide {config['num_heads']} heads")
    need(isinstance(config["tie_word_embeddings"], bool), "config.tie_word_embeddings is not "
                                                          "true or false")
    need(is_num(config["rope_theta"]) and config["rope_theta"] > 0,
         f"config.rope_theta is {config['rope_theta']!r}")
    scaling = config["rope_scaling"]
    if scaling is not None:
        check_keys(scaling, ("rope_type",), "config.rope_scaling")
        need(scaling["rope_type"] == "llama3",
             f"config.rope_scaling.rope_type is {scaling['rope_type']!r}, not llama3")
        check_keys(scaling, LLAMA3_KEYS, "config.rope_scaling")
        for k in LLAMA3_KEYS:
            need(is_num(scaling[k]) and scaling[k] > 0, f"config.rope_scaling.{k} is "
                                                         f"{scaling[k]!r}")


def read_logits(path, n, vocab):
    need(os.path.isfile(path), f"{path} is missing")
    size = os.path.getsize(path)
    need(size == n * vocab * 4, f"{path} has {size} bytes, not {n} x {vocab} x 4 = "
                                f"{n * vocab * 4}")
    logits = np.fromfile(path, dtype="<f4").reshape(n, vocab)
    need(np.isfinite(logits).all(), f"{path} holds NaN or Inf")
    return logits


def check_sequence(case_dir, k, seq, vocab, files_seen):
    where = f"sequences[{k}]"
    check_keys(seq, ("ids", "logits_file", "prompt_length", "greedy", "top2_margin_min",
                     "top2_margin_hist", "top2_margin_over_rms_min", "top2_margin_over_rms_hist",
                     "greedy_agrees_with_forward_argmax", "bf16_vs_fp32"), where)
    ids, greedy, p = seq["ids"], seq["greedy"], seq["prompt_length"]
    need(isinstance(ids, list) and ids and all(is_int(i) for i in ids),
         f"{where}.ids is not a non-empty list of integers")
    need(all(0 <= i < vocab for i in ids), f"{where}.ids has an id outside [0, {vocab})")
    n = len(ids)
    need(is_int(p) and p >= 1, f"{where}.prompt_length is {p!r}")
    need(n == p + NEW_TOKENS, f"{where}: {n} ids, not prompt_length {p} + {NEW_TOKENS}")
    need(greedy == ids[p:], f"{where}.greedy is not ids[prompt_length:]")
    name = seq["logits_file"]
    need(isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9_.-]+\.f32", name) is not None,
         f"{where}.logits_file {name!r} is not a plain .f32 file name")
    need(name not in files_seen, f"{where}.logits_file {name} is used twice")
    files_seen.add(name)
    logits = read_logits(os.path.join(case_dir, name), n, vocab)

    top2 = np.sort(logits, axis=1)[:, -2:]
    margins = top2[:, 1] - top2[:, 0]
    need(abs(float(margins.min()) - seq["top2_margin_min"]) <= 1e-6,
         f"{where}.top2_margin_min is {seq['top2_margin_min']}, the logits give "
         f"{float(margins.min())}")
    hist = seq["top2_margin_hist"]
    check_keys(hist, [f"lt_{b}" for b in MARGIN_BINS], f"{where}.top2_margin_hist")
    for b in MARGIN_BINS:
        got = int((margins < b).sum())
        need(hist[f"lt_{b}"] == got, f"{where}.top2_margin_hist.lt_{b} is {hist[f'lt_{b}']}, "
                                     f"the logits give {got}")
    # The same in units of the row's RMS, which the writer summed in another order: a count may
    # differ only by margins within rounding of a bin's edge.
    rel = margins.astype(np.float64) / np.sqrt((logits.astype(np.float64) ** 2).mean(axis=1))
    need(abs(float(rel.min()) - seq["top2_margin_over_rms_min"]) <= 1e-5,
         f"{where}.top2_margin_over_rms_min is {seq['top2_margin_over_rms_min']}, the logits "
         f"give {float(rel.min())}")
    hist = seq["top2_margin_over_rms_hist"]
    check_keys(hist, [f"lt_{b}" for b in MARGIN_BINS], f"{where}.top2_margin_over_rms_hist")
    for b in MARGIN_BINS:
        low, high = int((rel < b - 1e-6).sum()), int((rel < b + 1e-6).sum())
        need(low <= hist[f"lt_{b}"] <= high,
             f"{where}.top2_margin_over_rms_hist.lt_{b} is {hist[f'lt_{b}']}, the logits give "
             f"{low}")
    argmax = logits.argmax(axis=1)
    agree = int(sum(argmax[p - 1 + j] == greedy[j] for j in range(NEW_TOKENS)))
    need(seq["greedy_agrees_with_forward_argmax"] == agree,
         f"{where}.greedy_agrees_with_forward_argmax is "
         f"{seq['greedy_agrees_with_forward_argmax']}, the logits give {agree}")
    noise = seq["bf16_vs_fp32"]
    check_keys(noise, NOISE_KEYS, f"{where}.bf16_vs_fp32")
    need(all(is_num(noise[k]) and noise[k] >= 0 for k in NOISE_KEYS),
         f"{where}.bf16_vs_fp32 has a value that is not a number >= 0")
    need(noise["median_row_max_abs_diff"] <= noise["max_abs_diff"],
         f"{where}.bf16_vs_fp32: the median row maximum exceeds the maximum")
    need(all(is_int(noise[k]) for k in ("top1_agree", "judged", "top1_agree_judged", "greedy_same_run")) and
         noise["top1_agree"] <= n and noise["top1_agree_judged"] <= noise["judged"] <= n and
         noise["greedy_same_run"] <= NEW_TOKENS,
         f"{where}.bf16_vs_fp32 has impossible counts")
    return logits, margins


def safetensors_header(path):
    with open(path, "rb") as f:
        head = f.read(8)
        need(len(head) == 8, f"{path}: shorter than a safetensors header")
        (length,) = struct.unpack("<Q", head)
        need(0 < length <= os.path.getsize(path) - 8, f"{path}: header length {length} is past "
                                                      "the end of the file")
        header = json.loads(f.read(length))
    return header, 8 + length


def expected_tensors(c):
    h, i, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    q, kv = c["num_heads"] * c["head_dim"], c["num_kv_heads"] * c["head_dim"]
    shapes = {"model.embed_tokens.weight": [v, h], "model.norm.weight": [h]}
    for layer in range(c["num_layers"]):
        pre = f"model.layers.{layer}."
        shapes.update({
            pre + "input_layernorm.weight": [h],
            pre + "self_attn.q_proj.weight": [q, h],
            pre + "self_attn.k_proj.weight": [kv, h],
            pre + "self_attn.v_proj.weight": [kv, h],
            pre + "self_attn.o_proj.weight": [h, q],
            pre + "post_attention_layernorm.weight": [h],
            pre + "mlp.gate_proj.weight": [i, h],
            pre + "mlp.up_proj.weight": [i, h],
            pre + "mlp.down_proj.weight": [h, i],
        })
    if not c["tie_word_embeddings"]:
        shapes["lm_head.weight"] = [v, h]
    return shapes


def check_model_dir(case_dir, ref):
    c = ref["config"]
    path = os.path.join(case_dir, "config.json")
    need(os.path.isfile(path), f"{path} is missing")
    with open(path, encoding="utf-8") as f:
        hf = json.load(f)
    need(hf.get("model_type") == "llama", f"{path}: model_type is {hf.get('model_type')!r}")
    for key, hf_key in HF_KEYS.items():
        if key not in c:
            continue
        need(hf_key in hf, f"{path} lacks {hf_key!r} (the reference states {key} {c[key]!r})")
        need(hf[hf_key] == c[key], f"{path}: {hf_key} is {hf[hf_key]!r}, the reference says "
                                   f"{c[key]!r}")
    # transformers 5 writes the RoPE as "rope_parameters" (theta and scaling in one object),
    # older versions as "rope_theta" and "rope_scaling"; each form present must agree.
    forms = []
    if "rope_parameters" in hf:
        params = dict(hf["rope_parameters"] or {})
        forms.append(("rope_parameters", params.pop("rope_theta", None), params))
    if "rope_theta" in hf or "rope_scaling" in hf:
        forms.append(("rope_theta/rope_scaling", hf.get("rope_theta"),
                      dict(hf.get("rope_scaling") or {})))
    need(forms, f"{path} states no RoPE (neither rope_parameters nor rope_theta)")
    want_scaling = c["rope_scaling"] or {"rope_type": "default"}
    for form, theta, scaling in forms:
        need(theta == c["rope_theta"], f"{path}: {form} gives rope_theta {theta!r}, the "
                                       f"reference says {c['rope_theta']!r}")
        scaling.setdefault("rope_type", scaling.pop("type", "default"))
        need(scaling == want_scaling, f"{path}: {form} gives the scaling {scaling}, the "
                                      f"reference says {want_scaling}")
    need(os.path.isfile(os.path.join(case_dir, "generation_config.json")),
         f"{case_dir}/generation_config.json is missing")

    path = os.path.join(case_dir, "model.safetensors")
    need(os.path.isfile(path), f"{path} is missing")
    header, data_start = safetensors_header(path)
    header.pop("__metadata__", None)
    want = expected_tensors(c)
    extra, missing = sorted(set(header) - set(want)), sorted(set(want) - set(header))
    need(not extra and not missing, f"{path}: tensors " +
         (f"missing {missing[:4]} " if missing else "") +
         (f"unexpected {extra[:4]}" if extra else ""))
    spans = []
    for name, info in header.items():
        need(info.get("dtype") == "BF16", f"{path}: {name} is {info.get('dtype')}, not BF16")
        need(info.get("shape") == want[name], f"{path}: {name} has shape {info.get('shape')}, "
                                              f"not {want[name]}")
        begin, end = info["data_offsets"]
        count = 1
        for d in want[name]:
            count *= d
        need(end - begin == 2 * count, f"{path}: {name} spans {end - begin} bytes, not "
                                       f"{2 * count}")
        spans.append((begin, end))
    spans.sort()
    covered = 0
    for begin, end in spans:
        need(begin == covered, f"{path}: tensor data has a gap or overlap at byte {begin}")
        covered = end
    need(data_start + covered == os.path.getsize(path),
         f"{path}: {os.path.getsize(path)} bytes, the header describes {data_start + covered}")
    return f"{len(header)} bf16 tensors"


def safetensors_arrays(path):
    """Every tensor of a safetensors file as a numpy array (BF16 as its uint16 bits)."""
    header, data_start = safetensors_header(path)
    header.pop("__metadata__", None)
    dtypes = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32, "I32": np.int32}
    arrays = {}
    with open(path, "rb") as f:
        data = f.read()
    for name, info in header.items():
        need(info.get("dtype") in dtypes, f"{path}: {name} is {info.get('dtype')}")
        begin, end = info["data_offsets"]
        array = np.frombuffer(data, dtype=dtypes[info["dtype"]], count=(end - begin) //
                              np.dtype(dtypes[info["dtype"]]).itemsize, offset=data_start + begin)
        arrays[name] = (info["dtype"], array.reshape(info["shape"]))
    return arrays


def bf16_bits(values):
    """float32 values rounded to bf16 (nearest, ties to even), as uint16 bits; finite values."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def check_engine_model(case_dir, ref):
    """The GPTQ or AWQ checkpoint the engine reads against the model transformers ran (see the
    top)."""
    quantization = ref.get("quantization")
    need(isinstance(quantization, dict) and quantization.get("bits") == 4 and
         is_int(quantization.get("group_size")) and quantization["group_size"] > 0 and
         ((quantization.get("quant_method") == "gptq" and
           quantization.get("checkpoint_format") == "gptq") or
          (quantization.get("quant_method") == "awq" and quantization.get("version") == "gemm")),
         f"quantization {quantization!r} is not 4-bit GPTQ v1 or AWQ GEMM with a group size")
    method, group = quantization["quant_method"], quantization["group_size"]
    awq = method == "awq"
    folder = ref["engine_model"]
    need(os.path.realpath(folder) == os.path.realpath(os.path.join(case_dir, method)),
         f"engine_model {folder!r} is not the case's {method}/ folder")
    path = os.path.join(folder, "config.json")
    need(os.path.isfile(path), f"{path} is missing")
    with open(path, encoding="utf-8") as f:
        hf = json.load(f)
    need(hf.get("quantization_config") == quantization,
         f"{path}: quantization_config {hf.get('quantization_config')!r} is not the reference's")
    c = ref["config"]
    for key, hf_key in HF_KEYS.items():
        if key in c and key != "initializer_range":
            need(hf.get(hf_key) == c[key], f"{path}: {hf_key} is {hf.get(hf_key)!r}, the reference "
                                           f"says {c[key]!r}")
    packed = safetensors_arrays(os.path.join(folder, "model.safetensors"))
    plain = safetensors_arrays(os.path.join(case_dir, "model.safetensors"))
    want = expected_tensors(c)
    seen, projections = set(), 0
    for name, shape in want.items():
        if not (name.startswith("model.layers.") and name.endswith("_proj.weight")):
            need(name in packed and packed[name][0] == "BF16" and
                 np.array_equal(packed[name][1], plain[name][1]),
                 f"{folder}: {name} is missing or differs from the model transformers ran")
            seen.add(name)
            continue
        prefix, (n, k) = name[:-len(".weight")], shape
        need(k % group == 0 and n % 8 == 0, f"{name}: {n} x {k} cannot be packed in groups of "
                                            f"{group}")
        parts = {p: f"{prefix}.{p}" for p in ("qweight", "qzeros", "scales") + (() if awq else ("g_idx",))}
        shapes = {"qweight": ("I32", [k, n // 8] if awq else [k // 8, n]),
                  "qzeros": ("I32", [k // group, n // 8]),
                  "scales": ("F16", [k // group, n]), "g_idx": ("I32", [k])}
        for part, tensor in parts.items():
            need(tensor in packed, f"{folder}: {tensor} is missing")
            dtype, array = packed[tensor]
            need((dtype, list(array.shape)) == shapes[part],
                 f"{folder}: {tensor} is {dtype} {list(array.shape)}, not {shapes[part]}")
            seen.add(tensor)
        words = packed[parts["qweight"]][1].view(np.uint32)
        zero_words = packed[parts["qzeros"]][1].view(np.uint32)
        kk, nn = np.arange(k), np.arange(n)
        if awq:  # column 8j + AWQ_ORDER[i] in nibble i of word j: nibble AWQ_REVERSE[c % 8]
            nibble = np.array([0, 4, 1, 5, 2, 6, 3, 7], dtype=np.uint32)[nn % 8]
            q = (words[:, nn // 8] >> (4 * nibble)) & 15                                # [K, N]
            z = (zero_words[:, nn // 8] >> (4 * nibble)) & 15                            # [K/G, N]
        else:
            need(np.array_equal(packed[parts["g_idx"]][1], np.arange(k) // group),
                 f"{folder}: {parts['g_idx']} is not k // {group}")
            q = (words[kk // 8, :] >> (4 * (kk % 8))[:, None].astype(np.uint32)) & 15  # [K, N]
            z = ((zero_words[:, nn // 8] >> (4 * (nn % 8)).astype(np.uint32)) & 15) + 1  # [K/G, N]
        scales = packed[parts["scales"]][1].astype(np.float32)                       # [K/G, N]
        values = scales[kk // group, :] * (q.astype(np.float32) - z[kk // group, :])  # [K, N]
        need(np.array_equal(bf16_bits(values.T), plain[name][1]),
             f"{folder}: {prefix}, unpacked and dequantized, is not the model's {name}")
        projections += 1
    extra = sorted(set(packed) - seen)
    need(not extra, f"{folder}: unexpected tensors {extra[:4]}")
    return (f"engine model: {projections} projections in {method} 4-bit groups of {group}, "
            "dequantized equal")


def locate_gguf(ref, given):
    if given is not None:
        need(os.path.isfile(given), f"--gguf {given}: no such file")
        return given
    return ref["model"] if os.path.isfile(ref["model"]) else None


def check_gguf(ref, args):
    check_keys(ref, ("model_size", "model_sha256"), "reference.json")
    need(os.path.isabs(ref["model"]) and ref["model"].endswith(".gguf"),
         f"model {ref['model']!r} is not an absolute path of a .gguf file")
    need(is_int(ref["model_size"]) and ref["model_size"] > 0, "model_size is not positive")
    need(re.fullmatch(r"[0-9a-f]{64}", str(ref["model_sha256"])) is not None,
         "model_sha256 is not 64 hex digits")
    for k, seq in enumerate(ref["sequences"]):
        check_keys(seq, ("messages", "prompt_text", "greedy_text"), f"sequences[{k}]")
        need(isinstance(seq["prompt_text"], str) and isinstance(seq["greedy_text"], str),
             f"sequences[{k}]: prompt_text and greedy_text are not strings")
    path = locate_gguf(ref, args.gguf)
    if path is None:
        return "model file not here (not compared)"
    need(os.path.getsize(path) == ref["model_size"],
         f"{path} has {os.path.getsize(path)} bytes, the reference read {ref['model_size']}")
    if args.hash:
        need(sha256_of(path) == ref["model_sha256"], f"{path}: sha256 differs from the reference's")
        return "model file size and sha256 match"
    return "model file size matches"


def recompute(case_dir, ref, logits_of, args):
    """Reloads the model, recomputes every sequence; returns a note for the summary line."""
    try:
        import torch
        import transformers
    except ImportError as e:
        raise Bad(f"--recompute needs PyTorch and transformers ({e})")
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    if not ref["model"].endswith(".gguf"):
        folder, gguf_file = case_dir, None
    else:
        path = locate_gguf(ref, args.gguf)
        if path is None:
            return "not recomputed (model file not here)"
        folder, gguf_file = os.path.split(os.path.abspath(path))
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=gguf_file, dtype=torch.bfloat16, attn_implementation="eager")
    model.to(args.device).eval()
    worst, greedy_same, total = 0.0, 0, 0
    with torch.inference_mode():
        for k, seq in enumerate(ref["sequences"]):
            ids = torch.tensor([seq["ids"]], device=args.device)
            got = model(ids).logits[0].float().cpu().numpy()
            diff = float(np.abs(got - logits_of[k]).max())
            need(diff <= seq["bf16_vs_fp32"]["max_abs_diff"],
                 f"sequences[{k}]: recomputed logits differ by {diff:.4g}, more than bf16's own "
                 f"error {seq['bf16_vs_fp32']['max_abs_diff']:.4g}")
            worst = max(worst, diff)
            p = seq["prompt_length"]
            prompt = ids[:, :p]
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                                 max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None,
                                 pad_token_id=0)
            greedy_same += sum(int(a == b) for a, b in zip(out[0, p:].tolist(), seq["greedy"]))
            total += NEW_TOKENS
    return f"recomputed on {args.device}: logits within {worst:.3g}, greedy {greedy_same}/{total}"


def check_case(case_dir, args):
    path = os.path.join(case_dir, "reference.json")
    with open(path, encoding="utf-8") as f:
        ref = json.load(f)
    check_keys(ref, ("format", "case", "model", "dtype", "attn_implementation", "torch",
                     "transformers", "device", "date", "config", "sequences"), "reference.json")
    need(ref["format"] == FORMAT, f"format is {ref['format']!r}, not {FORMAT!r}")
    need(ref["case"] == os.path.basename(os.path.normpath(case_dir)),
         f"case {ref['case']!r} is not the folder's name")
    need(ref["dtype"] == "bfloat16", f"dtype is {ref['dtype']!r}")
    need(ref["attn_implementation"] == "eager",
         f"attn_implementation is {ref['attn_implementation']!r}")
    for k in ("model", "torch", "transformers", "device", "date"):
        need(isinstance(ref[k], str) and ref[k], f"{k} is not a non-empty string")
    try:
        datetime.datetime.strptime(ref["date"], "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise Bad(f"date {ref['date']!r} is not an ISO 8601 UTC time like 2026-01-31T12:00:00Z")
    check_config(ref["config"])
    vocab = ref["config"]["vocab_size"]
    seqs = ref["sequences"]
    need(isinstance(seqs, list) and seqs, "sequences is not a non-empty list")
    files_seen = set()
    logits_of, all_margins = [], []
    for k, seq in enumerate(seqs):
        logits, margins = check_sequence(case_dir, k, seq, vocab, files_seen)
        logits_of.append(logits)
        all_margins.append(margins)
    stray = sorted(set(n for n in os.listdir(case_dir) if n.endswith(".f32")) - files_seen)
    need(not stray, f"{case_dir} holds logits files no sequence names: {', '.join(stray)}")

    need(os.path.isabs(ref["model"]), f"model {ref['model']!r} is not an absolute path")
    if not ref["model"].endswith(".gguf"):
        model_note = check_model_dir(case_dir, ref)
        if os.path.realpath(ref["model"]) != os.path.realpath(case_dir):
            model_note += f" (written as {ref['model']}; checked here)"
        if "engine_model" in ref:
            model_note += "; " + check_engine_model(case_dir, ref)
    else:
        model_note = check_gguf(ref, args)
    margins = np.concatenate(all_margins)
    note = (f"{len(seqs)} sequences, {margins.size} positions, margin " +
            ", ".join(f"<{b}: {int((margins < b).sum())}" for b in MARGIN_BINS) +
            f"; {model_note}")
    if args.recompute:
        note += "; " + recompute(case_dir, ref, logits_of, args)
    return note


def main():
    parser = argparse.ArgumentParser(description="Checks the files hf_reference.py wrote.")
    parser.add_argument("dir", help="the --out folder of hf_reference.py, or one case's folder")
    parser.add_argument("--recompute", action="store_true",
                        help="reload each model and recompute its logits (needs torch)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="where --recompute runs (default cpu)")
    parser.add_argument("--gguf", help="where the GGUF case's model file is here, if not at the "
                                       "path its reference.json names")
    parser.add_argument("--hash", action="store_true", help="also compare the GGUF's sha256")
    args = parser.parse_args()
    if not os.path.isdir(args.dir):
        print(f"check_hf_reference.py: {args.dir} is not a folder", file=sys.stderr)
        return 2
    if os.path.isfile(os.path.join(args.dir, "reference.json")):
        cases = [args.dir]
    else:
        cases = sorted(os.path.join(args.dir, d) for d in os.listdir(args.dir)
                       if os.path.isfile(os.path.join(args.dir, d, "reference.json")))
    if not cases:
        print(f"check_hf_reference.py: no reference.json in {args.dir} or its folders",
              file=sys.stderr)
        return 2
    passed = failed = 0
    for case_dir in cases:
        name = os.path.basename(os.path.normpath(case_dir))
        try:
            print(f"ok   {name}: {check_case(case_dir, args)}", flush=True)
            passed += 1
        except (Bad, OSError, ValueError, KeyError, TypeError) as e:
            print(f"FAIL {name}: {type(e).__name__ + ': ' if not isinstance(e, Bad) else ''}{e}",
                  flush=True)
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
