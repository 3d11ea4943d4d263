"""GPU impls: the case's inputs as torch tensors on the current CUDA device (copied from
kverify's host tensors, bits unchanged), the impl's outputs copied back into kverify's output
tensors (a tensor of another dtype is cast by torch, round to nearest-even, and noted)."""

import numpy as np

from . import _arrays

_TORCH = {}


def _dtypes(torch):
    if not _TORCH:
        _TORCH.update({"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32})
    return _TORCH


def inputs(tensors, n):
    import torch

    dt = _dtypes(torch)
    out = {}
    for i in range(n):
        t = tensors[i]
        if t.role != 0:
            continue
        a = np.ascontiguousarray(_arrays._view(t))
        if t.dtype == b"bf16":
            x = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        else:
            x = torch.from_numpy(a)
        out[t.name.decode()] = x.to("cuda")
        assert out[t.name.decode()].dtype == dt[t.dtype.decode()]
    return out


def write_outputs(tensors, n, result, notes):
    import torch

    dt = _dtypes(torch)
    torch.cuda.synchronize()
    for t, name, want, v in _arrays.outputs(tensors, n, result, "tensors"):
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"output {name} is {type(v).__name__}, not a torch tensor")
        dst = _arrays._view(t)
        if v.numel() != dst.size:
            raise ValueError(f"output {name}: {v.numel()} elements, the case wants {dst.size} (shape {list(dst.shape)})")
        if v.dtype != dt[want]:
            notes.add(f"{name}: {v.dtype} cast to {want} by torch")
            v = v.to(dt[want])
        h = v.detach().reshape(dst.shape).contiguous().cpu()
        dst[...] = (h.view(torch.int16).numpy().view(np.uint16) if want == "bf16" else h.numpy())
