#!/usr/bin/env python3
"""PyTorch peers of kc's stage-2 memory-bound ops, timed on this machine's GPU.

For each op, dtype and shape it times PyTorch eager and torch.compile of the same computation
kc's kernels do:

  rmsnorm           F.rms_norm(x, (cols,), weight, eps=1e-6)
  layernorm         F.layer_norm(x, (cols,), weight, bias, eps=1e-5)
  softmax           torch.softmax(x, dim=-1)
  residual_rmsnorm  s = x + residual; returns (s, F.rms_norm(s, (cols,), weight, eps=1e-6))

Timing: CUDA events around one call, warm-up first (torch.compile compiles during the warm-up),
the median of at least 30 samples. Before every sample the L2 is scrubbed as kc's L2Scrubber
does it: by reading a buffer larger than twice the L2 (a sum into a preallocated one-element
tensor that is kept), so the inputs come from DRAM and no dirty lines are left for the timed call
to write back. Inputs are random and non-zero (normal activations, weights in [0.5, 1.5], biases
in [-0.5, 0.5], softmax inputs with standard deviation 30, as in kc).

The results go to --out as a TSV of five tab-separated columns: kc's op name (without the dtype),
the dtype (bf16, f16 or f32), the shape as kc's Problem::shape() writes it, the peer and the
median time, so `kc-bench --peers FILE` can put them in the same table and compute GB/s with kc's
own byte count:

  op<TAB>dtype<TAB>shape<TAB>peer<TAB>median_ms
  rmsnorm<TAB>bf16<TAB>32768x4096<TAB>torch.compile<TAB>0.1234

The script also prints its own table (GB/s there uses the same byte formulas as kc: each input
read once, each output written once).

Usage:  python3 bench/peers/torch_peers.py --out peers-h200.tsv
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
OPS = ("rmsnorm", "layernorm", "softmax", "residual_rmsnorm")


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


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="TSV file to write")
    parser.add_argument("--ops", default=",".join(OPS), help="comma-separated subset of " + ",".join(OPS))
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
    for dtype_name in args.dtypes.split(","):
        dtype = DTYPES[dtype_name]
        element_bytes = torch.empty((), dtype=dtype).element_size()
        for op in args.ops.split(","):
            eager = FUNCTIONS[op]
            compiled = torch.compile(eager, mode=args.compile_mode, dynamic=False)
            for cols in (int(h) for h in args.hidden.split(",")):
                inputs = make_inputs(op, args.rows, cols, dtype, generator)
                with torch.no_grad():
                    check_same(op, eager(*inputs), compiled(*inputs))  # also compiles
                    for peer, fn in (("torch eager", eager), ("torch.compile", compiled)):
                        ms = time_ms(fn, inputs, args.samples, args.warmup, scrubber)
                        gbps = minimum_bytes(op, args.rows, cols, element_bytes) / (ms * 1e-3) / 1e9
                        rows_out.append((op, dtype_name, f"{args.rows}x{cols}", peer, ms, gbps))
                        print(f"{op:<17} {dtype_name:<5} {args.rows}x{cols:<6} {peer:<14} {ms:9.4f} ms "
                              f"{gbps:8.0f} GB/s", flush=True)
                del inputs
                torch.cuda.empty_cache()
    with open(args.out, "w", encoding="utf-8") as out:
        out.write("op\tdtype\tshape\tpeer\tmedian_ms\n")
        for op, dtype_name, shape, peer, ms, _ in rows_out:
            out.write(f"{op}\t{dtype_name}\t{shape}\t{peer}\t{ms:.4f}\n")
    print(f"\n{'op':<17} {'dtype':<5} {'shape':<12} {'peer':<14} {'median ms':>10} {'GB/s':>8}")
    for op, dtype_name, shape, peer, ms, gbps in rows_out:
        print(f"{op:<17} {dtype_name:<5} {shape:<12} {peer:<14} {ms:10.4f} {gbps:8.0f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
