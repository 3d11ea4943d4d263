// Registration of the built-in ops and impls.
#include "core/registry.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/flce.hpp"
#include "ops/glu.hpp"
#include "ops/layer_norm.hpp"
#include "ops/softmax.hpp"
#include "ops/rms_norm.hpp"
#include "ops/rope.hpp"
#include "ops/rope_table.hpp"
#ifdef KV_HAVE_CUDA
#include "core/inputs.hpp"
#include "device/gpu_fill.hpp"
#include "kernels/cross_entropy/cuda.hpp"
#include "kernels/flce/cuda.hpp"
#include "kernels/glu/cuda.hpp"
#include "kernels/layer_norm/cuda.hpp"
#include "kernels/rms_norm/cuda.hpp"
#include "kernels/rope/cuda.hpp"
#include "kernels/rope_table/cuda.hpp"
#include "kernels/softmax/cuda.hpp"
#endif

namespace kv {

void register_builtin() {
  static bool done = false;
  if (done) return;
  done = true;
  Registry& r = registry();
  register_rms_norm_ops(r);
  register_glu_ops(r);
  register_softmax_ops(r);
  register_layer_norm_ops(r);
  register_cross_entropy_ops(r);
  register_rope_ops(r);
  register_rope_table_ops(r);
  register_flce_ops(r);
#ifdef KV_HAVE_CUDA
  register_cuda_rms_norm(r);
  register_cuda_glu(r);
  register_cuda_softmax(r);
  register_cuda_layer_norm(r);
  register_cuda_rope(r);
  register_cuda_rope_table(r);
  register_cuda_cross_entropy(r);
  register_cuda_flce(r);
  set_gpu_filler(&gpu_fill);  // used where the runner allows it (cases on a CUDA device)
#endif
}

}  // namespace kv
