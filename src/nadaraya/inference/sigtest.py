"""Significance tests of fitted NadarayaWatson models: does the regression depend on a feature?

See :meth:`nadaraya.NadarayaWatson.significance_test`. Each replicate's statistic is a linear
map of its bootstrap responses followed by a square, so all replicates of a block are output
columns of one pass of the smoother (or of its derivative).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya._support.config import get_config
from nadaraya.inference.bootstrap import multipliers
from nadaraya.inference.limits import as_n_boot
from nadaraya.inference.training import _backend, _rng, leverage_scale, unit_exponent
from nadaraya.local import fit as _fit
from nadaraya.local import job as _job

__all__ = ["SignificanceTest", "significance_test"]

#: a statistic below this fraction of the mean square of the responses is rounding: 0
_NOISE = 1e-20


@dataclass(frozen=True)
class SignificanceTest:
    """Bootstrap tests of whether the regression depends on each feature (or a joint group).

    Attributes
    ----------
    features : tuple of tuple of int
        The feature (or group of features) each test is about.
    names : tuple of str
    statistic : ndarray of shape (k,)
        The mean squared partial derivative over the sample (continuous features) or the mean
        squared change of the fit across the categories (categorical ones), summed over a group.
    p_value : ndarray of shape (k,)
        ``(1 + #{replicates >= statistic}) / (1 + n_boot)`` under the null.
    n_boot : int
    """

    features: tuple[tuple[int, ...], ...]
    names: tuple[str, ...]
    statistic: NDArray[np.float64]
    p_value: NDArray[np.float64]
    n_boot: int

    def __str__(self) -> str:
        lines = [
            f"Kernel regression significance test ({self.n_boot} wild-bootstrap replicates under the null)",
            f"{'feature':<24}{'statistic':>16}{'p-value':>12}",
            "-" * 52,
        ]
        for name, st, pv in zip(self.names, self.statistic, self.p_value):
            stars = (
                "***" if pv < 0.001 else "**" if pv < 0.01 else "*" if pv < 0.05 else "." if pv < 0.1 else ""
            )
            lines.append(f"{name:<24}{st:>16.6g}{pv:>12.4g} {stars}")
        lines.append("-" * 52)
        lines.append("signif. codes: *** 0.001, ** 0.01, * 0.05, . 0.1")
        return "\n".join(lines)


def _unit(job: _job.Job, group: tuple[int, ...]) -> int:
    """The binary exponent ``E`` by which :func:`_statistic` divides the statistic of ``group``:
    the largest of its continuous columns' ``2**(2 x_exp)`` (see :meth:`nadaraya.local.job.Job.per_x`),
    so that the squared slopes stay in range at extreme scales of ``x``; 0 at ordinary scales."""
    if job.x_exp is None:
        return 0
    cont = job.cont.tolist()
    return max((-2 * int(job.x_exp[cont.index(j)]) for j in group if j in cont), default=0)


def _statistic(
    job: _job.Job, group: tuple[int, ...], Yb: NDArray[np.float64], unit: int = 0
) -> NDArray[np.float64]:
    """The test statistic of ``group`` for each column of the responses ``Yb`` (n, b), divided
    by ``2**unit`` (:func:`_unit`): each derivative (or category change) is a linear map of the
    responses, applied by blocks of its rows (:mod:`nadaraya.local.smoother`) to every column at once."""
    from nadaraya.local.smoother import blocks

    n = job.call.keys.shape[0]
    total = np.zeros(Yb.shape[1])
    cont = job.cont.tolist()
    for j in group:
        if j in cont:
            acc = np.zeros(Yb.shape[1])
            a = cont.index(j)
            # the squared slope per unit of x is 2**(-2 x_exp) times the job's: over 2**unit
            factor = 1.0 if job.x_exp is None else float(np.ldexp(1.0, -2 * int(job.x_exp[a]) - unit))
            for _, _, rows in blocks(job, slope=a):
                acc += np.nansum((rows @ Yb) ** 2, axis=0)
            total += acc / n * factor
            continue
        assert job.cat is not None
        pos = [i for i in range(job.d) if i not in cont].index(j)
        base = np.vstack([rows @ Yb for _, _, rows in blocks(job)])
        for level in np.unique(job.cat.keys[:, pos]):
            q = job.cat.queries.copy()
            q[:, pos] = level
            moved = dataclasses.replace(job, cat=dataclasses.replace(job.cat, queries=q))
            acc = np.zeros(Yb.shape[1])
            for q0, q1, rows in blocks(moved):
                acc += np.nansum((rows @ Yb - base[q0:q1]) ** 2, axis=0)
            total += acc / n * float(np.ldexp(1.0, -unit))
    # a feature smoothed out entirely (a lambda at the top of its range) changes the fit by
    # rounding only: that is no change at all, whatever the replicates' rounding says
    return np.where(total <= _NOISE * np.mean(Yb**2, axis=0), 0.0, total)


def _restricted(
    model: Any, X: NDArray[np.float64], Y: NDArray[np.float64], sw: Any, group: tuple[int, ...]
) -> Any:
    """In-sample fits of the model without the columns of ``group`` (the null), (n, p)."""
    keep = [j for j in range(X.shape[1]) if j not in group]
    if not keep:
        s = np.ones(X.shape[0]) if sw is None else np.asarray(sw, dtype=np.float64)
        return np.broadcast_to((s @ Y) / s.sum(), Y.shape)
    vt = model.var_types_
    job = _job.prepare(
        X[:, keep],
        X[:, keep],
        Y,
        kernel=model.kernel,
        bandwidth=np.asarray(model.bandwidth_)[keep],
        sample_weight=sw,
        degree=model.degree,
        var_types="".join(vt[j] for j in keep),
        categorical_kernel=model.categorical_kernel,
        levels=np.asarray(model.levels_)[[j for j in keep if vt[j] != "c"]] if vt.strip("c") else None,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f, _ = _fit.fitted(job, _fit.partials(job, None, _backend(model)), "nearest")
    return f


def _groups(features: Any, d: int) -> list[tuple[int, ...]]:
    """The tests asked for: every column alone by default, else each entry of ``features`` (an
    int, or a list or tuple of distinct ints for a joint test) naming columns 0 to d - 1."""
    if features is None:
        return [(j,) for j in range(d)]
    if isinstance(features, int | np.integer) or not isinstance(features, list | tuple):
        raise ValueError(f"features must be a list of column numbers (or of lists of them); got {features!r}")

    def column(j: Any, f: Any) -> int:
        if isinstance(j, bool) or not isinstance(j, int | np.integer) or not 0 <= j < d:
            raise ValueError(f"features entry {f!r}: {j!r} is not a column number from 0 to {d - 1}")
        return int(j)

    groups = []
    for f in features:
        g = tuple(column(j, f) for j in f) if isinstance(f, list | tuple) else (column(f, f),)
        if not g or len(set(g)) != len(g):
            raise ValueError(f"features entry {f!r} must name distinct columns, at least one")
        groups.append(g)
    return groups


def significance_test(
    model: Any,
    X: NDArray[np.float64],
    Y: NDArray[np.float64],
    sw: Any,
    features: Any,
    n_boot: int,
    random_state: Any,
    names: tuple[str, ...],
) -> SignificanceTest:
    """See :meth:`nadaraya.NadarayaWatson.significance_test`."""
    groups = _groups(features, X.shape[1])
    n = X.shape[0]
    # a replicate costs a pass of the derivative's rows (n x n) per continuous feature tested, and
    # one per category and one more per categorical feature
    passes = sum(1 if model.var_types_[j] == "c" else 1 + int(model.levels_[j]) for g in groups for j in g)
    n_boot = as_n_boot(n_boot, work_per=float(n) * n * passes,
                       what=f"{n} x {n} pairs of rows x {passes} passes")
    rng = _rng(random_state)
    if Y.shape[1] != 1:
        raise ValueError(f"significance_test takes one output; y has {Y.shape[1]} columns")
    # scale-equivariant: the test runs on y * 2**-e (its largest magnitude in [1/2, 1), exact), so
    # squares neither overflow nor underflow; the statistics are scaled back, the p-values are not
    e = unit_exponent(Y)
    Y = np.ldexp(Y, -e)
    job = model._job(X, X, Y, sw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits, _ = _fit.fitted(job, _fit.partials(job, None, _backend(model)), "nearest")
    weights = None if sw is None else np.asarray(sw, float)
    resid = (Y - fits)[:, 0] * leverage_scale(job, weights, _backend(model))
    stats, pvals = [], []
    for g in groups:
        unit = _unit(job, g)
        observed = float(_statistic(job, g, Y, unit)[0])
        null = _restricted(model, X, Y, sw, g)[:, 0]
        width = max(1, min(n_boot, int(get_config()["working_memory"] * 2**20 // (8 * 4 * n))))
        exceed = 0
        for b0 in range(0, n_boot, width):  # blocks of replicates within the working memory
            Yb = null[:, None] + resid[:, None] * multipliers(rng, n, min(n_boot, b0 + width) - b0)
            exceed += int((_statistic(job, g, Yb, unit) >= observed).sum())
        with np.errstate(over="ignore"):  # (beyond float64 in the units of x: inf)
            stats.append(float(np.ldexp(observed, unit)))
        pvals.append((1 + exceed) / (1 + n_boot))
    labels = tuple(" & ".join(names[j] for j in g) for g in groups)
    with np.errstate(over="ignore"):
        statistic = np.ldexp(np.array(stats), 2 * e)
    return SignificanceTest(tuple(groups), labels, statistic, np.array(pvals), int(n_boot))
