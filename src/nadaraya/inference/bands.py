"""Standard errors of the fit and confidence bands: the Band record and how each method builds it."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from nadaraya.inference.bootstrap import quantiles, replicates
from nadaraya.inference.training import (
    NOISE,
    VARIANCES,
    _backend,
    _check,
    _unit_variance,
    noise_variance,
    residual_scale,
    training,
    unit_exponent,
)
from nadaraya.inference.variance import variances
from nadaraya.local import fit as _fit
from nadaraya.local.fills import fallback_variances

METHODS = ("asymptotic", "bootstrap", "rbc")


KINDS = ("pointwise", "simultaneous")


class _Edges(NamedTuple):
    estimate: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]


class Band(_Edges):
    """A confidence band ``(estimate, lower, upper)``; ``center``: the point it is built around (the
    bias-corrected estimate for ``method="rbc"``), ``se``: the standard error it is built on."""

    center: Any = None  # set by __new__; the class's None is what _make and _replace leave
    se: Any = None

    def __new__(cls, estimate: Any, lower: Any, upper: Any, center: Any = None, se: Any = None) -> Band:
        self = super().__new__(cls, estimate, lower, upper)
        self.center = estimate if center is None else center
        self.se = se
        return self


def predict_std(
    model: Any, X: NDArray[np.float64], variance: str, degree: int | None = None, slopes: bool = False,
    clusters: Any = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Predictions (m, p) (or slopes (m, d, p)) and their standard errors at validated ``X``."""
    if variance not in NOISE or clusters is not None:  # nprobust's sandwich variances
        from nadaraya.inference.robust import robust_predict_std

        return robust_predict_std(model, X, variance, clusters, slopes)
    mean, std = _unit_predict_std(model, X, variance, degree, slopes)
    e = training(model).exp
    return np.ldexp(mean, e), np.ldexp(std, e)


def _unit_predict_std(
    model: Any, X: NDArray[np.float64], variance: str, degree: int | None = None, slopes: bool = False
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """:func:`predict_std` in the units of inference (``y * 2**-exp``)."""
    tr = training(model)
    sigma2 = _unit_variance(model, variance)
    job = model._job(X, tr.X, tr.Yu, tr.sw)
    job.tol = None if slopes else model.tol  # both passes (first and squared weights) within tol
    if degree is not None:
        job = dataclasses.replace(job, degree=degree)
    if slopes and job.degree == 0:
        parts = _fit.partials(dataclasses.replace(job, degree=1), None, _backend(model))
    else:
        parts = _fit.partials(job, None, _backend(model))
    # a row of sample weight s stands for s observations (or has variance sigma^2 / s): each
    # key's value varies by sigma_i^2 / s_i
    per_key = sigma2 if tr.sw is None else sigma2 / np.where(tr.sw > 0, tr.sw, 1.0)[:, None]
    if slopes:
        used = None
        if job.degree >= 1:  # the slopes of the fits actually used (a lower degree where singular)
            _, fit = _fit.fitted(job, parts, model.empty)
            used = fit.degree
            grad = np.full((X.shape[0], job.d, tr.Y.shape[1]), np.nan)
            grad[:, job.cont, :] = fit.slope * job.per_x()[None, :, None]
        else:
            grad = _fit.gradient(job, model.empty, backend=_backend(model))
        var = variances(job, parts, per_key, _backend(model), slopes=True, used=used)
        std = np.sqrt(np.where(var < 0, 0.0, var))  # a variance of 0 can round to -1e-30
        out = np.full((X.shape[0], job.d, tr.Y.shape[1]), np.nan)
        out[:, job.cont, :] = std[:, 1:, :] * job.per_x()[None, :, None]
        out[np.isnan(grad)] = np.nan  # no slope, no standard error
        return grad, out
    mean, fit = _fit.fitted(job, parts, model.empty)
    var = variances(job, parts, per_key, _backend(model), used=fit.degree)
    fallback_variances(job, parts, model.empty, per_key, var)
    var[np.isnan(mean)] = np.nan
    return mean, np.sqrt(np.where(var < 0, 0.0, var))


def _unit_fitted(model: Any, X: NDArray[np.float64]) -> NDArray[np.float64]:
    """The model's predictions at validated ``X``, (m, p), in the units of inference."""
    tr = training(model)
    job = model._job(X, tr.X, tr.Yu, tr.sw)
    out, _ = _fit.fitted(job, _fit.partials(job, None, _backend(model)), model.empty)
    return out


def confidence_band(
    model: Any,
    X: NDArray[np.float64],
    level: float,
    method: str,
    kind: str,
    n_boot: int,
    random_state: Any,
    variance: str,
    multiplier: str = "mammen",
    clusters: Any = None,
    bias_bandwidth: Any = None,
) -> Band:
    """See :meth:`nadaraya.NadarayaWatson.confidence_band`."""
    from nadaraya.inference.limits import check_band

    own = getattr(model, "_own_band", None)  # nearest-neighbour bandwidths: the model's own rows
    if own is not None and (out := own(X, level, method, kind, n_boot, random_state, variance, clusters,
                                       bias_bandwidth)) is not None:
        return out  # type: ignore[no-any-return]
    _check("method", method, METHODS)
    _check("kind", kind, KINDS)
    _check("variance", variance, VARIANCES)
    level, z, rng = check_band(model, X, level, method, kind, n_boot, random_state)
    if variance not in NOISE or clusters is not None or bias_bandwidth is not None:  # nprobust's way
        from nadaraya.inference.rbc import rbc_band

        s2 = noise_variance(model, variance) if variance in NOISE else None
        out = rbc_band(model, X, z, method, kind, variance, clusters, bias_bandwidth, s2)
        return _shape(model, Band(*out))
    tr = training(model)
    e = tr.exp  # everything below is in the units y * 2**-e; the band is scaled back at the end

    def band(estimate: Any, lower: Any, upper: Any, center: Any, se: Any) -> Band:
        return _shape(model, Band(*(np.ldexp(a, e) for a in (estimate, lower, upper, center, se))))

    degree = model.degree + 1 if method == "rbc" else None
    std: NDArray[np.float64] | None = None
    if method == "bootstrap":  # its spread comes from the replicates: no variance pass
        mean = _unit_fitted(model, X)
    else:
        mean, std = _unit_predict_std(model, X, variance, degree=degree)
    estimate = _unit_fitted(model, X) if method == "rbc" else mean
    alpha = 1.0 - level
    if method in ("asymptotic", "rbc") and kind == "pointwise":
        assert std is not None
        return band(estimate, mean - z * std, mean + z * std, mean, std)
    assert rng is not None  # the bands below draw replicates
    job = model._job(X, tr.X, tr.Yu, tr.sw)
    if degree is not None:
        job = dataclasses.replace(job, degree=degree)
    if method == "bootstrap":
        E = np.ldexp(tr.Y - tr.fits, -e) * residual_scale(model)[:, None]
        kind_v = multiplier
    else:  # Gaussian multipliers on sigma: the asymptotic law of the whole curve
        E = np.sqrt(_unit_variance(model, variance))
        kind_v = "gaussian"
    # the replicates are single precision: they are drawn for E * 2**-r, whose largest is in [1/2, 1)
    r = unit_exponent(E)
    dev = replicates(job, np.ldexp(E, -r), rng, int(n_boot), kind_v, empty=model.empty)
    if kind == "pointwise":
        lo_q, hi_q = quantiles(dev, (alpha / 2, 1 - alpha / 2), copy=False)
        se = np.ldexp(np.std(dev, axis=2, dtype=np.float64), r)
        return band(estimate, mean - np.ldexp(hi_q, r), mean - np.ldexp(lo_q, r), mean, se)
    scale = std if std is not None else np.ldexp(np.std(dev, axis=2, dtype=np.float64), r)
    with np.errstate(divide="ignore", invalid="ignore"):  # a point without noise deviates by 0
        unit = np.ldexp(scale, -r)[:, :, None]
        z = np.where(unit > 0, np.abs(dev) / unit, 0.0)
    t = np.max(np.where(np.isnan(z), -np.inf, z), axis=0)  # (p, n_boot): sup over the points
    crit = np.quantile(t, level, axis=1)  # (p,)
    return band(estimate, mean - crit * scale, mean + crit * scale, mean, scale)


def _shape(model: Any, band: Band) -> Band:
    """One output column squeezed as ``predict`` does."""
    if np.ndim(model.y_fit_) > 1:
        return band
    parts = (*band, band.center, band.se)
    return Band(*(None if a is None else np.asarray(a)[:, 0] for a in parts))
