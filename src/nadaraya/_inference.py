"""Inference for fitted NadarayaWatson models: standard errors, confidence bands, significance tests.

Every method here rests on one fact: with the bandwidth fixed, a local polynomial fit is a
linear smoother, ``f(x) = sum_i a_i(x) y_i``. So

- its variance given the design is ``sum_i a_i(x)^2 sigma^2(x_i)``, computed exactly by
  :mod:`nadaraya._uncertainty` (one more pass, of squared weights);
- a bootstrap replicate on new responses ``y*`` is the same smoother applied to ``y*``: all
  ``n_boot`` replicates are output columns of ONE pooling pass (in blocks of columns, so memory
  stays within the working-memory setting), never ``n_boot`` refits;
- a replicate's derivative is the same derivative applied to ``y*`` (significance tests).

**Units.** Everything here is scale-equivariant in ``y``: the responses are divided by a power
of two (exact; one per output) that brings their largest magnitude into ``[1/2, 1)``
(:func:`unit_exponent`), every variance, replicate and statistic is computed in those units,
and the results are multiplied back. So squares of residuals neither overflow nor underflow,
and the bootstrap's single-precision replicates stay within single precision's range, at any
finite scale of ``y``.

``sigma^2`` comes from the residuals: ``"homoscedastic"`` is ``sum s_i e_i^2 / (N - tr H)``
(``e_i`` the in-sample residuals, ``N = sum s_i``, ``H_ii`` the hat-matrix diagonal);
``"heteroscedastic"`` is a Nadaraya-Watson smooth of the squared leave-one-out residuals, its
bandwidth chosen by least-squares cross-validation, read at the training points.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from . import _fit
from ._bootstrap import quantiles, replicates
from ._fills import fallback_variances
from ._local import hat_diagonal, solve
from ._uncertainty import variances
from .partials import Partials, merge

__all__ = ["Band", "InferenceMixin"]

METHODS = ("asymptotic", "bootstrap", "rbc")
KINDS = ("pointwise", "simultaneous")
VARIANCES = ("heteroscedastic", "homoscedastic")


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


class Band(NamedTuple):
    """A confidence band: the estimate and the band's lower and upper edges at each point."""

    estimate: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]


def _check(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not valid; choose one of {', '.join(map(repr, allowed))}")
    return str(value)


def _rng(random_state: Any) -> np.random.Generator:
    from ._boot_limits import as_random_state

    return as_random_state(random_state)


@dataclass
class _Training:
    """The fitted model's training data as the smoother sees them, and what its residuals give."""

    job: _fit.Job  # the training points as queries
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


def _own_log(job: _fit.Job) -> NDArray[np.float64]:
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


def _own_partials(job: _fit.Job, like: Partials) -> Partials:
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
    _check("variance", variance, VARIANCES)
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

    from .bandwidth import BandwidthWarning, select_bandwidth

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
        job = _fit.prepare(
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


def predict_std(
    model: Any, X: NDArray[np.float64], variance: str, degree: int | None = None, slopes: bool = False
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Predictions (m, p) (or slopes (m, d, p)) and their standard errors at validated ``X``."""
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


def residual_scale(model: Any) -> NDArray[np.float64]:
    """:func:`leverage_scale` of the fitted model's training points (cached)."""
    cached = getattr(model, "_residual_scale", None)
    if cached is None:
        tr = training(model)
        cached = model._residual_scale = leverage_scale(tr.job, tr.sw, _backend(model), tr.loo_parts)
    return cached


def leverage_scale(
    job: _fit.Job, sw: NDArray[np.float64] | None, backend: str = "auto", loo: Partials | None = None
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
    unit = variances(job, parts, 1.0 / s, backend)[:, 0]
    var = (1.0 - 2.0 * hii) / s + unit
    return np.sqrt((1.0 / s) / np.clip(np.nan_to_num(var, nan=1.0 / s), 1e-12 / s, None))


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
) -> Band:
    """See :meth:`nadaraya.NadarayaWatson.confidence_band`."""
    from ._boot_limits import check_band

    own = getattr(model, "_own_band", None)  # nearest-neighbour bandwidths: the model's own rows
    if own is not None and (out := own(X, level, method, kind, n_boot, random_state, variance)) is not None:
        return out  # type: ignore[no-any-return]

    _check("method", method, METHODS)
    _check("kind", kind, KINDS)
    level, z, rng = check_band(model, X, level, method, kind, n_boot, random_state)
    tr = training(model)
    e = tr.exp  # everything below is in the units y * 2**-e; the band is scaled back at the end

    def band(estimate: NDArray[np.float64], lower: NDArray[np.float64], upper: NDArray[np.float64]) -> Band:
        return _shape(model, Band(*(np.ldexp(a, e) for a in (estimate, lower, upper))))

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
        return band(estimate, mean - z * std, mean + z * std)
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
        return band(estimate, mean - np.ldexp(hi_q, r), mean - np.ldexp(lo_q, r))
    scale = std if std is not None else np.ldexp(np.std(dev, axis=2, dtype=np.float64), r)
    with np.errstate(divide="ignore", invalid="ignore"):  # a point without noise deviates by 0
        unit = np.ldexp(scale, -r)[:, :, None]
        z = np.where(unit > 0, np.abs(dev) / unit, 0.0)
    t = np.max(np.where(np.isnan(z), -np.inf, z), axis=0)  # (p, n_boot): sup over the points
    crit = np.quantile(t, level, axis=1)  # (p,)
    return band(estimate, mean - crit * scale, mean + crit * scale)


def _shape(model: Any, band: Band) -> Band:
    """One output column squeezed as ``predict`` does."""
    if np.ndim(model.y_fit_) > 1:
        return band
    return Band(*(np.asarray(a)[:, 0] for a in band))


class InferenceMixin:
    """Confidence bands and significance tests of :class:`nadaraya.NadarayaWatson`."""

    def confidence_band(
        self,
        X: Any,
        level: float = 0.95,
        method: str = "asymptotic",
        kind: str = "pointwise",
        n_boot: int = 999,
        random_state: Any = None,
        variance: str = "heteroscedastic",
    ) -> Band:
        """A confidence band for the regression function at the rows of ``X``.

        What each method covers, with the design held fixed:

        - ``"asymptotic"``: ``f(x) -+ z sd(x)``, ``sd`` the exact standard error of
          ``predict(X, return_std=True)``. It covers the *smoothed* function
          ``E[f(x) | design] = sum_i a_i(x) m(x_i)`` at the stated rate (the fit's bias is not
          in it).
        - ``"bootstrap"``: the wild bootstrap (Mammen's multipliers on the leverage-corrected
          residuals ``e_i / sqrt(1 - H_ii)``, design and bandwidth fixed); every replicate is the
          same linear smoother applied to new responses, so all ``n_boot`` are output columns
          of one pass. It covers the smoothed function too, without the normal approximation.
        - ``"rbc"``: robust bias correction (Calonico, Cattaneo and Farrell, 2018; R's
          nprobust with ``rho = h / b = 1``): the bias of the degree-``p`` fit is estimated by
          the degree ``p + 1`` fit at the same bandwidth, and the interval is centred on the
          corrected estimate (which equals that fit) and studentised by its standard error.
          It covers the *true* regression function at the CV bandwidth, where the plain
          bands under-cover; ``estimate`` is still the model's own prediction.

        ``kind="simultaneous"`` widens the band so that it covers the whole curve over the rows
        of ``X`` at once: the ``level`` quantile of the largest studentised deviation over the
        points (sup-t), from ``n_boot`` replicates (Gaussian ones for ``"asymptotic"`` and
        ``"rbc"``, the wild bootstrap's for ``"bootstrap"``).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        level : float, default 0.95
        method : {"asymptotic", "bootstrap", "rbc"}, default "asymptotic"
        kind : {"pointwise", "simultaneous"}, default "pointwise"
        n_boot : int, default 999
            Replicates for the bootstrap and for simultaneous bands (19 to 1,000,000, and within
            an hour's work and half the machine's memory; unused by the other bands).
        random_state : int, numpy Generator or None
        variance : {"heteroscedastic", "homoscedastic"}, default "heteroscedastic"
            How the noise variance ``sigma^2(x_i)`` is estimated (see
            :meth:`~nadaraya.NadarayaWatson.predict`).

        Returns
        -------
        Band
            ``(estimate, lower, upper)``, each of shape (n_queries,) or (n_queries, n_outputs).

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya import NadarayaWatson
        >>> rng = np.random.default_rng(0)
        >>> x = rng.uniform(0, 5, 200); y = np.sin(x) + rng.normal(0, 0.3, 200)
        >>> model = NadarayaWatson(bandwidth=0.4, degree=1).fit(x[:, None], y)
        >>> band = model.confidence_band([[1.0], [2.5]], variance="homoscedastic")
        >>> bool(np.all(band.lower < band.estimate) and np.all(band.estimate < band.upper))
        True
        """
        Xv = _queries(self, X)
        return confidence_band(self, Xv, level, method, kind, n_boot, random_state, variance)

    def significance_test(
        self, X: Any, y: Any, features: Any = None, n_boot: int = 399, random_state: Any = None
    ) -> Any:
        """Test, per feature (or per group), whether the regression depends on it.

        The statistic (Racine, 1997; Racine, Hart and Li, 2006, as R np's ``npsigtest``) is the
        mean over the sample of the squared partial derivative of the fit (continuous features,
        :meth:`gradient`), or of the squared change of the fit when the feature is set to each
        of its categories (categorical ones); a group sums its features' statistics. The null
        distribution comes from the wild bootstrap: responses ``g(x_i) + e_i v_i`` with ``g``
        the fit without the feature(s) under test (same bandwidths for the others), ``e_i``
        the full fit's residuals and Mammen's multipliers ``v_i``. The bandwidths are the fitted
        model's; each replicate's statistic is the same linear map of its responses, so the
        replicates are output columns of one pass per block.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data to test on (usually the training data).
        y : array-like of shape (n_samples,)
        features : sequence of int or of sequences of int, optional
            The features to test, each alone (an int) or jointly (a sequence); default every
            feature alone.
        n_boot : int, default 399
            19 to 1,000,000, and within an hour's work (a ValueError says the cost otherwise).
        random_state : int, numpy Generator or None

        Returns
        -------
        SignificanceTest
            Statistics and p-values per test (:class:`nadaraya.SignificanceTest`); ``print``
            shows a table.

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya import NadarayaWatson
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(0, 1, (150, 2)); y = np.sin(6 * X[:, 0]) + rng.normal(0, 0.2, 150)
        >>> model = NadarayaWatson(bandwidth=[0.1, 0.3]).fit(X, y)
        >>> res = model.significance_test(X, y, n_boot=99, random_state=0)
        >>> bool(res.p_value[0] < 0.05)
        True
        """
        from sklearn.utils.validation import check_is_fitted

        from ._validation import as_values

        check_is_fitted(self)
        if getattr(self, "bandwidth_type", "fixed") != "fixed":
            kind = self.bandwidth_type  # type: ignore[attr-defined]
            raise NotImplementedError(f"significance_test needs a fixed bandwidth; this model's "
                                      f"bandwidth_type is {kind!r}")
        Xv = _queries(self, X)
        Y, _ = as_values(y, Xv.shape[0], np.dtype(np.float64), name="y", keys="X")
        names = getattr(self, "feature_names_in_", None)
        labels = (
            tuple(str(v) for v in names) if names is not None else tuple(f"x{j}" for j in range(Xv.shape[1]))
        )
        from ._sigtest import significance_test

        return significance_test(self, Xv, Y, None, features, n_boot, random_state, labels)


def _queries(model: Any, X: Any) -> NDArray[np.float64]:
    """``X`` validated as the estimator's ``predict`` validates it."""
    from sklearn.utils.validation import check_is_fitted, validate_data

    from ._encode import encode_queries
    from ._validation import as_real, is_dask

    check_is_fitted(model)
    if is_dask(X):
        X = X.compute()
    X = encode_queries(model, X)
    if np.asarray(X).dtype.kind in "cmMUS":
        as_real("X", X)
    return validate_data(model, X, reset=False, dtype=np.float64)
