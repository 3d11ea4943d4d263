// Rounding sites (issue 20, deliverable 1): the intermediate values of an op's definition
// where implementations round to a storage dtype. A contract declares which it rounds and to
// which dtype (Contract::rounding_sites); the reference and the enclosure then apply exactly
// that rounding (one RNE) at that point. Mandated roundings are op semantics, listed here
// for `kverify list --json` but never declared. The definitions read a declared site through
// the case they are given (Case::sites, set by with_sites from the contract).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/case.hpp"
#include "core/contract.hpp"
#include "core/registry.hpp"

namespace kv {

struct SiteDef {
  std::string name;               // e.g. rms_norm.dw_product
  std::vector<std::string> ops;   // the ops whose definition has it
  std::string kind;               // product (replaces the fp32 rounding of a product), value, mandated
  std::string what;               // the value, in words
  std::string alias;              // a deprecated attribute that says the same (attr=value), or empty
};

/// An evaluation form point: where implementations evaluate an algebraically equal form of
/// the definition whose rounding errors differ (e.g. softmax backward's dx). choices[0] is
/// the definition's own form.
struct FormDef {
  std::string name;                  // e.g. softmax.bwd_dx
  std::vector<std::string> ops;
  std::vector<std::string> choices;  // e.g. factored, distributed
  std::string what;
};

/// Every form point of every op.
const std::vector<FormDef>& form_defs();
std::vector<FormDef> forms_of(const std::string& op);
/// The approximate operations op's definition performs that a contract may declare in
/// math_ulps (today "div": every division of the definition), each with its evaluation
/// forms ("via"); a function's own forms likewise (exp: exp2). Not declared: exact then rounded once.
std::vector<std::string> approximate_ops_of(const std::string& op);
std::vector<std::string> vias_of(const std::string& fn_or_op);
/// Throws UsageError where k's math_ulps name a function or operation op's definition has no
/// use for in any case (a typo, or "div" for an op that never divides), and HarnessError where
/// a declared error (in fp32 ulps) is below what calibrate-math measured on this device.
void check_math(const std::string& op, const Contract& k, const std::string& impl,
                const std::map<std::string, double>& measured_fp32_ulps);

/// Every site of every op, declarable and mandated.
const std::vector<SiteDef>& site_defs();
/// Everything kverify checks of an impl's contract for case c of op before using it:
/// check_sites, check_math, and that not_produced and determinism name outputs of the op.
/// Throws UsageError (the case is an `error`; `audit` exits 2).
void check_contract(const OpBinding& op, const Case& c, const Contract& k, const std::string& impl,
                    const std::map<std::string, double>& measured_fp32_ulps = {});
/// The sites of one op (declarable and mandated).
std::vector<SiteDef> sites_of(const std::string& op);
/// The math functions op's definition may call (a contract's math_ulps must cover those its
/// case calls; cross_entropy and fused_linear_cross_entropy call tanh only under softcap; the
/// norms' backward takes rstd as an input and calls none).
std::vector<std::string> math_functions_of(const std::string& op);
/// Throws UsageError where k declares a site op's definition does not have (or a mandated one),
/// or a form point or choice it does not have.
void check_sites(const std::string& op, const Contract& k, const std::string& impl);
/// c with k's declared rounding sites and forms (what the reference and the enclosure evaluate).
Case with_sites(Case c, const Contract& k);

}  // namespace kv
