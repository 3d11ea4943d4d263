"""Contracts kverify can measure: `contract="audited"` and `kverify.audited(base)`.

Under an audited contract each case first runs kverify's audit on the impl (the masking and
triplet probes of README "Audit"): every reduced axis it measures exactly takes the measured
summation tree (serial, depth, partials) in place of the declared one, so a contract may say
"any order" and still be held to the order the impl really uses. The rest of the contract
(accumulator dtype, FMA, flushed subnormals, math functions, rounding sites) is declared."""


class Audited:
    """A contract (a dict, or a function of the case) whose reductions the audit measures."""

    def __init__(self, base):
        if not (base is None or callable(base) or isinstance(base, dict)):
            raise ValueError(f"audited() takes a contract (a dict or a function of the case), not {type(base).__name__}")
        self.base = base

    def __call__(self, case):
        if self.base is None:
            return any_order(case)
        return self.base(case) if callable(self.base) else self.base

    def __repr__(self):
        return f"audited({self.base!r})"


def audited(base=None):
    """The contract `base` with its reductions measured per case; without a base, any_order."""
    return Audited(base)


# CUDA's documented bounds (fp32 ulps) and Triton's lowering of exp (ex2.approx of a rounded
# product, the wider of the two): what a kernel of unknown numerics is held to by default.
DEFAULT_ULPS = {"rsqrt": 2, "exp": {"ulps": 2, "in": "fp32", "via": "exp2"}, "log": 2, "tanh": 2, "sin": 2, "cos": 2,
                "div": {"ulps": 2, "in": "fp32"}}


def any_order(case, acc="fp32"):
    """The contract of a kernel whose numerics one has not read: `acc` arithmetic with FMA
    contraction allowed and subnormals possibly flushed, every math function and division the
    op's definition uses at CUDA's documented bounds (exp as Triton lowers it), every reduced
    axis summed in any order (serial = its length; the audit measures the real tree), no
    rounding sites, no determinism claims."""
    fns = list(case.get("math_functions", [])) + list(case.get("approximate_ops", []))
    if "axes" not in case:
        raise ValueError("the case names no reduced axes: this kverify library predates contract='audited'")
    return {"acc": acc, "fma": True, "ftz": True, "math_ulps": {f: DEFAULT_ULPS[f] for f in fns if f in DEFAULT_ULPS},
            "reductions": {a: {"serial": max(1, int(n)), "depth": 0, "partials": 0} for a, n in case["axes"].items()},
            "determinism": {}}
