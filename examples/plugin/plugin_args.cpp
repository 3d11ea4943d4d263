// The example plugin's launch arguments: the tensors kverify hands over checked against
// the case (shapes, dtypes, overlaps) and turned into RmsFwdArgs (plugin_parts.hpp).
#include <cstdint>
#include <cstring>

#include "plugin_parts.hpp"

namespace kvp {

namespace {

const kv_tensor* tensor(const kv_call* c, const char* name) {
  for (int32_t i = 0; i < c->n_tensors; ++i)
    if (c->tensors[i].name && std::strcmp(c->tensors[i].name, name) == 0) return &c->tensors[i];
  return nullptr;
}

/// Stride of dim d (a NULL strides array is read as contiguous).
int64_t stride_of(const kv_tensor& t, int d) {
  if (t.strides) return t.strides[d];
  int64_t s = 1;
  for (int i = t.ndim - 1; i > d; --i) s *= t.shape[i];
  return s;
}

/// Byte range [lo, hi) the tensor's elements span (shape has no zero extent).
void byte_span(const kv_tensor& t, int elem, uintptr_t& lo, uintptr_t& hi) {
  int64_t mn = 0, mx = 0;
  for (int d = 0; d < t.ndim; ++d) {
    const int64_t reach = (t.shape[d] - 1) * stride_of(t, d);
    (reach < 0 ? mn : mx) += reach;
  }
  lo = reinterpret_cast<uintptr_t>(t.data) + mn * elem;
  hi = reinterpret_cast<uintptr_t>(t.data) + (mx + 1) * elem;
}

int elem_size(int dt) { return dt == KV_F16 || dt == KV_BF16 ? 2 : 4; }

bool overlap(const kv_tensor& a, const kv_tensor& b) {
  uintptr_t alo, ahi, blo, bhi;
  byte_span(a, elem_size(a.dtype), alo, ahi);
  byte_span(b, elem_size(b.dtype), blo, bhi);
  return alo < bhi && blo < ahi;
}

/// Same dtype, data, shape and strides: each y element is the input element of its index.
bool same_elements(const kv_tensor& y, const kv_tensor& in) {
  if (y.data != in.data || y.dtype != in.dtype || y.ndim != in.ndim) return false;
  for (int d = 0; d < y.ndim; ++d)
    if (y.shape[d] != in.shape[d] || (y.shape[d] > 1 && stride_of(y, d) != stride_of(in, d))) return false;
  return true;
}

}  // namespace

/// Checks the tensors against the case and fills a; KV_ERROR with the reason otherwise.
int build_args(const kv_call* c, Params& p, RmsFwdArgs& a) {
  const kv_tensor *x = tensor(c, "x"), *w = tensor(c, "w"), *y = tensor(c, "y"), *rs = tensor(c, "rstd");
  if (!x || !w || !y || !rs) return say(c, KV_ERROR, "rms_norm.fwd needs tensors x, w, y and rstd");
  p.x_dt = x->dtype;
  p.w_dt = w->dtype;
  p.y_dt = y->dtype;
  p.rstd_dt = rs->dtype;
  if (check_dtypes(c, p, KV_ERROR) != KV_OK) return KV_ERROR;
  if (x->is_output || w->is_output || !y->is_output || !rs->is_output)
    return say(c, KV_ERROR, "x and w must be inputs, y and rstd outputs");
  auto same_shape = [&](const kv_tensor& t, int nd, const int64_t* s) {
    if (t.ndim != nd || (nd && !t.shape)) return false;
    for (int d = 0; d < nd; ++d)
      if (t.shape[d] != s[d]) return false;
    return true;
  };
  const int64_t one = 1;
  if (!same_shape(*x, c->ndim, c->shape) || !same_shape(*y, c->ndim, c->shape))
    return say(c, KV_ERROR, "x and y must have the case's shape");
  if (!same_shape(*w, 1, &p.n)) return say(c, KV_ERROR, "w must have shape (N)");
  if (!(p.lead ? same_shape(*rs, p.lead, c->shape) : same_shape(*rs, 1, &one)))
    return say(c, KV_ERROR, "rstd must have the case's shape without N");
  if (p.rows == 0) {
    a.rows = 0;
    return KV_OK;
  }
  if (!x->data || !w->data || !y->data || !rs->data) return say(c, KV_ERROR, "a tensor has no data");
  // y may reuse x's (or, 1-D, w's) storage element for element: each y[..., j] is written
  // after the one read of the same x[..., j] / w[j], by the same thread. Any other overlap
  // with an input, and rstd over an input (rows read w and x after another row's rstd is
  // written), is refused.
  for (const kv_tensor* in : {x, w}) {
    if (overlap(*y, *in) && !same_elements(*y, *in))
      return say(c, KV_ERROR, "y overlaps %s other than element for element", in->name);
    if (overlap(*rs, *in)) return say(c, KV_ERROR, "rstd overlaps %s", in->name);
  }

  a.x = x->data;
  a.w = w->data;
  a.y = y->data;
  a.rstd = static_cast<float*>(rs->data);
  a.x_dt = p.x_dt;
  a.w_dt = p.w_dt;
  a.y_dt = p.y_dt;
  a.mode = p.mode;
  a.rows = p.rows;
  a.n = p.n;
  a.lead = p.lead;
  for (int d = 0; d < p.lead; ++d) {
    a.lead_shape[d] = c->shape[d];
    a.x_lead[d] = stride_of(*x, d);
    a.y_lead[d] = stride_of(*y, d);
    a.r_lead[d] = stride_of(*rs, d);
  }
  a.x_col = stride_of(*x, p.lead);
  a.y_col = stride_of(*y, p.lead);
  a.w_col = stride_of(*w, 0);
  a.eps = p.eps;
  a.offset = p.offset;
  return KV_OK;
}

}  // namespace kvp
