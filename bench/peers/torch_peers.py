#!/usr/bin/env python3
"""PyTorch peers of kc's stage-2 memory-bound ops and stage-3 attention, timed on this machine's GPU.

For each op, dtype and shape it times PyTorch eager and torch.compile of the same computation
kc's kernels do:

  rmsnorm           F.rms_norm(x, (cols,), weight, eps=1e-6)
  layernorm         F.layer_norm(x, (cols,), weight, bias, eps=1e-5)
  softmax           torch.softmax(x, dim=-1)
  residual_rmsnorm  s = x + residual; returns (s, F.rms_norm(s, (cols,), weight, eps=1e-6))

and, for attention_fwd, F.scaled_dot_product_attention on kc's layout (Q [B,Hq,S,D], K and V
[B,Hkv,S,D], scale 1/sqrt(D)) at the op's documented bench shapes (ATTENTION_BENCH, the same list
as attention_bench_problems() in stage3-hpc/src/attention_op.cpp), causal and not, pinned to one
backend each with torch.nn.attention.sdpa_kernel:

  torch SDPA flash (FA2)   SDPBackend.FLASH_ATTENTION (PyTorch's FlashAttention-2)
  torch SDPA cuDNN         SDPBackend.CUDNN_ATTENTION

For attention_decode_paged (one new token per sequence against a paged KV cache), the same two
backends run SDPA on the contiguous cache the paged one holds: K and V [B,Hkv,Sk,D], every
sequence at Sk keys (the pages gathered into one tensor before timing, which is not timed), Q
[B,Hq,1,D], no mask (one query sees every key). Only the op's bench shapes with full lengths and
one new token get rows (DECODE_BENCH): its ragged batch and its four-token shape have no SDPA
form without padding or a lower-right mask, which would time other work. GB/s there uses kc's
byte count (the K/V rows, Q, O, LSE, lengths and table slots; SDPA moves no LSE or table).

Grouped heads (Hkv < Hq) go through enable_gqa=True. A backend that refuses a problem (PyTorch
raises "No available kernel"; some versions' cuDNN backend does not take enable_gqa) is reported
on stderr and gets no row: K and V are not repeated to Hq heads for it, which would time another
problem. PyTorch's is_causal aligns the mask top-left, kc's bottom-right; the two agree because
every bench shape has Sq = Sk. SDPA returns no LSE here (kc's op also writes it: 4 bytes a row).
The two backends' outputs must agree (bf16-level tolerance) before either is timed.

Timing: CUDA events around one call, warm-up first (torch.compile compiles during the warm-up),
the median of at least 30 samples. Before every sample the L2 is scrubbed as kc's L2Scrubber
does it: by reading a buffer larger than twice the L2 (a sum into a preallocated one-element
tensor that is kept), so the inputs come from DRAM and no dirty lines are left for the timed call
to write back. Inputs are random and non-zero (normal activations, weights in [0.5, 1.5], biases
in [-0.5, 0.5], softmax inputs with standard deviation 30, as in kc).

The results go to --out as a TSV of six tab-separated columns: kc's op name (without the dtype),
the dtype (bf16, f16 or f32), the shape as kc's Problem::shape() writes it, the peer, the median
time and the problem's parameters that differ from their defaults as Problem::params_text()
writes them (empty for the defaults), so `kc-bench --peers FILE` puts each row in the cell of the
same problem and computes GB/s or TFLOPS with kc's own byte and FLOP counts:

  op<TAB>dtype<TAB>shape<TAB>peer<TAB>median_ms<TAB>params
  rmsnorm<TAB>bf16<TAB>32768x4096<TAB>torch.compile<TAB>0.1234<TAB>
  attention_fwd<TAB>bf16<TAB>4x16x16x4096x4096x128<TAB>torch SDPA cuDNN<TAB>1.2345<TAB>causal=1

The script also prints its own table (GB/s there uses the same byte formulas as kc: each input
read once, each output written once; TFLOPS for attention kc's count, 4.D per visible
(query, key) pair).

Usage:  python3 bench/peers/torch_peers.py --out peers-h200.tsv
        python3 bench/peers/torch_peers.py --out attention.tsv --ops attention_fwd
        python3 bench/peers/torch_peers.py --out decode.tsv --ops attention_decode_paged
"""

import argparse
import statistics
import sys

import torch
import torch.nn.functional as F

RMSNORM_EPS = 1e-6  # kc::stage2::kRmsNormEps
LAYERNORM_EPS = 1e-5  # kc::stage2::kLayerNormEps
SCRUB_FALLBACK_BYTES = 256 << 20  # when PyTorch does not report the L2 size

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
OPS = ("rmsnorm", "layernorm", "softmax", "residual_rmsnorm", "attention_fwd", "attention_decode_paged")
ROW_OPS = OPS[:4]  # the (rows x cols) ops of stage 2
# What runs without --ops: every op (the decode one times SDPA on its largest caches, tens of GiB:
# leave it out with --ops on a smaller GPU).
DEFAULT_OPS = OPS

# attention_fwd's bench shapes, (B, Hq, Hkv, Sq, Sk, D) and causal, as attention_bench_problems()
# lists them: 16k tokens of hidden size 2048 (16 heads of 128 or 32 of 64), and Llama-3-8B's
# grouped heads (32 query heads over 8 kv heads).
ATTENTION_BENCH = [((16384 // s, 2048 // d, 2048 // d, s, s, d), causal)
                   for d in (128, 64) for s in (1024, 2048, 4096, 8192, 16384) for causal in (False, True)]
ATTENTION_BENCH += [((4, 32, 8, 4096, 4096, 128), causal) for causal in (False, True)]
ATTENTION_DTYPES = ("bf16", "f16")

# attention_decode_paged's bench shapes (B, Hq, Hkv, Sq, Sk, D) with every sequence at Sk keys and
# one new token, as decode_bench_problems() in stage3-hpc/src/attention_decode_op.cpp lists them:
# Llama-3-8B's heads, batch 1 to 256, contexts 1k, 8k and 32k (blocks of 16, the default).
DECODE_BENCH = [(batch, 32, 8, 1, context, 128) for context in (1024, 8192, 32768) for batch in (1, 8, 64, 256)]
DECODE_BLOCK_SIZE = 16


def rmsnorm(x, weight):
    return F.rms_norm(x, (x.shape[-1],), weight, eps=RMSNORM_EPS)


def layernorm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps=LAYERNORM_EPS)


def softmax(x):
    return torch.softmax(x, dim=-1)


def residual_rmsnorm(x, residual, weight):
    s = x + residual
    return s, F.rms_norm(s, (s.shape[-1],), weight, eps=RMSNORM_EPS)


FUNCTIONS = {"rmsnorm": rmsnorm, "layernorm": layernorm, "softmax": softmax,
             "residual_rmsnorm": residual_rmsnorm}


def make_inputs(op, rows, cols, dtype, generator):
    """Random non-zero inputs, distributed as kc's make_operands draws them."""
    def normal(*shape, std=1.0, mean=0.0):
        return (torch.randn(*shape, generator=generator, device="cuda") * std + mean).to(dtype)

    def uniform(low, high, *shape):
        return (torch.rand(*shape, generator=generator, device="cuda") * (high - low) + low).to(dtype)

    weight = uniform(0.5, 1.5, cols)
    if op == "rmsnorm":
        return (normal(rows, cols), weight)
    if op == "layernorm":
        return (normal(rows, cols, mean=0.5), weight, uniform(-0.5, 0.5, cols))
    if op == "softmax":
        return (normal(rows, cols, std=30.0),)
    if op == "residual_rmsnorm":
        return (normal(rows, cols), normal(rows, cols), weight)
    raise ValueError(op)


def minimum_bytes(op, rows, cols, element_bytes):
    """Each input read once, each output written once (kc's Work::bytes for the op)."""
    matrix, vector = rows * cols, cols
    elements = {
        "rmsnorm": 2 * matrix + vector,             # x, weight in; y out
        "layernorm": 2 * matrix + 2 * vector,       # x, weight, bias in; y out
        "softmax": 2 * matrix,                      # x in; y out
        "residual_rmsnorm": 4 * matrix + vector,    # x, residual, weight in; sum, y out
    }[op]
    return elements * element_bytes


class L2Scrubber:
    """Evicts the L2 by reading, as kc's L2Scrubber (common/src/timing.cu) does.

    Writing a buffer would evict the inputs too, but it leaves the L2 full of dirty lines that are
    written back to DRAM while the next, timed, call runs, and that write-back is charged to the
    peer. A read pass leaves only clean lines. The buffer is more than twice the L2, as kc's is.
    The sum lands in a preallocated one-element tensor that this object keeps, so the read is a
    real kernel whose result is stored, and nothing larger than that element (and the reduction's
    small scratch) is written.
    """

    def __init__(self):
        l2_bytes = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)
        scrub_bytes = 2 * l2_bytes + (4 << 20) if l2_bytes > 0 else SCRUB_FALLBACK_BYTES
        self.buffer = torch.ones(scrub_bytes // 4, dtype=torch.float32, device="cuda")
        self.sink = torch.zeros((), dtype=torch.float32, device="cuda")
        self.bytes = self.buffer.numel() * 4

    def scrub(self):
        torch.sum(self.buffer, dim=0, out=self.sink)


def time_ms(fn, args, samples, warmup, scrubber):
    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(samples):
        scrubber.scrub()  # every sample reads its inputs from DRAM
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def check_same(op, eager_out, compiled_out):
    """The compiled function must compute what eager does (bf16-level tolerance)."""
    eager = eager_out if isinstance(eager_out, tuple) else (eager_out,)
    compiled = compiled_out if isinstance(compiled_out, tuple) else (compiled_out,)
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c.float(), e.float(), rtol=2e-2, atol=2e-2,
                                   msg=lambda m: f"{op}: torch.compile disagrees with eager: {m}")


def attention_backends():
    """(peer name, SDPBackend) pairs; imported here so the stage-2 peers run on older PyTorch."""
    from torch.nn.attention import SDPBackend
    return (("torch SDPA flash (FA2)", SDPBackend.FLASH_ATTENTION),
            ("torch SDPA cuDNN", SDPBackend.CUDNN_ATTENTION))


def attention_flops(dims, causal):
    """kc's FLOP count: 4.D per visible (query, key) pair, the causal mask aligned bottom-right."""
    b, hq, _, sq, sk, d = dims
    if causal:
        pairs = sum(min(max(i + sk - sq + 1, 0), sk) for i in range(sq))
    else:
        pairs = sq * sk
    return 4.0 * d * pairs * b * hq


def make_attention_inputs(dims, dtype, generator):
    """Q, K ~ normal(0, 1.5) and V ~ uniform(-1, 1), kc's fills, in kc's [B, H, S, D] layout."""
    b, hq, hkv, sq, sk, d = dims
    q = (torch.randn(b, hq, sq, d, generator=generator, device="cuda") * 1.5).to(dtype)
    k = (torch.randn(b, hkv, sk, d, generator=generator, device="cuda") * 1.5).to(dtype)
    v = (torch.rand(b, hkv, sk, d, generator=generator, device="cuda") * 2.0 - 1.0).to(dtype)
    return q, k, v


def sdpa_rows(op, dtype_name, shape, label, qkv, causal, gqa, args, scrubber, rate, unit):
    """Runs F.scaled_dot_product_attention pinned to each backend of attention_backends(), checks
    that the backends agree (bf16-level tolerance), then times each. A backend that refuses the
    problem is named on stderr and gets no row. Returns (peer, median ms, rate(ms)) per backend."""
    from torch.nn.attention import sdpa_kernel

    def sdpa(q, k, v):
        if gqa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    outputs = {}
    timed = []
    with torch.no_grad():
        for peer, backend in attention_backends():
            try:
                with sdpa_kernel(backend):
                    outputs[peer] = sdpa(*qkv)
            except RuntimeError as error:
                first_line = str(error).strip().splitlines()[0] if str(error).strip() else "RuntimeError"
                print(f"{op} {dtype_name} {shape} {label}: {peer} does not run "
                      f"it{' (enable_gqa)' if gqa else ''}: {first_line}", file=sys.stderr)
        if len(outputs) == 2:
            (name_a, a), (name_b, b_out) = outputs.items()
            torch.testing.assert_close(b_out.float(), a.float(), rtol=2e-2, atol=2e-2,
                                       msg=lambda m: f"{op} {shape}: {name_b} disagrees with {name_a}: {m}")
        for peer, backend in attention_backends():
            if peer not in outputs:
                continue
            with sdpa_kernel(backend):
                ms = time_ms(sdpa, qkv, args.samples, args.warmup, scrubber)
            timed.append((peer, ms, rate(ms)))
            print(f"{op} {dtype_name:<5} {shape:<24} {label:<9} {peer:<22} {ms:9.4f} ms {rate(ms):8.1f} {unit}",
                  flush=True)
    del outputs
    return timed


def attention_peers(args, scrubber, generator):
    """Times each SDPA backend on each bench shape; returns TSV rows and prints its own."""
    rows = []
    for dtype_name in args.dtypes.split(","):
        if dtype_name not in ATTENTION_DTYPES:
            print(f"attention_fwd: kc defines it for {', '.join(ATTENTION_DTYPES)}, not {dtype_name}; skipped",
                  file=sys.stderr)
            continue
        dtype = DTYPES[dtype_name]
        for dims, causal in ATTENTION_BENCH:
            b, hq, hkv, sq, sk, d = dims
            assert sq == sk, "PyTorch's is_causal is top-left aligned: kc's mask only when Sq == Sk"
            shape = "x".join(str(x) for x in dims)
            params = "causal=1" if causal else ""
            q, k, v = make_attention_inputs(dims, dtype, generator)
            gqa = hkv != hq
            tflops = lambda ms, dims=dims, causal=causal: attention_flops(dims, causal) / (ms * 1e-3) / 1e12
            for peer, ms, rate in sdpa_rows("attention_fwd", dtype_name, shape, params or "causal=0", (q, k, v),
                                            causal, gqa, args, scrubber, tflops, "TFLOPS"):
                rows.append(("attention_fwd", dtype_name, shape, peer, ms, params, rate))
            del q, k, v
            torch.cuda.empty_cache()
    return rows


def decode_bytes(dims, element_bytes):
    """kc's byte count for attention_decode_paged with every sequence at Sk keys: the K/V rows, Q and
    O, the f32 LSE, the int32 lengths and the used block-table slots."""
    b, hq, hkv, sq, sk, d = dims
    slots = -(-sk // DECODE_BLOCK_SIZE)
    return (b * sk * hkv * d * 2 * element_bytes + 2 * b * hq * sq * d * element_bytes + 4 * b * hq * sq
            + 4 * b + 4 * b * slots)


def make_decode_inputs(dims, dtype, generator):
    """kc's fills (Q, K ~ normal(0, 1.5), V ~ uniform(-1, 1)) drawn in the problem's dtype: the
    largest cache, 256 x 32k tokens, is 16 GiB for K alone, and FP32 temporaries of it would
    take 32 GiB each."""
    b, hq, hkv, sq, sk, d = dims
    q = torch.randn(b, hq, sq, d, generator=generator, device="cuda", dtype=dtype).mul_(1.5)
    k = torch.randn(b, hkv, sk, d, generator=generator, device="cuda", dtype=dtype).mul_(1.5)
    v = torch.empty(b, hkv, sk, d, device="cuda", dtype=dtype).uniform_(-1.0, 1.0, generator=generator)
    return q, k, v


def decode_peers(args, scrubber, generator):
    """Times each SDPA backend decoding the contiguous cache of each full-length bench shape."""
    rows = []
    for dtype_name in args.dtypes.split(","):
        if dtype_name not in ATTENTION_DTYPES:
            print(f"attention_decode_paged: kc defines it for {', '.join(ATTENTION_DTYPES)}, not {dtype_name}; "
                  f"skipped", file=sys.stderr)
            continue
        dtype = DTYPES[dtype_name]
        element_bytes = torch.empty((), dtype=dtype).element_size()
        for dims in DECODE_BENCH:
            shape = "x".join(str(x) for x in dims)
            q, k, v = make_decode_inputs(dims, dtype, generator)  # the gathered cache: [B, Hkv, Sk, D]
            gbps = lambda ms, dims=dims: decode_bytes(dims, element_bytes) / (ms * 1e-3) / 1e9
            for peer, ms, rate in sdpa_rows("attention_decode_paged", dtype_name, shape, "", (q, k, v), False,
                                            dims[2] != dims[1], args, scrubber, gbps, "GB/s"):
                rows.append(("attention_decode_paged", dtype_name, shape, peer, ms, "", rate))
            del q, k, v
            torch.cuda.empty_cache()
    return rows


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="TSV file to write")
    parser.add_argument("--ops", default=",".join(DEFAULT_OPS),
                        help="comma-separated subset of " + ",".join(OPS) + " (default: " + ",".join(DEFAULT_OPS) + ")")
    parser.add_argument("--dtypes", default="bf16", help="comma-separated: bf16, f16, f32")
    parser.add_argument("--rows", type=int, default=32768)
    parser.add_argument("--hidden", default="4096,8192", help="comma-separated row lengths")
    parser.add_argument("--samples", type=int, default=50, help="timed calls per peer (at least 30)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--compile-mode", default="default",
                        help="torch.compile mode: default, max-autotune, ...")
    args = parser.parse_args(argv)
    if args.samples < 30:
        parser.error("--samples must be at least 30")
    for op in args.ops.split(","):
        if op not in OPS:
            parser.error(f"unknown op '{op}'; known: {', '.join(OPS)}")
    for dtype in args.dtypes.split(","):
        if dtype not in DTYPES:
            parser.error(f"unknown dtype '{dtype}'; known: {', '.join(DTYPES)}")
    return args


def main(argv):
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("torch_peers.py: no CUDA GPU is visible to PyTorch; nothing to time", file=sys.stderr)
        return 2
    print(f"# {torch.cuda.get_device_name()}, PyTorch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"compile mode {args.compile_mode}, median of {args.samples} samples")
    scrubber = L2Scrubber()
    print(f"# L2 scrubbed before every sample by reading {scrubber.bytes >> 20} MiB")
    generator = torch.Generator(device="cuda")
    generator.manual_seed(2026)
    rows_out = []
    ops = args.ops.split(",")
    for dtype_name in args.dtypes.split(","):
        dtype = DTYPES[dtype_name]
        element_bytes = torch.empty((), dtype=dtype).element_size()
        for op in (op for op in ops if op in ROW_OPS):
            eager = FUNCTIONS[op]
            compiled = torch.compile(eager, mode=args.compile_mode, dynamic=False)
            for cols in (int(h) for h in args.hidden.split(",")):
                inputs = make_inputs(op, args.rows, cols, dtype, generator)
                with torch.no_grad():
                    check_same(op, eager(*inputs), compiled(*inputs))  # also compiles
                    for peer, fn in (("torch eager", eager), ("torch.compile", compiled)):
                        ms = time_ms(fn, inputs, args.samples, args.warmup, scrubber)
                        gbps = minimum_bytes(op, args.rows, cols, element_bytes) / (ms * 1e-3) / 1e9
                        rows_out.append((op, dtype_name, f"{args.rows}x{cols}", peer, ms, "", gbps))
                        print(f"{op:<17} {dtype_name:<5} {args.rows}x{cols:<6} {peer:<14} {ms:9.4f} ms "
                              f"{gbps:8.0f} GB/s", flush=True)
                del inputs
                torch.cuda.empty_cache()
    attention_rows = attention_peers(args, scrubber, generator) if "attention_fwd" in ops else []
    decode_rows = decode_peers(args, scrubber, generator) if "attention_decode_paged" in ops else []
    with open(args.out, "w", encoding="utf-8") as out:
        out.write("op\tdtype\tshape\tpeer\tmedian_ms\tparams\n")
        for op, dtype_name, shape, peer, ms, params, _ in rows_out + attention_rows + decode_rows:
            out.write(f"{op}\t{dtype_name}\t{shape}\t{peer}\t{ms:.4f}\t{params}\n")
    if rows_out:
        print(f"\n{'op':<17} {'dtype':<5} {'shape':<12} {'peer':<14} {'median ms':>10} {'GB/s':>8}")
        for op, dtype_name, shape, peer, ms, _, gbps in rows_out:
            print(f"{op:<17} {dtype_name:<5} {shape:<12} {peer:<14} {ms:10.4f} {gbps:8.0f}")
    if attention_rows:
        print(f"\n{'op':<17} {'dtype':<5} {'shape':<24} {'params':<9} {'peer':<22} {'median ms':>10} {'TFLOPS':>8}")
        for op, dtype_name, shape, peer, ms, params, tflops in attention_rows:
            print(f"{op:<17} {dtype_name:<5} {shape:<24} {params or 'causal=0':<9} {peer:<22} {ms:10.4f} "
                  f"{tflops:8.1f}")
    if decode_rows:
        print(f"\n{'op':<22} {'dtype':<5} {'shape':<24} {'peer':<22} {'median ms':>10} {'GB/s':>8}")
        for op, dtype_name, shape, peer, ms, _, gbps in decode_rows:
            print(f"{op:<22} {dtype_name:<5} {shape:<24} {peer:<22} {ms:10.4f} {gbps:8.0f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
