"""Host tensors as numpy arrays: the case's inputs viewed where kverify keeps them (bf16 as
exact float32 copies: numpy has no bfloat16), and the impl's outputs written into kverify's
output tensors, rounded to nearest-even to their dtype."""

import ctypes

import numpy as np

_NUMPY = {"fp32": np.float32, "fp16": np.float16, "i32": np.int32, "bf16": np.uint16}
_SIZE = {"fp32": 4, "fp16": 2, "i32": 4, "bf16": 2}


def _view(t):
    """The kvc_tensor t as a numpy array over kverify's memory (bf16 as raw uint16 bits)."""
    dt = t.dtype.decode()
    shape = [t.shape[i] for i in range(t.ndim)]
    strides = [t.strides[i] for i in range(t.ndim)]
    size = _SIZE[dt]
    if any(s == 0 for s in shape):
        return np.zeros(shape, dtype=_NUMPY[dt])
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    buf = (ctypes.c_char * (extent * size)).from_address(t.data)
    flat = np.frombuffer(buf, dtype=_NUMPY[dt], count=extent)
    return np.lib.stride_tricks.as_strided(flat, shape=shape, strides=[s * size for s in strides])


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """Round-to-nearest-even of float32 values to bf16 bits (NaN kept quiet)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = np.isnan(x)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((b >> 16) | 0x0040).astype(np.uint16), rounded)


def inputs(tensors, n):
    """{name: array} of the inputs, copies (kverify's buffers go when the case ends): fp32,
    fp16, i32 as they are, bf16 as float32."""
    out = {}
    for i in range(n):
        t = tensors[i]
        if t.role != 0:
            continue
        a = _view(t)
        out[t.name.decode()] = bf16_to_f32(a) if t.dtype == b"bf16" else np.array(a)
    return out


def outputs(tensors, n, result, kind):
    """(kvc_tensor, name, dtype, value) per output of the case, the impl's result checked: a
    dict holding every output and nothing else."""
    if not isinstance(result, dict):
        raise TypeError(f"the impl returned {type(result).__name__}, not a dict of output {kind}")
    names = {tensors[i].name.decode() for i in range(n) if tensors[i].role == 1}
    if set(result) - names:
        raise KeyError(f"the impl returned {sorted(set(result) - names)}, which the case has no output of (its outputs: "
                       f"{sorted(names)})")
    for i in range(n):
        t = tensors[i]
        if t.role != 1:
            continue
        name = t.name.decode()
        if name not in result:
            raise KeyError(f"the impl returned no output '{name}' (it returned {sorted(result)})")
        yield t, name, t.dtype.decode(), result[name]


def write_outputs(tensors, n, result, notes):
    """The impl's returned {name: array-like} into kverify's output tensors."""
    for t, name, dt, value in outputs(tensors, n, result, "arrays"):
        if isinstance(value, np.ma.MaskedArray):
            raise TypeError(f"output {name} is a masked array: every element must hold a value")
        v = np.asarray(value)
        if v.dtype.kind not in "fiu":
            raise TypeError(f"output {name} has dtype {v.dtype}: not a real number type")
        dst = _view(t)
        if v.size != dst.size:
            raise ValueError(f"output {name}: {v.size} elements, the case wants {dst.size} (shape {list(dst.shape)})")
        v = v.reshape(dst.shape)
        if dt == "bf16":
            if v.dtype != np.float32:
                notes.add(f"{name}: {v.dtype} rounded to float32, then to bf16")
            dst[...] = f32_to_bf16(v.astype(np.float32))
        else:
            if v.dtype != _NUMPY[dt]:
                notes.add(f"{name}: {v.dtype} rounded to {dt}")
            dst[...] = v.astype(_NUMPY[dt])
