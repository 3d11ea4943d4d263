// The registry: op bindings (semantics, generator, reference) and impls (with their
// configs and contracts). Tests, fuzzing, drift and benchmarks iterate it.
#pragma once
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/huge_pages.hpp"
#include "core/case.hpp"
#include "core/contract.hpp"
#include "core/device.hpp"
#include "core/tensor.hpp"

namespace kv {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
  Role role;
};

struct AttrSpec {
  std::string name;
  bool real = false;                 // a real (stored as hex float) or one of choices
  std::string def;                   // default, in canonical form
  std::vector<std::string> choices;  // for choice attributes
  bool integer = false;              // a decimal integer
  bool text = false;                 // free text the op validates itself
};

using DoubleBuf = std::vector<double, NoInitAlloc<double>>;

/// Per output tensor, per element: the reference value and a bound on its error.
struct OutputRef {
  std::string name;
  DoubleBuf v;
  DoubleBuf err;
};

struct RefResult {
  std::vector<OutputRef> outputs;
  std::string method;  // certified:double-enclosure[+gemm:eigen-<isa>][+certified:mpfi-<bits>|+agreed:mpfr-<p1>/<p2>(rows)]
  const OutputRef& at(const std::string& name) const;
  OutputRef& at(const std::string& name);
};

/// Per output tensor, per element: the admissible real interval before the final
/// rounding to the output dtype, and whether the contract allowed no useful bound.
struct OutputEnclosure {
  std::string name;
  DoubleBuf lo, hi;
  ByteBuf unverifiable;
  /// NaN admissible although lo and hi may be finite (Enc::nan: an intermediate may
  /// overflow both ways and meet inf - inf): such an element is unverifiable, a NaN output
  /// there is admitted and a finite one outside [lo, hi] still fails. Empty: none.
  ByteBuf may_nan;
};

/// A refinement that a miss in an output reduced over rows (dW, a mean loss) extends to
/// every row runs only in small cases: none runs where the case's shape holds more than
/// this many elements (OpBinding::refine). The streamed runner relies on it.
inline constexpr int64_t kRefineAllMaxElements = int64_t(1) << 22;

class OpBinding {
 public:
  virtual ~OpBinding() = default;
  virtual std::string name() const = 0;
  virtual std::vector<AttrSpec> attrs() const = 0;
  /// A valid shape for examples (`list`'s sample contracts).
  virtual std::vector<int64_t> example_shape() const { return {8, 4096}; }
  /// Value distributions the generator knows.
  virtual std::vector<std::string> dists() const = 0;
  /// Fills default dtypes and attributes and canonicalizes; throws UsageError.
  virtual void normalize(Case& c) const = 0;
  virtual std::vector<TensorSpec> tensors(const Case& c) const = 0;
  /// Whether each row of output `out` (its first dimension, as the case's) is a function of
  /// that row of the per-row inputs and of the inputs every row shares (a weight, a scalar
  /// dloss) alone: the premise of a batch_invariant claim. False for outputs reduced over
  /// rows (dW, a mean or summed loss) and for those scaled by a batch-wide quantity (a mean
  /// divides by the count of the batch's rows).
  virtual bool row_local(const Case& c, const std::string& out) const = 0;
  /// The reduced axes a contract's `reductions` name, with their lengths in this case.
  virtual std::map<std::string, int64_t> reduced_axes(const Case&) const { return {}; }
  /// Writes the inputs (counter-based, reproducible on every machine).
  virtual void generate(const Case& c, TensorSet& ts) const = 0;
  /// High-precision value of every output with a bound on its error (once per input identity).
  virtual RefResult reference(const Case& c, const TensorSet& ts) const = 0;
  /// Recomputes, at higher precision, the reference where the cheap bound is too loose:
  /// `misses` names per output the elements that missed the target. Elements it cannot
  /// refine keep their value and bound. A miss in a row-local output recomputes the rows
  /// holding misses alone; one in an output reduced over rows recomputes every row, or
  /// nothing where numel(c.shape) > kRefineAllMaxElements.
  virtual void refine(const Case& c, const TensorSet& ts, RefResult& ref,
                      const std::map<std::string, std::vector<int64_t>>& misses) const = 0;
  /// The admissible set under a contract, written into `out` (whose storage is reused
  /// from case to case).
  virtual void enclose(const Case& c, const TensorSet& ts, const Contract& k, std::vector<OutputEnclosure>& out) const = 0;
  /// Both at once (one pass over the inputs where the binding can): the reference and
  /// the enclosure under k, as reference() and enclose() would give them (reusing the
  /// storage of ref and out where the binding can).
  virtual void evaluate(const Case& c, const TensorSet& ts, const Contract& k, RefResult& ref,
                        std::vector<OutputEnclosure>& out) const {
    ref = reference(c, ts);
    enclose(c, ts, k, out);
  }
  /// evaluate() for the outputs named in `want` alone, the others left empty: the
  /// streamed runner evaluates outputs reduced over rows whole and the row-local ones a
  /// block of rows at a time. The default evaluates every output and drops the rest.
  virtual void evaluate_only(const Case& c, const TensorSet& ts, const Contract& k, const std::set<std::string>& want,
                             RefResult& ref, std::vector<OutputEnclosure>& out) const;
  /// Streaming (check/stream.hpp): the tensors that run along the case's first dimension,
  /// each with its own dim that does (0 for x of shape (rows, N), 1 for a (3, B, S, D)
  /// table). The case with shape[0] = e - b and those tensors cut to [b, e) along that dim
  /// (the others shared whole) must give in each of its outputs named here exactly rows
  /// [b, e) of the whole case's reference and enclosure, whatever else its rows hold: the
  /// outputs named are the row-local ones (row_local), each cut along its dim 0. Empty (the
  /// default): the case is evaluated whole.
  virtual std::map<std::string, int> slice_dims(const Case& c) const {
    (void)c;
    return {};
  }
};

struct ConfigKnob {
  std::string name;
  std::vector<std::string> values;  // allowed values; the first is the default
};

struct WorkspaceReq {
  std::string name;
  size_t bytes;
  DType poison_as;
};

/// A dispatch threshold: a size where an impl's code path changes (issue 18), so the fuzz
/// generator draws sizes at and around it (t - 1, t, t + 1). The size is the product of
/// the case's dims [begin, end): one dim (a row length), or the leading dims together (the
/// rows a grid spreads over). Examples: the longest row a team of warps keeps in
/// registers, a row split into one more block, rows equal to the per-SM programs of a
/// two-stage reduction (one row each), a chunk of rows, the 16-byte vector width.
struct Threshold {
  int begin = 0, end = 0;        // shape dims, half-open
  std::vector<int64_t> values;   // the path differs between v - 1, v and v + 1
  std::string what;              // where the path changes, e.g. "a row past 2 warps' registers"
  bool rows = false;             // these dims are the rows the grid spreads over the SMs
};

/// The dims of a row op: its rows (every dim but the last) and its row (the last dim).
Threshold rows_threshold(const Case& c, std::vector<int64_t> values, std::string what);
Threshold row_threshold(const Case& c, std::vector<int64_t> values, std::string what);

class Impl {
 public:
  virtual ~Impl() = default;
  virtual std::string op() const = 0;
  virtual std::string name() const = 0;
  virtual std::string device() const = 0;  // host | cuda
  /// Hash of the source and build flags, for version drift.
  virtual std::string version() const = 0;
  virtual std::vector<ConfigKnob> knobs() const = 0;
  /// Why this impl does not compute cases like c on any device: a dtype, attribute, layout
  /// or config combination it does not take (checked before launch; "declined by <impl>").
  virtual std::optional<std::string> declines(const Case& c, const DeviceProfile& p) const {
    (void)c, (void)p;
    return std::nullopt;
  }
  /// Why this config cannot run this case on this device profile (block size, shared
  /// memory, ...; checked before launch; "invalid on this device").
  virtual std::optional<std::string> invalid_reason(const Case& c, const DeviceProfile& p) const {
    (void)c, (void)p;
    return std::nullopt;
  }
  /// declines() or else invalid_reason(), worded for a result line or a message.
  std::optional<std::string> refusal(const Case& c, const DeviceProfile& p) const;
  virtual Contract contract(const Case& c, const DeviceProfile& p) const = 0;
  virtual std::vector<WorkspaceReq> workspaces(const Case& c, const DeviceProfile& p) const {
    (void)c, (void)p;
    return {};
  }
  virtual void run(TensorSet& ts, const Case& c, const DeviceProfile& p) const = 0;
  /// Where this impl's code path changes for cases like c (its config, dtypes, attributes
  /// and rank; a dim may move the thresholds of another, e.g. a row length the teams per
  /// block) under profile p. Read by the fuzz generator without a device: a declaration,
  /// no launch. Plugins and workers declare none.
  virtual std::vector<Threshold> thresholds(const Case& c, const DeviceProfile& p) const {
    (void)c, (void)p;
    return {};
  }
  /// Test-only impls (planted bugs, crashes) are hidden from `list` and the default suite.
  virtual bool test_only() const { return false; }
};

class Registry {
 public:
  void add(std::unique_ptr<OpBinding> op);
  void add(std::unique_ptr<Impl> impl);
  /// Drops the impl `name` of `op` if there is one (an in-process impl registered again);
  /// whether there was.
  bool remove_impl(const std::string& op, const std::string& name);
  /// Throws UsageError naming the known ops.
  const OpBinding& op(const std::string& name) const;
  const Impl& impl(const std::string& op, const std::string& name) const;
  std::vector<const OpBinding*> ops() const;
  std::vector<const Impl*> impls(const std::string& op) const;
  /// Fills default config knobs, rejects unknown knobs and values (UsageError), and
  /// normalizes the op's attributes and dtypes.
  void normalize(Case& c) const;

 private:
  std::vector<std::unique_ptr<OpBinding>> ops_;
  std::vector<std::unique_ptr<Impl>> impls_;
};

Registry& registry();

/// `base` plus batch_invariant where c's op allows that claim for `out`
/// (OpBinding::row_local): how the built-in impls derive it from the case.
DeterminismClaims with_batch_claim(const Case& c, const std::string& out, DeterminismClaims base);
/// Registers the built-in ops and impls (idempotent).
void register_builtin();

}  // namespace kv
