"""One degree rule: a local fit, its standard error and its smoother row take the same degree, query by query.

A local fit of degree ``r`` falls back to a lower degree where its scaled system is singular
(:mod:`nadaraya.local.solve`). Its consumers -- the variance (:mod:`nadaraya.inference.variance`)
and the smoother's rows (:mod:`nadaraya.local.smoother`) -- decide by the same function
(:func:`nadaraya.local.solve.used_degree`). Checked on pairs of queries that straddle the threshold
(found by bisection on a plainly written reciprocal condition, beside keys in a narrow box, in one
and two features, degree 1 and 2): one query a little above it, one a little below, for float64 sums at
:data:`~nadaraya.local.solve.RCOND` and for sums held in float32 (an accelerator's) at
:func:`~nadaraya.local.solve.rcond_for` float32.

For each query, the smoother row ``a`` (plain NumPy from here on):

- reproduces the polynomials of exactly the degree the fit used (``sum_i a_i b(z_i) = e_0`` for
  every monomial up to it; not for the next), so the row took the fit's degree;
- ``a . y`` is the fit, and ``sigma^2 sum_i a_i^2`` the variance that ``variances`` returns without
  being told the degree, and the same bit for bit when told the fit's.

Tolerances: at the threshold the systems' condition is ``1 / rcond`` (``1e10`` in float64, about
``2e5`` for float32 sums), which multiplies the rounding of each way of computing the same number
(``1e-16``; ``6e-8`` for float32 sums): ``a . y`` and the fit, ``sigma^2 sum a_i^2`` and the
variance agree within ``1e-4`` relative in float64 (measured: 5e-6 at most) and ``5e-2`` with float32
sums (measured: 6e-3). The fit and the variance of the other degree miss them by 0.9 relative or
more (measured), which the test checks (three tolerances): a degree decided apart fails it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_local import design

import nadaraya
from _spies import solved_degrees
from nadaraya.backends import reference
from nadaraya.inference.variance import variances
from nadaraya.kernels import get
from nadaraya.local import fit as _fit
from nadaraya.local import job as _job
from nadaraya.local.smoother import blocks
from nadaraya.local.solve import RCOND, monomials, rcond_for, solve, used_degree
from nadaraya.partials import Partials

H = 0.1
SIGMA2 = 0.04
#: (dtype of the sums, relative tolerance of the fit, of the variance, the threshold's side step)
SUMS = {"float64": (1e-4, 1e-4, 1e-3), "float32": (5e-2, 5e-2, 5e-2)}


def _weights(q: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Gaussian weights of the keys at ``q``, divided by the largest."""
    lw = -0.5 * (((X - q) / H) ** 2).sum(axis=1)
    return np.exp(lw - lw.max())


def _rcond(q: np.ndarray, X: np.ndarray, degree: int) -> float:
    """The reciprocal condition of the local system at ``q`` scaled to a unit diagonal, plainly."""
    B = design((X - q) / H, degree)
    M = (B * _weights(q, X)[:, None]).T @ B
    s = 1.0 / np.sqrt(np.diag(M))
    ev = np.linalg.eigvalsh(M * s[:, None] * s[None, :])
    return max(float(ev[0] / ev[-1]), 1e-300)  # (a rounding below zero: singular)


def _bisect(f, lo: float, hi: float) -> float:
    """Where the increasing ``f`` crosses 0 in ``[lo, hi]``, to the last bit."""
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if f(mid) >= 0 else (mid, hi)
    return lo


def _straddle(d: int, degree: int, threshold: float, step: float):
    """Keys in a narrow box (200 of them; a near-singular design), values, and two queries beside
    it whose reciprocal conditions lie just above and just below ``threshold``: the box's width
    is bisected so that the threshold falls two bandwidths from the box's centre, then the
    crossing on that ray, and the queries stand at it times ``1 -+ step``."""
    rng = np.random.default_rng(1)
    U = rng.uniform(0.0, 1.0, (200, d))
    y = np.sin(6 * U[:, 0]) + 0.1 * rng.normal(size=200)
    u = np.array([1.0, 0.4][:d]) / np.linalg.norm([1.0, 0.4][:d])

    def at(t, width):
        return 0.5 + 0.5 * width + t * H * u

    def above(lw):  # the log of the reciprocal condition two bandwidths out over the threshold
        return np.log(_rcond(at(2.0, 10.0**lw), 0.5 + 10.0**lw * U, degree) / threshold)

    log_w = _bisect(above, -9, 0)
    X = 0.5 + 10.0**log_w * U
    t = _bisect(lambda t: np.log(threshold / _rcond(at(t, 10.0**log_w), X, degree)), 0.0, 10.0)
    Q = np.array([at(t * (1 - step), 10.0**log_w), at(t * (1 + step), 10.0**log_w)])
    rc = [_rcond(q, X, degree) for q in Q]
    assert rc[0] > threshold > rc[1], rc
    return Q, X, y


def _row_degree(a: np.ndarray, X: np.ndarray, q: np.ndarray, degree: int) -> int:
    """The highest degree whose monomials the row reproduces (``a . b(z) = e_0`` within 1e-8 of
    ``sum |a_i b(z_i)|`` for every monomial up to it; measured: 4e-11 at most); the next degree's
    must miss by more than 1e-6 (measured: 2e-5 at least)."""
    B = design((X - q) / H, degree + 1)
    e = np.zeros(B.shape[1])
    e[0] = 1.0
    miss = np.abs(a @ B - e) / (np.abs(a) @ np.abs(B))
    d = X.shape[1]
    got = -1
    for r in range(degree + 2):
        block = miss[len(monomials(r - 1, d)) if r else 0 : len(monomials(r, d))]
        if block.max() > 1e-8:
            assert block.max() > 1e-6, (r, miss)  # clearly one side or the other
            break
        got = r
    return got


def _job_and_parts(Q, X, y, degree, sums, monkeypatch):
    """The job, the partials the fit is solved from, and the fit's degree per query: float64
    through the public ``nadaraya.pool`` (its degrees recorded from its solve); float32 as an
    accelerator delivers them (the call kept in float32, exact sums rounded to float32)."""
    d = X.shape[1]
    if sums == "float64":
        job = _job.prepare(Q, X, y, kernel="gaussian", bandwidth=H, sample_weight=None, degree=degree,
                           var_types=None, categorical_kernel="classic")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with solved_degrees(monkeypatch) as seen:
                fit = nadaraya.pool(Q, X, y, kernel="gaussian", bandwidth=H, degree=degree)
        return job, _fit.partials(job, None, "auto"), seen[0], fit
    f32 = np.float32
    Q, X, y = (a.astype(f32) for a in (Q, X, y))
    job = _job.prepare(Q, X, y, kernel="gaussian", bandwidth=H, sample_weight=None, degree=degree,
                       var_types=None, categorical_kernel="classic", device="cuda")
    assert job.call.keys.dtype == f32  # the sums are float32's
    p = reference.partials(Q.astype(float), X.astype(float), y.astype(float)[:, None], kernel=get("gaussian"),
                           bandwidth=np.full(d, H), moments=degree)
    parts = Partials(*(a.astype(f32) for a in (p.shift, p.weight, p.value)),
                     tuple(a.astype(f32) for a in p.moments))
    fit = solve(parts, degree, np.full(d, H))
    return job, parts, fit.degree, fit.estimate[:, 0]


@pytest.mark.parametrize("sums", ["float64", "float32"])
@pytest.mark.parametrize(("d", "degree"), [(1, 1), (1, 2), (2, 1), (2, 2)])
def test_fit_variance_and_smoother_row_take_one_degree(d, degree, sums, monkeypatch):
    fit_tol, var_tol, step = SUMS[sums]
    threshold = RCOND if sums == "float64" else rcond_for(np.float32, len(monomials(degree, d)))
    Q, X, y = _straddle(d, degree, threshold, step)
    job, parts, used, fit = _job_and_parts(Q, X, y, degree, sums, monkeypatch)
    np.testing.assert_array_equal(used, [degree, degree - 1])  # the pair straddles the rule
    X, y = (np.asarray(a, dtype=np.float64) for a in (job.call.keys, job.call.values[:, 0]))
    A = np.vstack([rows for _, _, rows in blocks(job)])
    var = variances(job, parts, np.full(X.shape[0], SIGMA2), "reference")[:, 0]
    told = variances(job, parts, np.full(X.shape[0], SIGMA2), "reference", used=used)[:, 0]
    np.testing.assert_array_equal(var, told)
    swapped = 2 * degree - 1 - used  # each query at the other side's degree
    other = variances(job, parts, np.full(X.shape[0], SIGMA2), "reference", used=swapped)[:, 0]
    for i in range(2):
        a, q = A[i], np.asarray(job.call.queries[i], dtype=np.float64)
        assert _row_degree(a, X, q, degree) == used[i]
        assert abs(a @ y - fit[i]) <= fit_tol * abs(a @ y), (i, a @ y, fit[i])
        plain = SIGMA2 * np.sum(a**2)
        assert abs(var[i] - plain) <= var_tol * plain, (i, var[i], plain)
        assert abs(other[i] - plain) > 3 * var_tol * plain, (i, other[i], plain)  # the test can fail
        # the fit of the other degree, by the row of the other degree, misses too
        b = _plain_row(q, X, int(swapped[i]))
        assert abs(b @ y - fit[i]) > 3 * fit_tol * abs(a @ y), (i, b @ y, fit[i])


def _plain_row(q: np.ndarray, X: np.ndarray, r: int) -> np.ndarray:
    """The smoother row of degree ``r`` at ``q`` by least squares (``pinv`` of the weighted design)."""
    w = _weights(q, X)
    B = design((X - q) / H, r)
    root = np.sqrt(w)
    return np.linalg.pinv(B * root[:, None], rcond=1e-15)[0] * root



@pytest.mark.parametrize(("d", "degree"), [(1, 1), (1, 2), (2, 2), (3, 3)])
def test_smoother_partials_read_back_as_its_systems(d, degree):
    """The partials the smoother's rows are decided from give the solve back the rows' own systems
    ``M`` (normalised, in ``z``): each entry within rounding (entries of one monomial are summed
    in different orders: 1e-15 relative measured), the corner as exactly 1."""
    from nadaraya.local.smoother import _as_partials
    from nadaraya.local.solve import _systems

    rng = np.random.default_rng(d + 10 * degree)
    Z = rng.normal(size=(5, 40, d))
    w = rng.uniform(0.0, 1.0, (5, 40))
    B = np.stack([design(z, degree) for z in Z])
    M = np.einsum("bnp,bnq->bpq", B * (w / w.sum(axis=1, keepdims=True))[:, :, None], B)
    back, _ = _systems(_as_partials(M, np.ones(5, dtype=bool), degree, d), degree, np.ones(d))
    s = 1.0 / np.sqrt(np.einsum("bii->bi", M))  # compared on the unit diagonal's scale
    S = s[:, :, None] * s[:, None, :]
    np.testing.assert_allclose(back * S, M * S, rtol=0, atol=1e-13)


@pytest.mark.parametrize(("degree", "bandwidth", "match"), [
    (-1, [0.2], "degree must be an integer >= 0, got -1"),
    (1.0, [0.2], "degree must be an integer >= 0, got 1.0"),
    (2, [0.2], "degree=2 needs the 6 moment sums of moments=2; parts carry 3"),
    (1, [0.2, 0.3], r"bandwidth must hold one value per feature \(1\), got 2"),
])
def test_used_degree_names_bad_arguments(degree, bandwidth, match):
    keys = np.arange(11.0)[:, None] / 10
    parts = reference.partials(keys[:3], keys, keys, kernel=get("gaussian"), bandwidth=np.array([0.2]),
                               moments=1)
    with pytest.raises(ValueError, match=match):
        used_degree(parts, degree, np.array(bandwidth))
