"""The estimator with nearest-neighbour bandwidths: k resolved at fit, then predictions, standard
errors, slopes and bands from the exact rows of :mod:`nadaraya.local.neighbours`.

What differs from a fixed bandwidth (docs/local.md): ``bandwidth_`` holds ``k`` per feature (whole
numbers), the rows are dense (O(m n) per block of queries), and the heteroscedastic noise variance
smooths the squared leave-one-out residuals with a fixed bandwidth chosen by CV, as for fixed
bandwidths.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya._support.validation import warn_at_caller
from nadaraya.kernels import get as get_kernel
from nadaraya.local.job import SingularFitWarning
from nadaraya.local.neighbours import Geometry, as_bandwidth_type, as_k, predictions, rows

__all__ = ["band", "cv_results", "gradient", "pool", "predict_std", "resolve",
           "uses_neighbours"]

_F = NDArray[np.float64]


def uses_neighbours(model: Any) -> bool:
    """Whether the model's bandwidth is a number of neighbours (``bandwidth_type`` not "fixed")."""
    return as_bandwidth_type(getattr(model, "bandwidth_type", "fixed")) != "fixed"


def resolve(model: Any, X: _F, sw: _F | None, y: _F, vt: str) -> _F:
    """``k`` per feature (float64 whole numbers) from ``model.bandwidth``: given, a fraction of
    n, or chosen by ``"cv"``/``"aicc"`` (one k for every feature; the scores in ``_nn_search``)."""
    from nadaraya.bandwidth import METHODS
    from nadaraya.bandwidth.nn import choose_k

    kind = model.bandwidth_type
    n, d = X.shape
    if set(vt) != {"c"}:
        raise ValueError(f"bandwidth_type={kind!r} needs continuous columns only; got var_types={vt!r}")
    model.selection_ = None
    model._nn_search = None
    bw = model.bandwidth
    if isinstance(bw, str):
        if bw not in METHODS:
            raise ValueError(f"bandwidth={bw!r} with bandwidth_type={kind!r}: give 'cv', 'aicc', a number of "
                             "neighbours k or a fraction of n in (0, 1]")
        found = choose_k(X, y.reshape(n, -1), sw, get_kernel(model.kernel), model.degree, kind, bw,
                         model.empty)
        model._nn_search = found
        return np.full(d, float(found["k"]))
    return as_k(bw, n, d, kind).astype(np.float64)


def cv_results(search: dict[str, Any]) -> dict[str, NDArray[Any]]:
    """``cv_results_`` of a search over k: ``"k"``, ``"score"``, ``"rank"`` (1 the best), ``"stage"``."""
    scores = np.asarray(search["scores"], dtype=np.float64)
    rank = np.empty(scores.size, dtype=np.int64)
    rank[np.argsort(scores, kind="stable")] = np.arange(1, scores.size + 1)
    return {"k": np.asarray(search["ks"]), "score": scores, "rank": rank,
            "stage": np.full(scores.size, "grid", dtype=object)}


def _geometry(model: Any) -> Geometry:
    cached = model.__dict__.get("_nn_geometry")
    if cached is None or (cached.X is not model.X_fit_ and not np.array_equal(cached.X, model.X_fit_)):
        cached = Geometry(model.X_fit_, model.bandwidth_.astype(np.int64), model.bandwidth_type)
        model.__dict__["_nn_geometry"] = cached
    return cached


def _rows(model: Any, X: _F, degree: int | None = None, loo: bool = False, slopes: bool = False,
          sw: Any = "model") -> Any:
    sw = model.sample_weight_ if isinstance(sw, str) else sw
    deg = model.degree if degree is None else degree
    bad = 0
    for sl, A, G, b in rows(_geometry(model), X, sw, get_kernel(model.kernel), deg, loo=loo, slopes=slopes,
                            empty=model.empty):
        bad += b
        yield sl, A, G
    if bad:
        warn_at_caller(f"{bad} of {X.shape[0]} local polynomial systems of degree {deg} were singular: those "
                       "queries got degree 0", SingularFitWarning)


def _Y(model: Any) -> _F:
    y = np.asarray(model.y_fit_, dtype=np.float64)
    return y.reshape(y.shape[0], -1)


def pool(model: Any, X: _F, values: Any = None, sw: Any = "model") -> NDArray[np.floating]:
    """Predictions at validated ``X`` (shaped as ``y_fit_``)."""
    n = model.X_fit_.shape[0]
    Y = _Y(model) if values is None else np.asarray(values, dtype=np.float64).reshape(n, -1)
    sw = model.sample_weight_ if isinstance(sw, str) else sw
    deg = model.degree
    out, bad = predictions(_geometry(model), X, sw, get_kernel(model.kernel), deg, Y, empty=model.empty)
    if bad:
        warn_at_caller(f"{bad} of {X.shape[0]} local polynomial systems of degree {deg} were singular: "
                       "those queries got degree 0", SingularFitWarning)
    return out[:, 0] if np.ndim(model.y_fit_ if values is None else values) == 1 else out


def _training(model: Any) -> types.SimpleNamespace:
    """In-sample fits, the hat diagonal and matrix, and the leave-one-out fits (cached)."""
    cached = model.__dict__.get("_nn_training")
    if cached is not None:
        return cached
    X, Y = model.X_fit_, _Y(model)
    n = X.shape[0]
    H = np.empty((n, n))
    for sl, A, _ in _rows(model, X):
        H[sl] = A
    loo = np.empty_like(Y)
    for sl, A, _ in _rows(model, X, loo=True):
        loo[sl] = A @ Y
    sw = model.sample_weight_
    tr = types.SimpleNamespace(X=X, Y=Y, H=H, fits=H @ Y, hat=np.diag(H).copy(), loo=loo, exp=0,
                               sw=None if sw is None else np.asarray(sw, dtype=np.float64))
    model.__dict__["_nn_training"] = tr
    return tr


def noise_variance(model: Any, variance: str) -> _F:
    """``sigma^2`` at each training point (n, p), by the rule named ``variance``."""
    from nadaraya.inference.training import _check_enough, _smooth_squares

    key = f"_nn_sigma2_{variance}"
    cached = model.__dict__.get(key)
    if cached is not None:
        return cached
    _check_enough(model, variance)
    tr = _training(model)
    s = np.ones(tr.X.shape[0]) if tr.sw is None else tr.sw
    if variance == "homoscedastic":
        dof = s.sum() - tr.hat.sum()
        sigma2 = np.broadcast_to((s @ (tr.Y - tr.fits) ** 2) / max(dof, 1.0), tr.Y.shape).copy()
    else:
        sigma2 = _smooth_squares(model, tr)
    model.__dict__[key] = sigma2
    return sigma2


def _per_key(model: Any, variance: str) -> _F:
    sw = model.sample_weight_
    sigma2 = noise_variance(model, variance)
    return sigma2 if sw is None else sigma2 / np.where(sw > 0, sw, 1.0)[:, None]


def predict_std(model: Any, X: Any, variance: str, degree: int | None = None,
                slopes: bool = False, clusters: Any = None) -> tuple[_F, _F]:
    """Predictions (m, p) (or slopes (m, d, p)) and their standard errors at validated ``X``."""
    if variance not in ("heteroscedastic", "homoscedastic") or clusters is not None:
        raise NotImplementedError(f"nearest-neighbour bandwidths take variance='heteroscedastic' or "
                                  f"'homoscedastic' and no clusters; got variance={variance!r}")
    Y, per_key = _Y(model), _per_key(model, variance)
    m, d, p = X.shape[0], X.shape[1], Y.shape[1]
    mean = np.empty((m, d, p) if slopes else (m, p))
    var = np.empty_like(mean)
    for sl, A, G in _rows(model, X, degree, slopes=slopes):
        if slopes:
            mean[sl] = np.einsum("bfn,np->bfp", G, Y)
            var[sl] = np.einsum("bfn,np->bfp", G**2, per_key)
        else:
            mean[sl] = A @ Y
            var[sl] = A**2 @ per_key
    return mean, np.sqrt(np.maximum(var, 0.0))


def gradient(model: Any, X: Any) -> _F:
    """Slopes (m, d, p) at validated ``X``: the local polynomial's (degree >= 1), else the
    derivative of the Nadaraya-Watson ratio (``h(q)`` moving with ``q`` for ``generalized_nn``)."""
    Y = _Y(model)
    out = np.empty((X.shape[0], X.shape[1], Y.shape[1]))
    for sl, _, G in _rows(model, X, slopes=True):
        out[sl] = np.einsum("bfn,np->bfp", G, Y)
    return out


def _scale(model: Any) -> _F:
    """The wild bootstrap's leverage factor per training point (see
    :func:`nadaraya.inference.training.leverage_scale`), from the dense hat matrix."""
    tr = _training(model)
    s = np.ones(tr.X.shape[0]) if tr.sw is None else np.where(tr.sw > 0, tr.sw, 1.0)
    var = (1.0 - 2.0 * tr.hat) / s + (tr.H**2) @ (1.0 / s)
    return np.sqrt((1.0 / s) / np.clip(var, 1e-12 / s, None))


def band(model: Any, X: _F, level: float, method: str, kind: str, n_boot: int, random_state: Any,
         variance: str, clusters: Any = None, bias_bandwidth: Any = None) -> Any:
    """:meth:`nadaraya.NadarayaWatson.confidence_band` of a nearest-neighbour model."""
    if bias_bandwidth is not None:
        raise NotImplementedError("nearest-neighbour bandwidths take no bias_bandwidth")
    from nadaraya.inference.bands import KINDS, METHODS, Band, _shape
    from nadaraya.inference.bootstrap import multipliers
    from nadaraya.inference.limits import check_band
    from nadaraya.inference.training import _check

    _check("method", method, METHODS)
    _check("kind", kind, KINDS)
    level, z, rng = check_band(model, X, level, method, kind, n_boot, random_state)
    degree = model.degree + 1 if method == "rbc" else None
    mean, std = predict_std(model, X, variance, degree=degree, clusters=clusters)
    estimate = pool(model, X).reshape(mean.shape) if method == "rbc" else mean
    if method != "bootstrap" and kind == "pointwise":
        return _shape(model, Band(np.asarray(estimate, dtype=np.float64), mean - z * std, mean + z * std))
    assert rng is not None
    tr = _training(model)
    if method == "bootstrap":
        E, law = (tr.Y - tr.fits) * _scale(model)[:, None], "mammen"
    else:
        E, law = np.sqrt(noise_variance(model, variance)), "gaussian"
    V = multipliers(rng, tr.X.shape[0], int(n_boot), law).astype(np.float64)
    dev = np.empty((X.shape[0], E.shape[1], int(n_boot)))
    for sl, A, _ in _rows(model, X, degree):
        for c in range(E.shape[1]):
            dev[sl, c] = A @ (E[:, c : c + 1] * V)
    alpha = 1.0 - level
    if kind == "pointwise":
        lo_q, hi_q = np.quantile(dev, (alpha / 2, 1 - alpha / 2), axis=2)
        return _shape(model, Band(estimate, mean - hi_q, mean - lo_q))
    scale = std if method != "bootstrap" else np.std(dev, axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        zz = np.where(scale[:, :, None] > 0, np.abs(dev) / scale[:, :, None], 0.0)
    crit = np.quantile(np.max(zz, axis=0), level, axis=1)
    return _shape(model, Band(estimate, mean - crit * scale, mean + crit * scale))
