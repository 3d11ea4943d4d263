// Rounding sites (core/sites.hpp): the table every op's definition honours.
#include "core/sites.hpp"

#include <algorithm>
#include <set>

#include "core/error.hpp"

namespace kv {

const std::vector<SiteDef>& site_defs() {
  static const std::vector<SiteDef> s = {
      {"rms_norm.xr", {"rms_norm.fwd", "rms_norm.bwd"}, "mandated", "mode llama: x*rstd rounded to fp32, then to x's dtype", ""},
      {"rms_norm.eps", {"rms_norm.fwd", "rms_norm.bwd"}, "mandated", "eps rounded to the compute dtype", ""},
      {"rms_norm.m", {"rms_norm.bwd"}, "product", "m = dy * (offset + w), the term of the row sum and of dx", "m_rounding=x_dtype"},
      {"rms_norm.dw_product", {"rms_norm.bwd"}, "product", "each dW term dy * t, t = x*rstd (as llama rounds it)", ""},
      {"softmax.bwd_dy_y", {"softmax.bwd"}, "product", "each term dy * y of the row sum t = sum(dy * y)", ""},
      {"glu.act", {"swiglu.fwd", "swiglu.bwd", "geglu.fwd", "geglu.bwd"}, "value",
       "the activation silu(a) or gelu(a) before its product with b (and, backward, in db = dc * act)", ""},
      {"glu.dc_b", {"swiglu.bwd", "geglu.bwd"}, "product",
       "da's factor dc * b, rounded before its product with the activation's derivative", ""},
      {"ce.attrs", {"cross_entropy.fwd", "cross_entropy.bwd", "fused_linear_cross_entropy.fwd", "fused_linear_cross_entropy.bwd"},
       "mandated", "label_smoothing, z_loss and softcap rounded to fp32", ""},
      {"ce.row_loss", {"cross_entropy.fwd", "fused_linear_cross_entropy.fwd"}, "value",
       "each row's loss (after label smoothing and z_loss; ignored rows' 0) before the reduction", ""},
      {"ce.grad", {"cross_entropy.bwd"}, "value",
       "each logit's gradient (under mean, divided by the weight sum) before its product with dloss", ""},
      {"flce.logits", {"fused_linear_cross_entropy.fwd", "fused_linear_cross_entropy.bwd"}, "value",
       "each logit x W^T (+ bias) before the softcap and the softmax", ""},
      {"flce.grad", {"fused_linear_cross_entropy.bwd"}, "value",
       "the logits' gradient after its scale, before the dx and dW products", "grad_rounding=x_dtype"},
      {"layer_norm.eps", {"layer_norm.fwd", "layer_norm.bwd"}, "mandated", "eps rounded to fp32", ""},
      {"rope_table.angle", {"rope_table.fwd"}, "mandated", "pos * inv_freq rounded to fp32", ""},
  };
  return s;
}

const std::vector<FormDef>& form_defs() {
  static const std::vector<FormDef> f = {
      {"softmax.bwd_dx", {"softmax.bwd"}, {"factored", "distributed"},
       "dx = y * (dy - t) (factored), or dy*y - y*t (distributed: ATen's kernel and its decomposition; "
       "with site softmax.bwd_dy_y both terms' dy*y is the rounded product)"},
  };
  return f;
}

namespace {

/// The definitions (sites or forms) whose ops include op.
template <class Def>
std::vector<Def> defs_of(const std::vector<Def>& all, const std::string& op) {
  std::vector<Def> out;
  for (auto& d : all)
    if (std::find(d.ops.begin(), d.ops.end(), op) != d.ops.end()) out.push_back(d);
  return out;
}

}  // namespace

std::vector<FormDef> forms_of(const std::string& op) { return defs_of(form_defs(), op); }

std::vector<std::string> approximate_ops_of(const std::string& op) {
  const std::string base = op.substr(0, op.find('.'));
  // The definitions that divide (reference/*.hpp, ops/ce_common.hpp: p.div).
  if (base == "rms_norm" || base == "layer_norm" || op == "softmax.fwd" || base == "swiglu" ||
      base == "cross_entropy" || base == "fused_linear_cross_entropy")
    return {"div"};
  return {};
}

std::vector<std::string> vias_of(const std::string& f) {
  if (f == "exp") return {"exp2"};
  if (f == "div") return {"rcp"};
  return {};
}

void check_math(const std::string& op, const Contract& k, const std::string& impl,
                const std::map<std::string, double>& measured) {
  static const std::vector<std::string> known = {"rsqrt", "exp", "log", "tanh", "sin", "cos", "div"};
  const auto ops = approximate_ops_of(op);
  for (auto& [fn, e] : k.math_ulps) {
    if (std::find(known.begin(), known.end(), fn) == known.end())
      throw UsageError("contract of " + impl + ": math_ulps names '" + fn +
                       "', not a math function or approximate operation (rsqrt, exp, log, tanh, sin, cos, div)");
    if (fn == "div" && ops.empty())
      throw UsageError("contract of " + impl + ": math_ulps declares 'div', but " + op + "'s definition never divides");
    const double fp32_ulps = e.ulps * (unit_roundoff(e.in) / unit_roundoff(DType::f32));
    if (auto it = measured.find(fn); it != measured.end() && fp32_ulps < it->second)
      throw HarnessError("contract of " + impl + " cites " + std::to_string(fp32_ulps) + " ulp (fp32) for " + fn +
                         ", calibration measured " + std::to_string(it->second) + " on this device");
  }
}

std::vector<SiteDef> sites_of(const std::string& op) { return defs_of(site_defs(), op); }

std::vector<std::string> math_functions_of(const std::string& op) {
  const std::string base = op.substr(0, op.find('.'));
  if (op == "rms_norm.fwd" || op == "layer_norm.fwd") return {"rsqrt"};  // the backward takes rstd
  if (op == "softmax.fwd" || base == "swiglu") return {"exp"};
  if (base == "geglu") return {"tanh"};
  if (base == "cross_entropy" || base == "fused_linear_cross_entropy") return {"exp", "log", "tanh"};
  if (base == "rope_table") return {"sin", "cos"};
  return {};
}

void check_sites(const std::string& op, const Contract& k, const std::string& impl) {
  for (auto& [name, d] : k.rounding_sites) {
    std::string known;
    bool ok = false;
    for (auto& s : sites_of(op)) {
      if (s.kind == "mandated") continue;
      known += (known.empty() ? "" : ", ") + s.name;
      ok |= s.name == name;
    }
    if (!ok)
      throw UsageError("contract of " + impl + ": rounding site '" + name + "' is not one " + op +
                       " declares (declarable: " + (known.empty() ? "none" : known) + ")");
  }
  for (auto& [name, choice] : k.forms) {
    const auto forms = forms_of(op);
    auto f = std::find_if(forms.begin(), forms.end(), [&](const FormDef& d) { return d.name == name; });
    if (f == forms.end()) throw UsageError("contract of " + impl + ": form '" + name + "' is not one " + op + " names");
    if (std::find(f->choices.begin(), f->choices.end(), choice) == f->choices.end())
      throw UsageError("contract of " + impl + ": form " + name + " has no choice '" + choice + "'");
  }
}

void check_contract(const OpBinding& op, const Case& c, const Contract& k, const std::string& impl,
                    const std::map<std::string, double>& measured) {
  check_sites(c.op, k, impl);
  check_math(c.op, k, impl, measured);
  std::string outs;
  std::set<std::string> names;
  for (auto& t : op.tensors(c))
    if (t.role == Role::output) names.insert(t.name), outs += (outs.empty() ? "" : ", ") + t.name;
  auto check = [&](const std::string& n, const char* field) {
    if (!names.count(n))
      throw UsageError("contract of " + impl + ": " + field + " names '" + n + "', not an output of " + c.op + " (" + outs + ")");
  };
  for (auto& n : k.not_produced) check(n, "not_produced");
  for (auto& [n, claims] : k.determinism) check(n, "determinism");
}

Case with_sites(Case c, const Contract& k) {
  c.sites = k.rounding_sites;
  c.forms = k.forms;
  return c;
}

}  // namespace kv
