/* kverify's C ABI for checking an impl that lives in the calling process (the Python
 * package python/kverify loads it with ctypes; any language with a C FFI can).
 *
 * Why a C ABI and not a Python extension module: one build of libkverify_c.so serves every
 * Python 3 (and other callers), because ctypes needs no Python headers at build time; a
 * pybind11 module is tied to the Python minor version it was compiled for, and the build
 * machine's Python (Debian's 3.11) is not the GPU machine's (3.12 with torch).
 *
 * The library owns the run: it generates inputs, computes references and enclosures,
 * judges, shrinks, and writes results. The caller's impl only computes: kverify calls it
 * with the case's tensors (host memory here), and it writes every output tensor in place.
 * Strings the library returns are malloc'd JSON; free them with kvc_free.
 */
#ifndef KVERIFY_C_H
#define KVERIFY_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVC_ABI_VERSION 1u

/* One tensor of a case as the impl sees it: its storage starts at data; element
 * (i0, i1, ...) lies at data + (sum of i_k * strides[k]) * element size. */
typedef struct kvc_tensor {
  const char* name;
  int role;            /* 0: input (read only), 1: output (write every element) */
  const char* dtype;   /* "fp32", "fp16", "bf16", "i32" */
  int ndim;
  const int64_t* shape;
  const int64_t* strides; /* in elements */
  void* data;
} kvc_tensor;

/* Runs the impl on one case. case_json: the case fields (op, impl, case (the replay line),
 * config, shape, dtypes, attrs, attr_values), as the worker protocol's. Returns 0, or
 * nonzero with a one-line reason written into err (at most err_len bytes, NUL included):
 * the case becomes `error` with it. */
typedef int (*kvc_run_fn)(void* user, const char* case_json, kvc_tensor* tensors, int n, char* err, size_t err_len);

/* States the impl's contract for one case (only for impls registered without one):
 * writes JSON {"contract": {...}} or {"unsupported": "why"} into out (out_len bytes,
 * NUL included) and returns 0; nonzero with a reason in out: the case becomes `error`. */
typedef int (*kvc_contract_fn)(void* user, const char* case_json, char* out, size_t out_len);

uint32_t kvc_abi_version(void);

/* Registers an impl. decl_json: {"op", "impl", "device": "host", "version", "knobs",
 * "contract" (or null: contract_fn is asked per case), "accepts"}, as a worker's hello
 * describes an impl (examples/worker/PROTOCOL.md). Returns NULL, or a malloc'd one-line
 * error. An impl of the same op and name replaces the earlier one. */
char* kvc_register(const char* decl_json, kvc_run_fn run, kvc_contract_fn contract, void* user);

/* Runs a campaign in this process: the curated tier, then generated cases, failures shrunk.
 * options_json: {"op", "impl", "out" (directory), "cases" (generated cases) or "seconds",
 * "seed", "max_elements", "shard" ("i/N": the generated indices i mod N, for parallel
 * processes joined by `kverify merge`), "curated" ("builtin" | "none" | a file), "max_shrink_runs",
 * "contract" ("declared" | "audited"), "device" ("host")}. Returns malloc'd JSON:
 * {"code": 0|1|2, "error": "..." (code 2: bad options), "results": path, "counts": {...},
 * "failures": [result lines of the failing cases, shrunk]}. */
char* kvc_check(const char* options_json);

/* Runs one case (a replay line "kv1 op=... impl=... ...") in this process and returns its
 * result line as malloc'd JSON ({"verdict": "error", ...} for a malformed line). */
char* kvc_replay(const char* case_line, const char* options_json);

/* Writes report.html, report.json and junit.xml into out_dir from a results.jsonl file.
 * Returns NULL, or a malloc'd one-line error. */
char* kvc_report(const char* results_path, const char* out_dir, const char* title);

void kvc_free(char* p);

#ifdef __cplusplus
}
#endif

#endif
