#!/usr/bin/env python3
"""kverify's reference worker, protocol v1 (PROTOCOL.md): serves Python impls to kverify as JSON
lines on stdin/stdout, tensors through .safetensors files. Impls are declared with @impl below."""

import argparse
import importlib
import json
import os
import platform
import signal
import sys
import time
import traceback

from kv_tensors import Array, f32, read_safetensors, round_to, write_safetensors  # noqa: F401 (re-exported)

PROTOCOL = 1
DEVICES = ("cuda", "host")


class Unsupported(Exception):
    """Raised by a contract function (or an impl) that cannot serve a case; kverify rejects the
    case with this reason, as it rejects an invalid config."""


class ImplSpec:
    """What @impl records about an impl function."""

    def __init__(self, fn, op, device, contract, knobs, version, warmup):
        self.fn, self.op, self.device, self.contract = fn, op, device, contract
        self.knobs, self.version, self.warmup = knobs, version, warmup
        self.accepts = None


def impl(op, device, contract=None, knobs=None, version="", warmup=False, accepts=None):
    """Declares fn(t, case) -> {output name: tensor} as an impl of `op` on `device`.

    contract: a dict (the same for every case: sent in the hello), or a function of the case
    returning one (kverify asks per case) that may raise Unsupported. knobs: {name: [values]},
    the first the default. warmup: call once untimed on each new case signature first, so that
    impl_ms times the kernels and not torch.compile's compilation or CUDA's lazy loading.
    accepts: what the impl takes, {"dtypes": [...], "attrs": {name: [values]}, "layouts":
    ["contiguous", "strided", "in_place"]} (each optional): kverify declines other cases without
    asking, and fuzz redraws them instead of counting them."""
    if device not in DEVICES:
        raise ValueError(f"device must be cuda or host, not {device!r}")
    knobs = dict(knobs or {})
    for k, v in knobs.items():
        if not isinstance(v, (list, tuple)) or not v or not all(isinstance(s, str) for s in v):
            raise ValueError(f"knob {k}: a non-empty list of strings")

    def deco(fn):
        fn.kv_impl = ImplSpec(fn, op, device, contract, knobs, str(version), warmup)
        if accepts is not None:
            fn.kv_impl.accepts = dict(accepts)
        return fn

    return deco


def _die(why):
    """A configuration error: one line on stderr (kverify shows the log's last line), exit 2."""
    print(f"kv_worker.py: {why}", file=sys.stderr)
    sys.exit(2)


def load_impl(arg):
    """'NAME=module:function' -> (NAME, ImplSpec)."""
    name, eq, target = arg.partition("=")
    mod, colon, fn = target.partition(":")
    if not (eq and colon and name and mod and fn):
        _die(f"--impl wants NAME=module:function, not {arg!r}")
    f = getattr(importlib.import_module(mod), fn, None)
    spec = getattr(f, "kv_impl", None)
    if spec is None:
        _die(f"{mod}:{fn} is not an @impl function")
    if spec.contract is None:
        _die(f"impl {name} ({mod}:{fn}) declares no contract; kverify needs one (PROTOCOL.md, Contracts)")
    return name, spec


# ---- tensor I/O per device ------------------------------------------------------------------


class PureIO:
    """Host impls: pure-Python Arrays; outputs are rounded (RNE) to the listed dtype on writing."""

    def read(self, path):
        return read_safetensors(path)[0]

    def sync(self):
        pass

    def write(self, path, outs, specs):
        tensors = {}
        for s in specs:
            a = outs[s["name"]]
            if not isinstance(a, Array):
                raise TypeError(f"output {s['name']} is {type(a).__name__}, not an Array")
            if a.numel != _numel(s["shape"]):
                raise ValueError(f"output {s['name']} has {a.numel} elements, {s['shape']} wants {_numel(s['shape'])}")
            tensors[s["name"]] = Array(a.data, s["shape"], s["dtype"])
        write_safetensors(path, tensors)


class TorchIO:
    """CUDA impls: torch tensors on the GPU, through the safetensors package."""

    def __init__(self):
        import torch
        from safetensors.torch import load_file, save_file

        self.torch, self.load_file, self.save_file = torch, load_file, save_file
        self.dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32}
        self.cast_noted = set()

    def read(self, path):
        return self.load_file(path, device="cuda")

    def sync(self):
        self.torch.cuda.synchronize()

    def write(self, path, outs, specs):
        tensors = {}
        for s in specs:
            name, t = s["name"], outs[s["name"]]
            if not isinstance(t, self.torch.Tensor):
                raise TypeError(f"output {name} is {type(t).__name__}, not a torch.Tensor")
            if t.numel() != _numel(s["shape"]):
                raise ValueError(f"output {name} has {t.numel()} elements, {s['shape']} wants {_numel(s['shape'])}")
            want = self.dtypes[s["dtype"]]
            if t.dtype != want and name not in self.cast_noted:
                # A cast here is a rounding the impl did not do itself: say so once per output.
                self.cast_noted.add(name)
                print(f"kv_worker: output {name} is {t.dtype}, cast to {want} (RNE) on writing", file=sys.stderr)
            tensors[name] = t.detach().reshape(s["shape"]).to(want).contiguous().cpu()
        self.save_file(tensors, path)


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


# ---- the protocol ---------------------------------------------------------------------------


class Worker:
    def __init__(self, impls, out, opts):
        self.impls, self.out, self.opts = impls, out, opts
        self.runs = 0  # run requests seen by this process, for the test-only switches
        self.io = {}
        self.warm = set()

    def send(self, obj):
        self.out.write((json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8"))

    def serve(self, inp):
        while True:
            line = inp.readline()
            if not line:
                return 0  # kverify closed stdin: the run is over
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
                if not isinstance(msg, dict):
                    raise ValueError("not a JSON object")
            except ValueError as e:
                self.send({"type": "error", "error": f"request is not a JSON object: {e}"})
                continue
            kind = msg.get("type")
            if kind == "hello":
                self.send(self.hello(msg))
            elif kind == "contract":
                self.send(self.contract(msg))
            elif kind == "run":
                answer = self.run(msg)
                if answer is not None:
                    self.send(answer)
                if answer and _sticky_cuda_error(answer.get("error", "")):
                    # The CUDA context is lost for every later case: exit, kverify starts a new worker.
                    print("kv_worker: CUDA error, exiting so that kverify restarts the worker", file=sys.stderr)
                    return 1
            else:
                self.send({"type": "error", "error": f"unknown request type {kind!r}"})

    def hello(self, msg):
        theirs = msg.get("protocol")
        if self.opts.speak_protocol is not None:
            mine = self.opts.speak_protocol  # test-only: pretend to speak another version
        elif theirs != PROTOCOL:
            why = f"kv_worker.py speaks protocol {PROTOCOL}, kverify sent protocol {theirs}"
            return {"type": "error", "error": why}
        else:
            mine = PROTOCOL
        impls = [
            {
                "op": s.op,
                "impl": name,
                "device": s.device,
                "version": s.version,
                "knobs": s.knobs,
                "contract": s.contract if isinstance(s.contract, dict) else None,
                **({"accepts": s.accepts} if s.accepts is not None else {}),
            }
            for (_, name), s in self.impls.items()
        ]
        return {"type": "hello", "protocol": mine, "worker": _worker_name(), "impls": impls}

    def spec_of(self, msg):
        op, name = msg.get("op"), msg.get("impl")
        s = self.impls.get((op, name))
        if s is None:
            have = ", ".join(f"{n} ({o})" for o, n in self.impls) or "none"
            raise ValueError(f"this worker has no impl {name!r} of {op} (it has {have})")
        return s

    def contract(self, msg):
        answer = {"type": "contract", "id": msg.get("id")}
        try:
            s = self.spec_of(msg)
            c = s.contract(msg) if callable(s.contract) else s.contract
            if not isinstance(c, dict):
                raise TypeError(f"the contract function returned {type(c).__name__}, not a dict")
            answer["contract"] = c
        except Unsupported as e:
            answer["unsupported"] = str(e) or "unsupported"
        except Exception as e:  # a bug in the contract function: neither answer fits, say why
            traceback.print_exc(file=sys.stderr)
            answer["error"] = f"{type(e).__name__}: {e}"
        return answer

    def run(self, msg):
        self.runs += 1
        if self.opts.crash_on_run == self.runs:
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGSEGV)
            os._exit(3)  # only if SIGSEGV was caught
        if self.opts.hang_on_run == self.runs:
            while True:
                time.sleep(3600)
        if self.opts.garbage_on_run == self.runs:
            self.out.write(b"this is not JSON (kv_worker.py --garbage-on-run)\n")
            return None
        answer = {"type": "result", "id": msg.get("id")}
        try:
            answer["impl_ms"] = self.compute(self.spec_of(msg), msg)
            answer["ok"] = True
        except Exception as e:  # the impl's failure is the case's error; the worker goes on
            traceback.print_exc(file=sys.stderr)
            answer.update(ok=False, error=f"{type(e).__name__}: {e}")
        return answer

    def compute(self, s, msg):
        if s.device not in self.io:
            self.io[s.device] = TorchIO() if s.device == "cuda" else PureIO()
        io = self.io[s.device]
        specs = msg.get("tensors", [])
        t = io.read(msg["inputs"])
        missing = [x["name"] for x in specs if x["role"] == "input" and x["name"] not in t]
        if missing:
            raise ValueError(f"inputs file lacks {', '.join(missing)}")
        if s.warmup:
            key = json.dumps([msg.get(k) for k in ("op", "impl", "shape", "dtypes", "attrs", "config")], sort_keys=True)
            if key not in self.warm:
                s.fn(dict(t), msg)
                self.warm.add(key)
        io.sync()
        start = time.perf_counter()
        outs = s.fn(dict(t), msg)
        io.sync()
        ms = (time.perf_counter() - start) * 1e3
        wanted = [x for x in specs if x["role"] == "output"]
        missing = [x["name"] for x in wanted if x["name"] not in (outs or {})]
        if missing:
            raise ValueError(f"impl returned no {', '.join(missing)}")
        io.write(msg["outputs"], outs, wanted)
        return round(ms, 4)


def _sticky_cuda_error(error):
    """A CUDA error that poisons the context (illegal address, launch failure); running out of
    memory is torch.OutOfMemoryError and does not."""
    return "CUDA error" in error and not error.startswith("OutOfMemoryError")


def _worker_name():
    parts = [f"python {platform.python_version()}"]
    torch = sys.modules.get("torch")
    if torch is not None:
        parts.append(f"torch {torch.__version__}")
    return f"kv_worker.py ({', '.join(parts)})"


def _parse(argv):
    p = argparse.ArgumentParser(
        prog="kv_worker.py",
        description="kverify worker (protocol v1, examples/worker/PROTOCOL.md): serves @impl functions to "
        "`kverify run --worker CMD`. Requests on stdin, answers on stdout, logs on stderr.",
    )
    p.add_argument("--impl", action="append", default=[], metavar="NAME=module:function",
                   help="serve module:function (an @impl function) as impl NAME (repeatable)")
    p.add_argument("--path", action="append", default=[], metavar="DIR",
                   help="also import impl modules from DIR (repeatable; the script's own directory is searched too)")
    t = p.add_argument_group("test-only switches", "for kverify's own tests of worker failures; K counts the "
                             "run requests of this worker process from 1")
    t.add_argument("--speak-protocol", type=int, metavar="N", help="answer the hello with protocol N")
    t.add_argument("--crash-on-run", type=int, metavar="K", help="die of SIGSEGV on the K-th run request")
    t.add_argument("--hang-on-run", type=int, metavar="K", help="sleep forever on the K-th run request")
    t.add_argument("--garbage-on-run", type=int, metavar="K", help="answer the K-th run request with a non-JSON line")
    a = p.parse_args(argv)
    if not a.impl:
        p.error("at least one --impl NAME=module:function")
    return a


def main(argv=None):
    opts = _parse(argv)
    # The protocol owns the real stdout; everything else that writes to fd 1 (print, C
    # libraries, compilers) lands in stderr, which kverify keeps as worker.log.
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # Run as a script this module is __main__; impl modules import it as kv_worker and must
    # get this same module (one Unsupported class, one registry).
    sys.modules.setdefault("kv_worker", sys.modules[__name__])
    here = os.path.dirname(os.path.abspath(__file__))
    for d in [here] + opts.path:
        if d not in sys.path:
            sys.path.insert(0, d)
    impls = {}  # (op, NAME) -> ImplSpec: one name may serve several ops, as in kverify's registry
    for arg in opts.impl:
        name, spec = load_impl(arg)
        if (spec.op, name) in impls:
            _die(f"impl name {name} given twice for {spec.op}")
        impls[(spec.op, name)] = spec
    try:
        return Worker(impls, out, opts).serve(sys.stdin.buffer)
    except BrokenPipeError:
        return 0  # kverify went away


if __name__ == "__main__":
    sys.exit(main())
