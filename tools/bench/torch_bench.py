#!/usr/bin/env python3
"""PyTorch eager and torch.compile timings of the ops kverify ships CUDA kernels for, at the
shapes of issue 6's speed targets, in the same run as kverify-kernelbench (tools/bench/gpu_bench.sh).

Prints markdown rows: | op | dtype | shape | impl | us |  (median of REPS CUDA-event-timed
calls after warm-ups). Needs a GPU and PyTorch; run on the GPU machine.
"""
import statistics
import sys

import torch
import torch.nn.functional as F

REPS = 20
dev = "cuda"
bf16 = torch.bfloat16


def timed(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(REPS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1000.0)
    return statistics.median(ts)


def rms_fwd(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def rms_fwd_bwd(x, w, dy):
    y = rms_fwd(x, w)
    y.backward(dy)
    return y


def rope_1d(q, k, cos, sin):
    def rot(t):
        t1, t2 = t.chunk(2, dim=-1)
        return torch.cat((-t2, t1), dim=-1)
    return q * cos + rot(q) * sin, k * cos + rot(k) * sin


def ce_fwd_bwd(logits, target):
    loss = F.cross_entropy(logits.float(), target)
    loss.backward()
    return loss


def flce_fwd_bwd(x, w, target):
    loss = F.cross_entropy((x @ w.t()).float(), target)
    loss.backward()
    return loss


def cases():
    for shape in ((32760, 1536), (16384, 4096)):
        x = torch.randn(*shape, device=dev, dtype=bf16)
        w = torch.randn(shape[1], device=dev, dtype=bf16)
        yield "rms_norm.fwd", shape, rms_fwd, (x, w), False
    x = torch.randn(32760, 1536, device=dev, dtype=bf16, requires_grad=True)
    w = torch.randn(1536, device=dev, dtype=bf16, requires_grad=True)
    dy = torch.randn(32760, 1536, device=dev, dtype=bf16)
    yield "rms_norm.fwd+bwd", (32760, 1536), rms_fwd_bwd, (x, w, dy), True
    xs = torch.randn(32760, 1536, device=dev, dtype=bf16)
    yield "softmax.fwd", (32760, 1536), lambda t: torch.softmax(t, -1), (xs,), False
    lw, lb = torch.randn(1536, device=dev, dtype=bf16), torch.randn(1536, device=dev, dtype=bf16)
    yield "layer_norm.fwd", (32760, 1536), lambda t: F.layer_norm(t, (1536,), lw, lb, 1e-5), (xs,), False
    a, b = torch.randn(32760, 1536, device=dev, dtype=bf16), torch.randn(32760, 1536, device=dev, dtype=bf16)
    yield "swiglu.fwd", (32760, 1536), lambda p, r: F.silu(p) * r, (a, b), False
    q = torch.randn(1, 32760, 12, 128, device=dev, dtype=bf16)
    k = torch.randn(1, 32760, 12, 128, device=dev, dtype=bf16)
    cos = torch.randn(1, 32760, 1, 128, device=dev, dtype=bf16)
    sin = torch.randn(1, 32760, 1, 128, device=dev, dtype=bf16)
    yield "rope.fwd (1d)", (1, 32760, 12, 128), rope_1d, (q, k, cos, sin), False
    logits = torch.randn(4096, 128256, device=dev, dtype=bf16, requires_grad=True)
    tgt = torch.randint(0, 128256, (4096,), device=dev)
    yield "cross_entropy.fwd+bwd", (4096, 128256), ce_fwd_bwd, (logits, tgt), True
    fx = torch.randn(4096, 2048, device=dev, dtype=bf16, requires_grad=True)
    fw = (torch.randn(128256, 2048, device=dev, dtype=bf16) * 0.02).requires_grad_(True)
    yield "fused_linear_cross_entropy.fwd+bwd", (4096, 2048, 128256), flce_fwd_bwd, (fx, fw, tgt), True


def main():
    print("| op | dtype | shape | impl | us | peak MiB |")
    print("|---|---|---|---|---|---|")
    for name, shape, fn, args, grads in cases():
        shp = "x".join(map(str, shape))
        for impl, f in (("torch eager", fn), ("torch.compile", torch.compile(fn))):
            def call():
                if grads:
                    for t in args:
                        if isinstance(t, torch.Tensor) and t.grad is not None:
                            t.grad = None
                return f(*args)
            try:
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                us = timed(call)
                peak = (torch.cuda.max_memory_allocated() - base) / 2**20
                print(f"| {name} | bf16 | {shp} | {impl} | {us:.1f} | {peak:.0f} |", flush=True)
            except Exception as e:  # a compile failure is a row, not the end of the table
                print(f"| {name} | bf16 | {shp} | {impl} | error: {type(e).__name__} | |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
