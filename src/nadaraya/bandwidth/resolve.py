"""The estimator's bandwidth= resolved to numbers: rules, searches, per-feature and mixed bandwidths."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya._support.validation import as_bandwidth, as_real
from nadaraya.bandwidth._objective import METHODS
from nadaraya.bandwidth.plugin import PLUGINS
from nadaraya.bandwidth.rules import RULES
from nadaraya.kernels import get as get_kernel
from nadaraya.local.mixed import as_categorical_kernel, lambda_bounds

#: every string the estimator's ``bandwidth`` takes: the searches, the rules of thumb, nprobust's plug-ins
BANDWIDTH_NAMES: tuple[str, ...] = (*METHODS, *RULES, *PLUGINS)


def _bandwidth_hint(text: str, allowed: bool = True) -> str:
    """What to pass instead of an unknown bandwidth string: the number it spells, or the
    closest rule name ("" for none without ``allowed``), then what is allowed."""
    import difflib

    names = BANDWIDTH_NAMES
    rest = f" (pass a positive number, one per feature, or one of {', '.join(map(repr, names))})"
    rest = rest if allowed else ""
    try:
        number = float(text)
    except ValueError:
        close = difflib.get_close_matches(text.strip().lower(), names, n=1, cutoff=0.6)
        return f"did you mean {close[0]!r}?{rest}" if close else rest.strip(" ()")
    return f"it is a string; pass the number {number!r} itself{rest}"


def _cv_results(selection: Any, names: list[str] | None = None) -> dict[str, NDArray[Any]] | None:
    """A :class:`~nadaraya.bandwidth.BandwidthSelection`'s search as a dict of 1-d arrays, one
    entry per bandwidth evaluated (what ``pd.DataFrame`` reads); None for no search."""
    if selection is None:
        return None
    from scipy.stats import rankdata

    tried = np.asarray(selection.search["bandwidths"], dtype=np.float64)
    scores = np.asarray(selection.search["scores"], dtype=np.float64)
    d = tried.shape[1]
    if d == 1:
        out: dict[str, NDArray[Any]] = {"bandwidth": tried[:, 0].copy()}
    else:
        labels = names if names is not None and len(names) == d else [str(j) for j in range(d)]
        out = {f"bandwidth_{label}": tried[:, j].copy() for j, label in enumerate(labels)}
    out["score"] = scores.copy()
    # 1 for the best (lowest) score; NaN would rank last, ties share the smaller rank
    out["rank"] = rankdata(np.where(np.isnan(scores), np.inf, scores), method="min").astype(np.int64)
    out["stage"] = np.asarray(selection.search["stages"], dtype=object).copy()
    return out


def resolve_bandwidth(
    model: Any,
    X: NDArray[np.float64],
    sample_weight: NDArray[np.float64] | None,
    y: NDArray[np.float64],
    notes: list[str],
    vt: str | None = None,
    levels: NDArray[np.int64] | None = None,
) -> NDArray[np.float64]:
    """The bandwidth per feature (a categorical column's entry is its lambda), and
    ``selection_``, from validated training data that it trusts (the bandwidth package's
    private entry points do not validate again): ``X`` (n, d) and ``y`` (n,) or (n, p)
    finite float64, ``sample_weight`` non-negative or None, ``vt`` the checked var_types
    and ``levels`` from :func:`_levels`. What the search finds worth a warning goes to
    ``notes`` (``fit`` warns once)."""
    from nadaraya.bandwidth import METHODS
    from nadaraya.bandwidth.plugin import PLUGINS, resolve_plugin
    from nadaraya.bandwidth.rules import _rule_of_thumb
    from nadaraya.bandwidth.search import _select_bandwidth

    n, d = X.shape
    vt = "c" * d if vt is None else vt
    levels = np.zeros(d, dtype=np.int64) if levels is None else levels
    plain = model.degree == 0 and vt == "c" * d
    ck = as_categorical_kernel(model.categorical_kernel)
    bw = model.bandwidth
    kernel = get_kernel(model.kernel)
    model.selection_ = None
    model.__dict__.pop("bias_bandwidth_", None)
    if isinstance(bw, str) and bw in PLUGINS:  # nprobust's plug-in bandwidths (1-D)
        return resolve_plugin(model, X, y, sample_weight, vt)
    if isinstance(bw, str):
        if bw in METHODS and (kernel.name != "constant" or vt != "c" * d):
            Y = np.ascontiguousarray(y.reshape(n, -1))
            backend = model.backend if model.backend != "dask" else "auto"
            local: dict[str, Any] = {} if plain else dict(degree=model.degree, var_types=vt,
                                                           categorical_kernel=ck)
            model.selection_ = _select_bandwidth(X, Y, sample_weight, kernel, bw, d > 1, backend,
                                                 notes=notes, tol=model.tol if plain else None, **local)
            return np.asarray(model.selection_.bandwidth, dtype=np.float64)
        if bw in METHODS:  # the constant kernel: every bandwidth gives the same fit
            bw = "scott"  # else one of RULES: the estimator's _parameter_constraints
        if plain:
            return _rule_of_thumb(X, bw, kernel, sample_weight)
        h = _default_lambdas(vt, levels, ck, n)
        cont = [j for j, t in enumerate(vt) if t == "c"]
        if cont:
            h[cont] = _rule_of_thumb(np.ascontiguousarray(X[:, cont]), bw, kernel, sample_weight)
        return h
    if plain:
        return as_bandwidth(bw, d)
    return _mixed_bandwidth(bw, vt, levels, ck, getattr(model, "feature_names_in_", None))


def _default_lambdas(
    vt: str, levels: NDArray[np.int64], categorical_kernel: str, n: int
) -> NDArray[np.float64]:
    """The lambdas a rule of thumb gives the categorical columns (0 in the continuous ones):
    ``high * min(n ** (-2 / (4 + q)), 1/2)``, ``high`` the top of the column's lambda range and
    ``q`` the number of continuous columns. The rate is that of the MSE-optimal lambda (Li and
    Racine, 2004: lambda shrinks like h**2); the cap keeps Wang-van Ryzin's lambda below 1."""
    q = vt.count("c")
    t = min(float(max(n, 1)) ** (-2.0 / (4 + q)), 0.5)
    out = np.zeros(len(vt))
    for j, kind in enumerate(vt):
        if kind != "c":
            out[j] = lambda_bounds(kind, int(levels[j]), categorical_kernel)[1] * t
    return out


def _mixed_bandwidth(
    bw: Any, vt: str, levels: NDArray[np.int64], categorical_kernel: str, names: Any = None
) -> NDArray[np.float64]:
    """A numeric bandwidth for a local or mixed fit: one entry per column, positive and finite in
    the continuous columns, each categorical column's lambda in its kernel's range (a scalar
    only when every column is continuous)."""
    d = len(vt)
    if "o" not in vt and "u" not in vt:
        return as_bandwidth(bw, d)
    h = as_real("bandwidth", bw).astype(np.float64)
    if h.shape != (d,):
        raise ValueError(
            f"bandwidth={bw!r} must have one entry per column ({d}, var_types={vt!r}): a bandwidth for "
            "each continuous column and a lambda for each categorical one"
        )
    for j, kind in enumerate(vt):
        label = f"feature {str(names[j])!r}" if names is not None else f"feature {j}"
        if kind == "c":
            if not (np.isfinite(h[j]) and h[j] > 0):
                raise ValueError(f"bandwidth entry {float(h[j])!r} of {label} (continuous) must be positive "
                                 "and finite")
            continue
        low, high, closed = lambda_bounds(kind, int(levels[j]), categorical_kernel)
        if not (np.isfinite(h[j]) and low <= h[j] and (h[j] <= high if closed else h[j] < high)):
            what = "ordered" if kind == "o" else f"unordered, c = {levels[j]} categories"
            raise ValueError(
                f"bandwidth entry {float(h[j])!r} of {label} ({what}) is its lambda "
                f"(categorical_kernel={categorical_kernel!r}) and must lie in [{low:g}, {high:g}"
                + ("]" if closed else ")")
            )
    return h
