"""What inference reads from a fitted model: the training fit, leverages, residual scales, noise."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya.inference.variance import variances
from nadaraya.local import fit as _fit
from nadaraya.local import job as _job
from nadaraya.local.solve import hat_diagonal, solve
from nadaraya.partials import Partials, merge

NOISE = ("heteroscedastic", "homoscedastic")
VARIANCES = (*NOISE, "hc0", "hc1", "hc2", "hc3", "nn")  # the last five: nprobust's (inference.robust)


def unit_exponent(a: NDArray[np.floating]) -> NDArray[np.int64]:
    """The powers of two ``e``, one per column (the last axis) of a 2-D array (one in all for
    a 1-D one), such that ``a * 2**-e`` has its largest finite magnitude in ``[1/2, 1)`` (0
    where there is none): each output is scaled alone, whatever the others' scales.

    Examples
    --------
    >>> unit_exponent(np.array([[3.0, 1e-3], [-1.0, 0.0]])).tolist(), int(unit_exponent(np.zeros(2)))
    ([2, -9], 0)
    """
    a = np.asarray(a, dtype=np.float64)
    mag = np.where(np.isfinite(a), np.abs(a), 0.0)
    top = mag.reshape(-1, a.shape[-1]).max(axis=0, initial=0.0) if a.ndim > 1 else mag.max(initial=0.0)
    return np.where(top > 0, np.frexp(top)[1], 0).astype(np.int64)


def _check(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not valid; choose one of {', '.join(map(repr, allowed))}")
    return str(value)


def _rng(random_state: Any) -> np.random.Generator:
    from nadaraya.inference.limits import as_random_state

    return as_random_state(random_state)


@dataclass
class _Training:
    """The fitted model's training data as the smoother sees them, and what its residuals give."""

    job: _job.Job  # the training points as queries
    X: NDArray[np.float64]
    Y: NDArray[np.float64]  # (n, p)
    sw: NDArray[np.float64] | None
    fits: NDArray[np.float64]  # in-sample fits (n, p)
    loo: NDArray[np.float64]  # leave-one-out fits (n, p)
    hat: NDArray[np.float64]  # H_ii (n,)
    loo_parts: Partials  # the leave-one-out partials of the training points
    exp: NDArray[np.int64] | int = 0  # unit_exponent(Y), per output: inference works on Y * 2**-exp

    @property
    def Yu(self) -> NDArray[np.float64]:
        """The responses in the units of inference, ``Y * 2**-exp``."""
        return np.ldexp(self.Y, -self.exp)


def training(model: Any) -> _Training:
    """In-sample and leave-one-out fits and the hat-matrix diagonal of a fitted model (cached)."""
    cached = getattr(model, "_inference_cache", None)
    if cached is not None:
        return cached
    keys, values, sw = model._training_data()
    X = np.asarray(keys, dtype=np.float64)
    Y = np.asarray(values, dtype=np.float64).reshape(X.shape[0], -1)
    e = unit_exponent(Y)
    Yu = np.ldexp(Y, -e)  # each output in its own units: the fits below are exact multiples
    job = model._job(X, X, Yu, sw)
    n = X.shape[0]
    exclude = np.arange(n)
    loo_parts = _fit.partials(job, exclude, _backend(model))
    loo_fit = solve(loo_parts, job.degree, job.call.bandwidth)
    loo = np.ldexp(loo_fit.estimate, job.call.value_exp)
    # H_ii and the in-sample fits of the fit actually used at each x_i (the own term merged
    # back where the leave-one-out fit fell back to a lower degree; a point alone fits itself)
    hat, fits = hat_diagonal(loo_parts, loo_fit, _own_log(job), np.ldexp(Yu, -job.call.value_exp), job.degree,
                             job.call.bandwidth)
    fits = np.ldexp(fits, job.call.value_exp)
    weights = None if sw is None else np.asarray(sw, dtype=np.float64)
    out = _Training(job, X, Y, weights, np.ldexp(fits, e), np.ldexp(loo, e), hat, loo_parts, e)
    model._inference_cache = out
    return out


def _own_log(job: _job.Job) -> NDArray[np.float64]:
    """Each training point's log weight on itself, on the scale of the partial sums (its
    kernel at 0 in every continuous column, its sample weight, its categorical factors)."""
    k = job.call.kernel
    zero = np.zeros(1)
    log0 = float((k.log_profile(zero) if k.log_domain else np.log(k.profile(zero)))[0])  # type: ignore[misc]
    sw = job.call.sample_weight
    with np.errstate(divide="ignore"):  # a point of weight 0 has no weight on itself (log 0)
        log_s = np.zeros(job.call.keys.shape[0]) if sw is None else np.log(sw.astype(float))
    own = job.cont.size * log0 + log_s
    if job.cat is not None and job.cat.kernel == "classic":
        own = own + np.log1p(-job.cat.lambdas).sum()
    return np.asarray(own)


def _own_partials(job: _job.Job, like: Partials) -> Partials:
    """Each training point's own term as partials of the job whose queries are its keys: log
    weight :func:`_own_log`, its value, and moments 0 (its offset from itself is 0)."""
    dtype = like.weight.dtype
    m = job.call.keys.shape[0]
    return Partials(
        _own_log(job).astype(dtype), np.ones(m, dtype=dtype), job.call.values.reshape(m, -1).astype(dtype),
        tuple(np.zeros_like(a) for a in like.moments),
    )


def forget(model: Any) -> None:
    """Drop what a previous fit cached for inference (called by ``fit``)."""
    for key in ("_inference_cache", "_sigma2_homoscedastic", "_sigma2_heteroscedastic", "_residual_scale",
                "_nn_geometry", "_nn_training", "_nn_sigma2_homoscedastic", "_nn_sigma2_heteroscedastic"):
        model.__dict__.pop(key, None)


def _backend(model: Any) -> str:
    return model.backend if model.backend != "dask" else "auto"


def noise_variance(model: Any, variance: str) -> NDArray[np.float64]:
    """``sigma^2`` at each training point (in the order of ``X_fit_``), (n, p), by the rule
    named ``variance`` (in the units of ``y`` squared)."""
    return np.ldexp(_unit_variance(model, variance), 2 * training(model).exp)


def _unit_variance(model: Any, variance: str) -> NDArray[np.float64]:
    """:func:`noise_variance` in the units of inference (``y * 2**-exp``, squared), cached."""
    _check("variance", variance, NOISE)
    key = f"_sigma2_{variance}"
    cached = getattr(model, key, None)
    if cached is not None:
        return cached
    _check_enough(model, variance)
    tr = training(model)
    s = np.ones(tr.X.shape[0]) if tr.sw is None else tr.sw
    if variance == "homoscedastic":
        resid = np.ldexp(tr.Y - tr.fits, -tr.exp)
        dof = s.sum() - tr.hat.sum()
        sigma2 = np.broadcast_to((s @ resid**2) / max(dof, 1.0), tr.Y.shape).copy()
    else:
        sigma2 = _smooth_squares(model, tr)
    setattr(model, key, sigma2)
    return sigma2


def _check_enough(model: Any, variance: str) -> None:
    """A ValueError naming ``variance`` where the model has too few training points of positive
    weight to estimate the noise variance: 2 (one residual degree of freedom), 3 for the
    heteroscedastic rule (its bandwidth is chosen by cross-validation)."""
    sw = model.sample_weight_
    count = int(model.X_fit_.shape[0] if sw is None else np.count_nonzero(np.asarray(sw) > 0))
    if count < 2:
        raise ValueError(f"standard errors need the noise variance, estimated from the residuals: at least 2 "
                         f"training points of positive weight (3 for variance='heteroscedastic'); this model "
                         f"has {count}")
    if count < 3 and variance == "heteroscedastic":
        raise ValueError(f"variance='heteroscedastic' smooths the squared leave-one-out residuals with a "
                         f"bandwidth chosen by cross-validation, which needs at least 3 training points of "
                         f"positive weight; this model has {count}: use variance='homoscedastic' (one noise "
                         "variance for every point)")


def _smooth_squares(model: Any, tr: _Training) -> NDArray[np.float64]:
    """The squared leave-one-out residuals smoothed by Nadaraya-Watson, bandwidth by CV."""
    import warnings

    from nadaraya.bandwidth import BandwidthWarning, select_bandwidth

    r2 = np.ldexp(tr.Y - tr.loo, -tr.exp) ** 2
    out = np.full_like(r2, np.nan)
    vt = getattr(model, "var_types_", None)
    for c in range(r2.shape[1]):
        # a point with no other key of positive weight (alone in its category at lambda = 0)
        # has no leave-one-out residual: the smooth is of the others, read at every point
        known = np.isfinite(r2[:, c])
        if not known.any():
            continue
        Xk, sw = tr.X[known], None if tr.sw is None else tr.sw[known]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BandwidthWarning)
            sel = select_bandwidth(
                Xk,
                r2[known, c],
                kernel=model.kernel,
                sample_weight=sw,
                var_types=vt,
                categorical_kernel=model.categorical_kernel,
                per_feature=tr.X.shape[1] > 1,
            )
        job = _job.prepare(
            tr.X,
            Xk,
            r2[known, c],
            kernel=model.kernel,
            bandwidth=sel.bandwidth,
            sample_weight=sw,
            degree=0,
            var_types=vt,
            categorical_kernel=model.categorical_kernel,
            levels=model._cat_levels(),
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out[:, c] = _fit.pool(job, "nearest", backend=_backend(model))
    return np.maximum(out, 0.0)


def residual_scale(model: Any) -> NDArray[np.float64]:
    """:func:`leverage_scale` of the fitted model's training points (cached)."""
    cached = getattr(model, "_residual_scale", None)
    if cached is None:
        tr = training(model)
        cached = model._residual_scale = leverage_scale(tr.job, tr.sw, _backend(model), tr.loo_parts)
    return cached


def leverage_scale(
    job: _job.Job, sw: NDArray[np.float64] | None, backend: str = "auto", loo: Partials | None = None
) -> NDArray[np.float64]:
    """The factor that gives each in-sample residual ``e_i`` of a job whose queries are its keys
    the noise's own variance: ``sqrt((1 / s_i) / Var(e_i / sigma))`` with ``Var(e_i / sigma) =
    (1 - 2 H_ii) / s_i + sum_j H_ij^2 / s_j`` (``s`` the sample weights, 1 without; a row of
    weight ``s`` varies by ``sigma^2 / s``); without weights ``1 / sqrt(1 - 2 H_ii + sum_j H_ij^2)``.
    The wild bootstrap multiplies the residuals by it. ``H_ii`` comes from the job's partials,
    ``sum_j H_ij^2 / s_j`` from the variance pass with ``sigma^2 = 1``: two passes of the engine,
    or one given the job's leave-one-out partials ``loo`` (each query's own term merged back)."""
    parts = _fit.partials(job, None, backend) if loo is None else merge(loo, _own_partials(job, loo))
    fit = solve(parts, job.degree, job.call.bandwidth)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        hii = np.exp(_own_log(job) - parts.shift - np.log(parts.weight)) * fit.inverse00
    s = np.ones(job.call.keys.shape[0]) if sw is None else np.where(sw > 0, sw, 1.0)
    unit = variances(job, parts, 1.0 / s, backend, used=fit.degree)[:, 0]  # the degree H_ii's fit used
    var = (1.0 - 2.0 * hii) / s + unit
    return np.sqrt((1.0 / s) / np.clip(np.nan_to_num(var, nan=1.0 / s), 1e-12 / s, None))
