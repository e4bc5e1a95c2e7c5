"""What each backend serves (kernels, features, degrees, leave-one-out, weights, tol, dtypes,
devices), and the cost model that ``backend="auto"`` ranks them by."""

from __future__ import annotations

import math
from dataclasses import dataclass

from nadaraya.kernels import REGISTRY, Kernel
from nadaraya.kernels import get as get_kernel

__all__ = ["ANY_DEGREE", "CAPABILITIES", "Capability", "cost", "fused_compact_cost", "table", "why_not"]

#: a degree without limit (the moments of any local polynomial degree)
ANY_DEGREE = 2**31 - 1
#: every kernel nadaraya names
_ALL = tuple(REGISTRY)


@dataclass(frozen=True)
class Capability:
    """What one backend computes.

    Attributes
    ----------
    name : str
        The backend's name (``backend=``).
    kernels : tuple of str or None
        The kernels it computes, by name; None: every kernel, those derived from the named ones
        (such as the squared kernels of the variance sums) included.
    compact : bool
        Only kernels of finite support.
    dims : tuple of (int, int or None)
        The fewest and most features (None: no limit).
    degree : tuple of int
        The highest local polynomial degree (``moments``) it computes, in 1, 2 and 3 or more
        features (``ANY_DEGREE``, 2**31 - 1: no limit).
    loo : bool
        Whether it leaves keys out (``exclude``, leave-one-out) by masking their terms.
    weights : bool
        Whether it takes sample weights.
    exact : bool
        True: exact sums, whatever ``tol`` is. False: sums within ``tol`` only (``tol`` needed).
    dtypes : tuple of str
        The floating dtypes it computes in.
    devices : tuple of str
        Where it runs (``"cpu"``; the torch backend also ``"cuda"`` and ``"mps"``).
    lazy : bool
        Whether it takes Dask arrays and returns lazy sums.
    """

    name: str
    kernels: tuple[str, ...] | None = None
    compact: bool = False
    dims: tuple[int, int | None] = (1, None)
    degree: tuple[int, int, int] = (ANY_DEGREE, ANY_DEGREE, ANY_DEGREE)
    loo: bool = True
    weights: bool = True
    exact: bool = True
    dtypes: tuple[str, ...] = ("float32", "float64")
    devices: tuple[str, ...] = ("cpu",)
    lazy: bool = False

    def max_degree(self, d: int) -> int:
        """The highest degree served in ``d`` features.

        Examples
        --------
        >>> CAPABILITIES["truncated"].max_degree(1), CAPABILITIES["truncated"].max_degree(2)
        (2, 2)
        """
        return self.degree[min(max(d, 1), 3) - 1]

    def serves(self, kernel: Kernel | str, d: int) -> bool:
        """Whether it computes ``kernel`` in ``d`` features (at degree 0).

        Examples
        --------
        >>> CAPABILITIES["laplace"].serves("laplacian", 1), CAPABILITIES["laplace"].serves("gaussian", 1)
        (True, False)
        """
        k = get_kernel(kernel) if isinstance(kernel, str) else kernel
        lo, hi = self.dims
        named = self.kernels is None or k.name in self.kernels
        return named and (k.compact or not self.compact) and d >= lo and (hi is None or d <= hi)


#: one entry per registered backend (``nadaraya.backends.available`` says which are installed)
CAPABILITIES: dict[str, Capability] = {c.name: c for c in (
    Capability("reference"),
    Capability("fused", _ALL),
    Capability("windowed", compact=True),
    Capability("laplace", ("laplacian",), dims=(1, 1), degree=(2, 0, 0)),
    Capability("truncated", ("gaussian",), dims=(1, 3), degree=(2, 2, 2)),
    Capability("torch", devices=("cpu", "cuda", "mps")),
    Capability("dask", lazy=True),
    Capability("taylor", ("gaussian",), dims=(1, 3), degree=(2, 2, 2), exact=False),
    Capability("binned", ("gaussian", "logistic"), dims=(1, 2), degree=(0, 0, 0), loo=False, exact=False),
    Capability("constant", ("constant",), degree=(3, 3, 3)),
    Capability("logistic", ("logistic",), dims=(1, 1), degree=(2, 0, 0)),
)}


def why_not(name: str, kernel: Kernel | str, *, d: int, degree: int = 0, loo: bool = False,
            tol: float | None = None, dtype: str | None = None) -> str | None:
    """Why backend ``name`` cannot serve such a call, in words, or None when it can.

    Examples
    --------
    >>> why_not("laplace", "gaussian", d=1)
    "does not support kernel='gaussian' with d=1: it computes the 'laplacian' kernel in 1 feature"
    >>> why_not("truncated", "gaussian", d=2, degree=3)
    'computes local polynomial degree (moments) up to 2 in d=2; got 3'
    >>> why_not("fused", "gaussian", d=3, degree=2, loo=True) is None
    True
    """
    c = CAPABILITIES[name]
    kname = kernel if isinstance(kernel, str) else kernel.name
    if not c.serves(kernel, d):
        said = f"{_kernels_said(c)} in {_features_said(c)}"
        return f"does not support kernel={kname!r} with d={d}: it computes {said}"
    if degree > c.max_degree(d):
        return f"computes local polynomial degree (moments) up to {c.max_degree(d)} in d={d}; got {degree}"
    return _why_not_call(c, loo, tol, dtype)


def _kernels_said(c: Capability) -> str:
    if c.kernels is None:
        return "compact kernels (finite support)" if c.compact else "every kernel"
    if c.kernels == _ALL:
        return "the " + ", ".join(map(repr, _ALL)) + " kernels (not those derived from them)"
    return "the " + ", ".join(map(repr, c.kernels)) + " kernel" + ("s" if len(c.kernels) > 1 else "")


def _features_said(c: Capability) -> str:
    lo, hi = c.dims
    if hi is None:
        return "any number of features"
    return f"{lo} feature" if hi == lo == 1 else f"{lo} to {hi} features"


def _why_not_call(c: Capability, loo: bool, tol: float | None, dtype: str | None) -> str | None:
    """The parts of :func:`why_not` beyond the kernel, the features and the degree."""
    if loo and not c.loo:
        return "computes plain pooling without leave-one-out (exclude)"
    if not c.exact and tol is None:
        return ("computes within a tolerance, and tol=None asks for exact sums: pass tol (a number from "
                "1e-12 to 0.1, e.g. tol=1e-6), or leave backend='auto', which is exact with tol=None")
    if dtype is not None and str(dtype) not in c.dtypes:
        return f"computes {' or '.join(c.dtypes)} arrays; got {dtype}"
    return None


#: the cost model, nanoseconds on two cores: per (query, key) pair of the NumPy reference and of
#: the fused loop (1-D, degree 0; measured 2026-11); per point and log2 n of the windowed
#: backend's sorted prefix sums (from its 0.018 s at n = m = 2e5, Epanechnikov); per point of
#: the Laplacian's running sums (0.016 s at n = m = 1e5; with moments, about 1 + degree times that:
#: 0.34 / 0.57 ms against 0.32 at degree 0, n = m = 1e3, where the fused loop took 4-5 ms) and of a
#: sort. The k-d tree's per point, log2 n and feature (2-3 features; measured 2026-12: 16-19 us a
#: point at n = m = 4e4 in 3-D on a shared 2-core machine, taken at about a third of that); its
#: windows' pairs, hundreds of nanoseconds each, are weighed from the data by
#: ``nadaraya.backends.choose_for_data``.
NS = {"reference_pair": 6.0, "fused_pair": 0.45, "windowed_point": 3.0, "tree_point": 150.0,
      "laplace_point": 80.0, "sort_point": 60.0, "constant_term": 5.0}
#: above this many features a k-d tree's windows hold most keys: the windowed backend then costs
#: the fused loop's pairs twice over
WINDOWED_MAX_D = 3
#: the fused loop's work with the moments of degree 0, 1, 2, 3 against degree 0 (2-3 features;
#: degree 1 and 2 measured 2026-12-06 at one thread, n = 2e4 in 2-D and 1e4 in 3-D: 1.3-1.9x and
#: 1.8-3x, the compact kernels' cheap weights at the top, degree 2 from the generated loops)
FUSED_MOMENTS = (1.0, 1.6, 3.0, 12.0)
#: the fused loop's degree 2 in 4 or more features (the depth-first walk, not the generated
#: loops): 18.6x degree 0 at 4 features (one thread, n = 8e3, measured 2026-12-06)
FUSED_WALK_QUADRATIC = 15.0
#: the k-d tree's work per point (2-3 features) with the moments of a degree against degree 0:
#: ``1 + TREE_MOMENTS * degree`` (measured with the fused loop's: 1.0-1.35x at degree 1,
#: 1.2-2x at degree 2; its pairs' share is weighed in ``nadaraya.backends.choose_for_data``)
TREE_MOMENTS = 0.25


#: the windowed backend's prefix moments in 1-D (the kernels polynomial in ``|u|``), degree 0, 1,
#: 2 against degree 0 (measured at n = m = 2e5, Epanechnikov and tricube, one thread, 2026-12)
WINDOWED_MOMENTS = (1.0, 1.5, 2.0)


def _polynomial(kernel: Kernel | str) -> bool:
    """Whether a kernel is one polynomial in ``|u|`` (the windowed prefix moments serve its fits)."""
    k = get_kernel(kernel) if isinstance(kernel, str) else kernel
    return k.polynomial is not None


def cost(name: str, kernel: Kernel | str, *, n: int, m: int, d: int, degree: int = 0) -> float:
    """The modelled time of backend ``name`` for ``m`` queries against ``n`` keys in ``d``
    features with the moments of degree ``degree``, in nanoseconds, from the sizes alone;
    ``inf`` for a backend whose cost depends on the data (truncated, taylor, binned, logistic: see
    :func:`nadaraya.backends.choose_for_data`), that needs a device (torch) or Dask input.

    Examples
    --------
    >>> c = {b: cost(b, "laplacian", n=10**5, m=10**5, d=1) for b in ("reference", "fused", "laplace")}
    >>> min(c, key=c.get)
    'laplace'
    >>> cost("fused", "gaussian", n=1000, m=1000, d=1) < cost("reference", "gaussian", n=1000, m=1000, d=1)
    True
    """
    if why_not(name, kernel, d=d, degree=degree) is not None:
        return math.inf
    pairs, points = float(n) * m, float(n + m)
    log_n = math.log2(n + 2)
    columns = 1 + degree * (degree + 3) // 2
    moment_work = FUSED_MOMENTS[min(degree, 3)] * max(1, degree - 2)
    if degree == 2 and d > 3:
        moment_work = FUSED_WALK_QUADRATIC
    if name == "reference":
        return pairs * NS["reference_pair"] * columns
    if name == "fused":
        return pairs * NS["fused_pair"] * d ** 0.5 * moment_work
    if name == "windowed":
        if d > WINDOWED_MAX_D:
            return 2 * pairs * NS["fused_pair"] * d ** 0.5 * moment_work
        per = NS["windowed_point"] if d == 1 else NS["tree_point"] * d
        if d == 1 and _polynomial(kernel):  # prefix moments at every degree
            return points * log_n * per * WINDOWED_MOMENTS[min(degree, 2)] * max(1, degree - 1)
        return points * log_n * per * (columns if d == 1 else 1.0 + TREE_MOMENTS * degree)
    if name == "laplace":
        return points * (NS["laplace_point"] * (1 + degree) + NS["sort_point"] * log_n / 16)
    if name == "constant":  # a term per point and monomial (and its expansion per query)
        return points * NS["constant_term"] * math.comb(2 * degree + d, d) * (1 + degree)
    return math.inf


#: the fused backend's loop over a tree of key boxes (compact kernels in 1-3 features,
#: ``nadaraya.backends._fused_compact``), nanoseconds: per pair near a query (times
#: ``FUSED_MOMENTS`` and ``sqrt(d)``), per query and level of the tree (its walk), per key and level
#: (building it); fitted 2026-12-06 at one thread, Epanechnikov, U(0, 1)^d, m = n / 10: 2-D n = 5e4 at
#: h = 0.01, 0.03, 0.08 took 11-22, 18-33, 37-65 ms (degree 0-2), 3-D n = 2e4 at h = 0.03, 0.08, 0.15
#: took 9, 9-16, 14-32 ms, where the k-d tree took 54-163, 141-643 and 452-2650 ms
FUSED_COMPACT_NS = {"pair": 4.0, "walk": 200.0, "build": 10.0}

def fused_compact_cost(*, n: int, m: int, d: int, degree: int, pairs: float) -> float:
    """The modelled time, in nanoseconds, of the fused backend's tree of key boxes for ``m``
    queries against ``n`` keys in ``d`` features, degree ``degree``, where the supports hold
    ``pairs`` (query, key) pairs (:data:`FUSED_COMPACT_NS`).

    Examples
    --------
    >>> fused_compact_cost(n=10**5, m=10**4, d=2, degree=0, pairs=1e7) < cost(
    ...     "fused", "epanechnikov", n=10**5, m=10**4, d=2)
    True
    """
    # its keys per leaf, imported here: import nadaraya loads no numba
    from nadaraya.backends._fused_compact import LEAF

    levels = math.log2(n / LEAF + 2)
    return (pairs * FUSED_COMPACT_NS["pair"] * d ** 0.5 * FUSED_MOMENTS[min(degree, 3)]
            + (m * FUSED_COMPACT_NS["walk"] + n * FUSED_COMPACT_NS["build"]) * levels)


def table() -> str:
    """The capabilities table as text, one row per backend (what ``explain`` and the docs print).

    Examples
    --------
    >>> print(table().splitlines()[0])
    backend    kernels                 d     degree (d=1/2/3+)  loo  weights  sums       devices
    """
    head = (f"{'backend':<10} {'kernels':<23} {'d':<5} {'degree (d=1/2/3+)':<18} {'loo':<4} {'weights':<8} "
            f"{'sums':<10} devices")
    rows = [head]
    for c in CAPABILITIES.values():
        kernels = "any compact" if c.compact else ("any" if c.kernels is None else ", ".join(c.kernels))
        if c.kernels == _ALL:
            kernels = f"the {len(_ALL)} named"
        lo, hi = c.dims
        dims = f"{lo}+" if hi is None else (f"{lo}" if hi == lo else f"{lo}-{hi}")
        sums = ("lazy" if c.lazy else "exact") if c.exact else "within tol"
        degrees = "/".join("any" if g == ANY_DEGREE else str(g) for g in c.degree)
        rows.append(f"{c.name:<10} {kernels:<23} {dims:<5} {degrees:<18} "
                    f"{'yes' if c.loo else 'no':<4} {'yes' if c.weights else 'no':<8} {sums:<10} "
                    f"{', '.join(c.devices)}")
    return "\n".join(rows)
