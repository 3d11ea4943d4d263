"""The C ABI of libkverify_c.so (include/kverify/kverify_c.h) through ctypes."""

import ctypes
import json
import os
import pathlib

ABI_VERSION = 1


class Tensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("role", ctypes.c_int),
        ("dtype", ctypes.c_char_p),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("data", ctypes.c_void_p),
    ]


RUN_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(Tensor), ctypes.c_int,
                          ctypes.c_void_p, ctypes.c_size_t)
CONTRACT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t)


def _find_library():
    """KVERIFY_LIB, else the copy installed beside this module, else a build tree of the
    repository this package lies in (build/<preset>/libkverify_c.so)."""
    env = os.environ.get("KVERIFY_LIB")
    if env:
        return env
    here = pathlib.Path(__file__).resolve().parent
    if (here / "libkverify_c.so").exists():
        return str(here / "libkverify_c.so")
    repo = here.parent.parent
    for preset in ("host", "cuda", "release"):
        p = repo / "build" / preset / "libkverify_c.so"
        if p.exists():
            return str(p)
    raise ImportError("libkverify_c.so not found: install the package (pip install ./python, which builds it) or "
                      "set KVERIFY_LIB to its path")


_lib = None


def lib():
    global _lib
    if _lib is None:
        path = _find_library()
        l = ctypes.CDLL(path)
        l.kvc_abi_version.restype = ctypes.c_uint32
        if l.kvc_abi_version() != ABI_VERSION:
            raise ImportError(f"{path} speaks kverify C ABI {l.kvc_abi_version()}, this package {ABI_VERSION}")
        for f in ("kvc_register", "kvc_check", "kvc_replay", "kvc_report"):
            getattr(l, f).restype = ctypes.c_void_p
        l.kvc_register.argtypes = [ctypes.c_char_p, RUN_FN, CONTRACT_FN, ctypes.c_void_p]
        l.kvc_check.argtypes = [ctypes.c_char_p]
        l.kvc_replay.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        l.kvc_report.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]
        l.kvc_free.argtypes = [ctypes.c_void_p]
        l.kvc_free.restype = None
        _lib = l
    return _lib


def take(ptr):
    """A malloc'd string from the library as str (None for NULL), freed."""
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib().kvc_free(ptr)


def call_json(fn, *args):
    return json.loads(take(fn(*args)))


def write_c_string(dst, size, text):
    """text into the caller's buffer dst of size bytes, cut to fit, NUL-terminated."""
    b = text.encode("utf-8", "replace")[: max(size - 1, 0)]
    ctypes.memmove(dst, b + b"\0", len(b) + 1)
