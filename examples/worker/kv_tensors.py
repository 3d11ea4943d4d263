"""Tensors for kverify workers without numpy: the pure-Python Array, exact round-to-nearest-even
into fp32/fp16/bf16, and the .safetensors format (read and write), standard library only."""

import json
import math
import struct

# kverify's dtype names -> (safetensors name, bytes per element, struct code of the stored word).
DTYPES = {
    "fp32": ("F32", 4, "f"),
    "fp16": ("F16", 2, "e"),
    "bf16": ("BF16", 2, "H"),  # stored as the top 16 bits of an fp32
    "i32": ("I32", 4, "i"),
}
_FROM_ST = {st: kv for kv, (st, _, _) in DTYPES.items()}


def kv_dtype(name):
    """kverify's name for a dtype given either its kverify name (bf16) or its safetensors name (BF16)."""
    if name in DTYPES:
        return name
    if name in _FROM_ST:
        return _FROM_ST[name]
    raise ValueError(f"unsupported dtype {name!r} (fp32, fp16, bf16, i32)")


class Array:
    """A tensor as a flat row-major list of Python numbers, its shape and its kverify dtype.

    Float elements are the exact values of the stored ones (every fp32/fp16/bf16 value is a
    double); i32 elements are ints. Writing an Array rounds each element to the dtype it is
    written as (round to nearest even)."""

    __slots__ = ("data", "shape", "dtype")

    def __init__(self, data, shape, dtype):
        self.data = list(data)
        self.shape = [int(d) for d in shape]
        self.dtype = kv_dtype(dtype)
        if len(self.data) != numel(self.shape):
            raise ValueError(f"{len(self.data)} elements for shape {self.shape}")

    @property
    def numel(self):
        return len(self.data)

    def __repr__(self):
        return f"Array({self.dtype}, shape={self.shape})"


def numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


# ---- rounding -------------------------------------------------------------------------------

_F32 = struct.Struct("<f")
_F16 = struct.Struct("<e")


def f32(x):
    """x rounded to fp32 (RNE). struct's C cast rounds to nearest even, subnormals included; it
    refuses finite values that round past FLT_MAX, which RNE sends to infinity."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def f16(x):
    """x rounded to fp16 (RNE; CPython's half packing rounds half to even, overflow -> inf)."""
    try:
        return _F16.unpack(_F16.pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


_BF16_MAX = (2.0 - 2.0**-7) * 2.0**127


def bf16(x):
    """x rounded to bf16 (RNE), directly from the double: rounding to fp32 first and then to bf16
    would round twice and can miss (1 + 2^-8 + 2^-30 must give 1 + 2^-7, not 1)."""
    if x != x or x == 0 or math.isinf(x):
        return x
    _, e = math.frexp(x)  # |x| in [2^(e-1), 2^e)
    q = max(e - 8, -133)  # exponent of bf16's last place there (8 bits; subnormal spacing 2^-133)
    n = round(math.ldexp(x, -q))  # exact scaling by a power of two; round() is half-to-even
    r = math.ldexp(n, q)
    if abs(r) > _BF16_MAX:
        return math.copysign(math.inf, x)
    return r if n != 0 else math.copysign(0.0, x)


def round_to(dtype, x):
    """x rounded to kverify dtype `dtype` (fp32, fp16, bf16: RNE; i32: must be an integer)."""
    if dtype == "fp32":
        return f32(x)
    if dtype == "bf16":
        return bf16(x)
    if dtype == "fp16":
        return f16(x)
    if dtype == "i32":
        return _as_i32(x)
    raise ValueError(f"unsupported dtype {dtype!r}")


def _as_i32(x):
    if isinstance(x, float):
        if not x.is_integer():
            raise ValueError(f"i32 element {x!r} is not an integer")
        x = int(x)
    if not -(2**31) <= x < 2**31:
        raise ValueError(f"i32 element {x} out of range")
    return x


# ---- element encoding -----------------------------------------------------------------------


def encode(values, dtype):
    """Little-endian bytes of `values` rounded to `dtype`."""
    n = len(values)
    if dtype == "fp32":
        try:
            return struct.pack(f"<{n}f", *values)
        except OverflowError:  # some element rounds to infinity: per element, RNE
            return struct.pack(f"<{n}f", *(f32(v) for v in values))
    if dtype == "fp16":
        try:
            return struct.pack(f"<{n}e", *values)
        except OverflowError:
            return struct.pack(f"<{n}e", *(f16(v) for v in values))
    if dtype == "bf16":
        # Each rounded value is an fp32 whose low 16 bits are zero; keep the high half.
        words = struct.unpack(f"<{n}I", struct.pack(f"<{n}f", *(bf16(v) for v in values)))
        return struct.pack(f"<{n}H", *(w >> 16 for w in words))
    if dtype == "i32":
        return struct.pack(f"<{n}i", *(_as_i32(v) for v in values))
    raise ValueError(f"unsupported dtype {dtype!r}")


def decode(raw, dtype):
    """The exact values stored in `raw` as a list (floats, ints for i32)."""
    size = DTYPES[dtype][1]
    if len(raw) % size:
        raise ValueError(f"{len(raw)} bytes is not a whole number of {dtype} elements")
    n = len(raw) // size
    if dtype == "bf16":
        halves = struct.unpack(f"<{n}H", raw)
        return list(struct.unpack(f"<{n}f", struct.pack(f"<{n}I", *(h << 16 for h in halves))))
    return list(struct.unpack(f"<{n}{DTYPES[dtype][2]}", raw))


# ---- the .safetensors file ------------------------------------------------------------------


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: Array} (in the dict's order) with optional {str: str} metadata: an 8-byte
    little-endian header length, the JSON header padded with spaces to 8 bytes, the data."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, a in tensors.items():
        b = encode(a.data, a.dtype)
        header[name] = {"dtype": DTYPES[a.dtype][0], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Reads every tensor as {name: Array} and the metadata ({} if none); raises ValueError naming
    the defect of a malformed file."""
    with open(path, "rb") as f:
        blob = f.read()

    def bad(why):
        raise ValueError(f"malformed safetensors file {path}: {why}")

    if len(blob) < 8:
        bad("shorter than its 8-byte header length")
    (hl,) = struct.unpack("<Q", blob[:8])
    if hl > len(blob) - 8:
        bad(f"header length {hl} exceeds the file")
    try:
        header = json.loads(blob[8 : 8 + hl].decode("utf-8"))
    except ValueError as e:
        bad(f"header is not JSON ({e})")
    if not isinstance(header, dict):
        bad("header is not a JSON object")
    data = memoryview(blob)[8 + hl :]
    meta = header.pop("__metadata__", None) or {}
    out = {}
    for name, e in header.items():
        try:
            dtype = kv_dtype(e["dtype"])
            shape = [int(d) for d in e["shape"]]
            begin, end = (int(v) for v in e["data_offsets"])
        except (KeyError, TypeError, ValueError) as ex:
            bad(f"{name}: {ex}")
        if any(d < 0 for d in shape):
            bad(f"{name}: negative dimension")
        if not 0 <= begin <= end <= len(data):
            bad(f"{name}: data_offsets outside the data")
        if end - begin != numel(shape) * DTYPES[dtype][1]:
            bad(f"{name}: {end - begin} bytes for {numel(shape)} {dtype} elements")
        out[name] = Array(decode(bytes(data[begin:end]), dtype), shape, dtype)
    return out, meta
