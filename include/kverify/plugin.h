/* kverify plugin ABI: a shared library registers implementations of kverify's ops.
 *
 * A plugin exports two C functions:
 *   uint32_t kverify_plugin_abi_version(void);           returns KV_PLUGIN_ABI_VERSION
 *   int kverify_plugin_register(const kv_registrar* r);  calls r->add_impl once per impl
 * kverify loads it with `--plugin path.so` (repeatable), checks the ABI version before
 * calling anything else, and refuses a mismatch with a clear error (the run goes on; the
 * plugin's cases are reported as `error`).
 *
 * Plugin code never runs in kverify's own process: a probe process loads the plugin to
 * learn its impls and answer contract() for kverify's checks, and cases run in kverify's
 * worker process. A crash or hang in registration or contract() makes the plugin unusable
 * for that run (its cases are `error`, the others run); one in launch() costs that case.
 *
 * kverify owns every buffer: it generates the inputs, poisons the outputs, puts canaries
 * around both, and for a "cuda" impl mirrors them to the GPU before `launch` and copies
 * them back after synchronizing the stream. The plugin only computes. Everything it needs
 * to know about the case (op, config knobs, attributes, tensors, device limits) is in
 * kv_call; attributes and knobs always arrive complete (defaults filled in).
 *
 * Outputs may alias inputs (a case with `alias=y:x` runs in place): compare data pointers.
 * A "cuda" plugin should check its own launches (cudaGetLastError): it may link its own
 * static CUDA runtime, whose launch errors kverify's runtime cannot see; kverify then
 * synchronizes the stream and checks for errors that surface there. launch() is called
 * on the thread whose current device is the one the stream belongs to.
 *
 * Contracts are JSON in kverify's schema (see `kverify list --json` for each op's axes):
 *   {"acc": "fp32", "fma": true, "ftz": false, "math_ulps": {"rsqrt": 2},
 *    "reductions": {"row": {"serial": 16, "depth": 8, "partials": 0}},
 *    "determinism": {"y": ["run_to_run", "gpu_invariant", "batch_invariant"]}}
 *
 * What an impl takes (kv_impl_desc.accepts, optional): JSON, the same as a worker's
 * `accepts` (examples/worker/PROTOCOL.md), each field optional (absent: anything):
 *   {"dtypes": ["fp32", "bf16"], "attrs": {"mode": ["llama", "gemma"]},
 *    "layouts": ["contiguous", "strided", "in_place"]}
 * kverify declines the other cases itself ("declined by <impl>: it accepts dtypes fp32,
 * not bf16 for x") without calling contract(), and fuzz draws only inside it. A malformed
 * one (not JSON, an unknown field, dtype, layout, attribute or value) makes that impl
 * unusable: its cases are `error` with the reason.
 *
 * Compatibility: `accepts` was appended to kv_impl_desc within ABI version 1. kverify reads
 * it only when desc->struct_size covers it, so a plugin built against the older header
 * (whose struct_size ends at `launch`) loads unchanged and accepts everything.
 */
#ifndef KVERIFY_PLUGIN_H
#define KVERIFY_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KV_PLUGIN_ABI_VERSION 1u

/* Return codes of the callbacks. */
#define KV_OK 0
#define KV_ERROR 1       /* message holds the error; the case becomes `error` */
#define KV_UNSUPPORTED 2 /* contract(): this impl cannot run this case; message says why */

#define KV_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))
#ifndef __cplusplus
#undef KV_PLUGIN_EXPORT
#define KV_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* call->message holds at least this many bytes. */
#define KV_MESSAGE_MIN_CAP 65536

typedef enum kv_dtype { KV_F32 = 0, KV_F16 = 1, KV_BF16 = 2, KV_I32 = 3 } kv_dtype;

/* One tensor: data points at its first element (host memory for "host" impls, device
 * memory for "cuda" impls; NULL in contract()); strides (never NULL) are in elements, for
 * the logical row-major order of shape. Host storage ends flush with a guard page (an
 * access past it faults): its start is aligned to the element size, not to 16 bytes.
 * Device storage starts 256-byte aligned. A tensor's base offset may misalign either. */
typedef struct kv_tensor {
  const char* name;
  void* data;
  kv_dtype dtype;
  int32_t ndim;
  const int64_t* shape;
  const int64_t* strides;
  int32_t is_output;
} kv_tensor;

typedef struct kv_pair {
  const char* key;
  const char* value;
} kv_pair;

/* One call for one case. Attribute values are kverify's canonical strings: real numbers
 * as C99 hex floats (strtod reads them exactly), choices and integers as written. */
typedef struct kv_call {
  uint32_t struct_size; /* sizeof(kv_call) as kverify was built */
  const char* op;       /* e.g. "rms_norm.fwd" */
  const char* impl;     /* the impl name the plugin registered */
  const char* case_str; /* the one-line replay string */
  int32_t n_config;
  const kv_pair* config;
  int32_t n_attrs;
  const kv_pair* attrs;
  int32_t n_tensors; /* inputs then outputs, in the op's order (data NULL in contract()) */
  const kv_tensor* tensors;
  const int64_t* shape; /* the case's shape (e.g. rows x N) */
  int32_t ndim;
  void* stream; /* cudaStream_t for "cuda" impls, NULL for "host" */
  char* message; /* out: contract JSON, a reason or an error (NUL-terminated) */
  size_t message_cap;
  /* The device's launch limits, as the run's --device-profile states them (for launch
   * validation and for reduction shapes that depend on the SM count; 0 on the host). */
  int32_t warp_size;
  int32_t sm_count;
  int32_t max_threads_per_block;
  int64_t smem_per_block;
} kv_call;

typedef struct kv_impl_desc {
  uint32_t struct_size; /* sizeof(kv_impl_desc) */
  const char* op;       /* an op kverify knows, e.g. "rms_norm.fwd" */
  const char* impl;     /* a name of your choice, unique per op */
  const char* device;   /* "cuda" or "host" */
  const char* version;  /* changes when the numerics may change (for version drift) */
  /* Config knobs, ';'-separated, values '|'-separated, the first the default:
   * "num_warps=8|1|2|4|16|32;dw=per_sm|atomics". NULL or "" for none. */
  const char* knobs;
  /* Writes the contract for call's case (JSON, see above) into call->message; or returns
   * KV_UNSUPPORTED with the reason (launch validation: shapes, dtypes, configs). */
  int (*contract)(const kv_call* call);
  /* Computes the outputs. For "cuda" impls: enqueue on call->stream; kverify checks
   * cudaGetLastError() and synchronizes. */
  int (*launch)(const kv_call* call);
  /* What the impl takes, as JSON (see above); NULL: everything. Read only when
   * struct_size covers it (appended within ABI version 1). */
  const char* accepts;
} kv_impl_desc;

typedef struct kv_registrar {
  uint32_t abi_version;
  uint32_t struct_size; /* sizeof(kv_registrar) */
  void* ctx;
  /* Returns KV_OK, or KV_ERROR after printing why (unknown op, duplicate name, ...). */
  int (*add_impl)(void* ctx, const kv_impl_desc* desc);
} kv_registrar;

typedef uint32_t (*kv_plugin_abi_version_fn)(void);
typedef int (*kv_plugin_register_fn)(const kv_registrar* r);

#ifdef __cplusplus
}
#endif

#endif /* KVERIFY_PLUGIN_H */
