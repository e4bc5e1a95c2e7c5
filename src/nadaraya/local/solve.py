"""Local polynomial fits from moment partial sums: the per-query weighted least-squares solve.

A local polynomial fit of degree ``r`` at a query ``q`` minimises
``sum_i w_i (v_i - b(z_i)^T beta)^2`` over ``beta``, with ``w_i`` the attention weights,
``z_i = (k_i - q) / h`` and ``b(z)`` the monomials of ``z`` of total degree at most ``r``
(``1``, then ``z_a``, then ``z_a z_b`` for ``a <= b``). Its normal equations
``M beta = R``, ``M = sum_i w_i b(z_i) b(z_i)^T``, ``R = sum_i w_i b(z_i) v_i^T``, are read off
the moment sums that the backends carry in :class:`~nadaraya.partials.Partials` (see
:func:`nadaraya.backends.reference.moment_shapes`): every entry of ``M`` and ``R`` is one of
them, divided by powers of ``h``. The intercept ``beta_0`` is the prediction, ``beta_a / h_a``
the slope along feature ``a``.

**Singular local systems** (fewer distinct keys in a window than the degree needs, collinear
keys, a query whose weight sits on one key): the rule is *fall back to the highest lower degree
whose system is regular*, down to degree 0 (Nadaraya-Watson, regular wherever some key has
positive weight). A system counts as singular when the reciprocal condition number of ``M``
after symmetric diagonal scaling (which makes it independent of the units of ``z``) is below
:data:`RCOND`, or a diagonal entry is zero. The lower-degree system is the leading block of the
same sums, so a fallback costs nothing. :class:`LocalFit` says which degree each query got;
:func:`used_degree` is the same decision for the fit's consumers (its variance, the smoother's
rows), so that none of them decides a query's degree by a rule of its own.
The general solve runs compiled, one query at a time (:mod:`nadaraya.local._small_solve`);
one feature at degree 1 and 2 has closed forms (:mod:`nadaraya.local._line`,
:mod:`nadaraya.local._parabola`).

**Sums narrower than float64.** Rounding the sums to float32 (relative ``6e-8``) moves the
scaled system by about ``1e-7``: below that a reciprocal condition is rounding noise, and a
solve near it amplifies the rounding by its condition. Local fits on float32 inputs are
therefore summed and solved in float64 (:func:`nadaraya.local.job.prepare`, and the Dask tasks);
sums that arrive in float32 all the same (the torch backend on an accelerator) are decided
against :func:`rcond_for` their dtype and system size, a fixed multiple of that noise floor.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from nadaraya.partials import Partials, merge

__all__ = ["RCOND", "LocalFit", "hat_diagonal", "monomials", "rcond_for", "solve", "used_degree"]

#: a scaled local system whose reciprocal condition number is below this is singular: its
#: solution could lose more than about six of float64's sixteen digits
RCOND = 1e-10

#: the threshold of :func:`rcond_for` in units of the noise floor ``size * eps``
_C_NOISE = 16.0


def rcond_for(dtype: np.dtype | type, size: int = 1) -> float:
    """The singular threshold for local systems of ``size`` unknowns whose sums are held in ``dtype``.

    ``max(RCOND, 16 * size * eps)``, ``eps`` the dtype's machine epsilon: :data:`RCOND` for
    float64; for float32 ``1.9e-6 * size`` (3.8e-6, 5.7e-6 and 1.9e-5 for 2, 3 and 10 unknowns).

    The noise floor: the equilibrated system ``S`` (unit diagonal, so ``|S_ij| <= 1`` and its
    largest eigenvalue is at least 1) built from sums each rounded to ``dtype`` (relative ``u =
    eps / 2``) is ``S + E`` with ``|E_ij| <= u``, so ``||E||_2 <= size u`` and (Weyl) the
    reciprocal condition moves by at most ``size u = size eps / 2``: the factor ``c = 16`` puts
    the threshold 32 times above that movement (a query decided on rounding noise is within 3%
    of it), and a system that clears it has ``lambda_min >= 32 size u``, so the first-order error
    of its solution, ``size u (|r| + |beta|) / (lambda_min - size u)`` in the scaled unknowns,
    is at most about 3% of ``|r| + |beta|`` there and proportionally less above. The bound takes
    each sum to carry about one rounding; sums accumulated in ``dtype`` carry more (a few for
    pairwise accumulation), each multiplying the floor. Queries whose float64 reciprocal
    condition is 1e-5 (2.8 bandwidths outside the data, degree 2 in one feature) keep their degree.

    Examples
    --------
    >>> import numpy as np
    >>> rcond_for(np.float64, 3) == RCOND, float(f"{rcond_for(np.float32, 3):.2g}")
    (True, 5.7e-06)
    """
    eps = float(np.finfo(dtype).eps)
    return max(RCOND, _C_NOISE * size * eps)


def _threshold(parts: Partials, size: int) -> float:
    """:func:`rcond_for` the narrowest dtype among the sums of ``parts``, for systems of ``size``
    unknowns (the largest the solve tries: the lower degrees' smaller systems get the same)."""
    arrays = (parts.weight, parts.value, *parts.moments)
    return max(rcond_for(a.dtype, size) for a in arrays)


def monomials(degree: int, d: int) -> list[tuple[int, ...]]:
    """The basis of a local polynomial of ``degree`` in ``d`` features, by increasing degree.

    Each monomial is the sorted tuple of the features it multiplies (``()`` is the constant).

    Examples
    --------
    >>> monomials(2, 2)
    [(), (0,), (1,), (0, 0), (0, 1), (1, 1)]
    """
    out: list[tuple[int, ...]] = []
    for j in range(degree + 1):
        out.extend(itertools.combinations_with_replacement(range(d), j))
    return out


@dataclass
class LocalFit:
    """Per-query local polynomial fits.

    Attributes
    ----------
    estimate : ndarray of shape (m, p)
        The fitted value at each query (the intercept); NaN where no key has positive weight.
    slope : ndarray of shape (m, d, p)
        d estimate / d x_a (the local linear terms divided by ``h_a``); NaN where the fit fell
        back to degree 0 or no key has positive weight.
    degree : ndarray of shape (m,)
        The degree each query's fit used (lower than asked where its system was singular);
        -1 where no key has positive weight.
    inverse00 : ndarray of shape (m,)
        The first entry of the inverse of ``M`` normalised by the weight sum, ``(M / sum w)^-1
        [0, 0]``: the own-weight share times this is a hat-matrix diagonal entry.
    """

    estimate: NDArray[np.float64]
    slope: NDArray[np.float64]
    degree: NDArray[np.int64]
    inverse00: NDArray[np.float64]


def _systems(parts: Partials, degree: int, h: NDArray[np.float64]) -> tuple[NDArray, NDArray]:
    """``M / sum w`` (m, P, P) and ``R / sum w`` (m, P, p) in the scaled coordinates ``z``."""
    m, p = parts.value.shape
    d = h.size
    basis = monomials(degree, d)
    size = len(basis)
    ok = parts.weight > 0
    s0 = np.where(ok, parts.weight, 1.0).astype(np.float64)
    sums = [parts.weight.astype(np.float64)[:, None] / s0[:, None]]  # order 0 as (m, 1)
    for j in range(1, 2 * degree + 1):
        sums.append(parts.moments[j - 1].astype(np.float64).reshape(m, -1) / s0[:, None])
    with_v = [parts.value.astype(np.float64) / s0[:, None]]
    for j in range(1, degree + 1):
        with_v.append(
            parts.moments[2 * degree + j - 1].astype(np.float64).reshape(m, -1, p) / s0[:, None, None]
        )
    inv_h = 1.0 / h

    def flat(idx: tuple[int, ...]) -> int:
        return int(np.ravel_multi_index(idx, (d,) * len(idx))) if idx else 0

    M = np.empty((m, size, size))
    R = np.empty((m, size, p))
    for a, ba in enumerate(basis):
        scale_a = float(np.prod(inv_h[list(ba)])) if ba else 1.0
        R[:, a, :] = with_v[len(ba)][:, flat(ba)] * scale_a if ba else with_v[0]
        for b, bb in enumerate(basis[: a + 1]):
            idx = tuple(sorted(ba + bb))
            scale = scale_a * (float(np.prod(inv_h[list(bb)])) if bb else 1.0)
            M[:, a, b] = M[:, b, a] = sums[len(idx)][:, flat(idx)] * scale
    return M, R


def _regular(
    M: NDArray[np.float64], rcond_min: float = RCOND
) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
    """Which systems are regular (reciprocal condition at least ``rcond_min``), and the diagonal
    scaling ``D^-1/2`` that equilibrates them."""
    diag = np.einsum("mii->mi", M)
    positive = (diag > 0).all(axis=1) & np.isfinite(M).all(axis=(1, 2))
    scale = 1.0 / np.sqrt(np.where(diag > 0, diag, 1.0))
    S = M * scale[:, :, None] * scale[:, None, :]
    S[~positive] = np.eye(M.shape[1])
    # S is symmetric positive semi-definite: its singular values are its eigenvalues (a
    # rounding below zero means singular), and eigvalsh costs a third of an SVD
    ev = np.linalg.eigvalsh(S)
    rcond = ev[:, 0] / ev[:, -1]
    return positive & (rcond >= rcond_min), scale


def _line(parts: Partials, h: NDArray[np.float64], rcond_min: float) -> LocalFit:
    """Degree 1 in one feature, in closed form: the same rule as the general solve (the 2 x 2
    system equilibrated, singular below ``rcond_min``, then degree 0) at a tenth of its cost,
    which the bandwidth search pays once per pass (every row is written there: no fill here)."""
    from nadaraya.local._line import line_rows

    m, p = parts.value.shape
    estimate, slope = np.empty((m, p)), np.empty((m, 1, p))
    used, inv00 = np.empty(m, dtype=np.int64), np.empty(m)

    line_rows(parts.weight, parts.moments[0][:, 0], parts.moments[1][:, 0, 0], parts.value,
              parts.moments[2][:, 0, :], float(h[0]), rcond_min, estimate, slope[:, 0, :], used, inv00)
    return LocalFit(estimate, slope, used, inv00)


def solve(parts: Partials, degree: int, bandwidth: NDArray[np.floating]) -> LocalFit:
    """Solve every query's local system of ``degree`` from partials carrying its moments.

    Parameters
    ----------
    parts : Partials
        With ``moments`` in the order of :func:`nadaraya.backends.reference.moment_shapes`
        for ``degree`` (none for degree 0).
    degree : int
        0 to 3 (:data:`nadaraya.local.job.MAX_DEGREE`; the solve itself works for any non-negative degree).
    bandwidth : ndarray of shape (d,)

    Returns
    -------
    LocalFit

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.backends import reference
    >>> from nadaraya.kernels import get
    >>> x = np.linspace(0.0, 1.0, 11)[:, None]
    >>> parts = reference.partials(np.array([[0.0]]), x, 2 * x + 1, kernel=get("gaussian"),
    ...                            bandwidth=np.array([0.2]), moments=1)
    >>> fit = solve(parts, 1, np.array([0.2]))
    >>> round(float(fit.estimate[0, 0]), 12), round(float(fit.slope[0, 0, 0]), 12)
    (1.0, 2.0)
    """
    h = np.asarray(bandwidth, dtype=np.float64)
    return _solve(parts, degree, h, _threshold(parts, len(monomials(degree, h.size))))


def used_degree(
    parts: Partials, degree: int, bandwidth: NDArray[np.floating], dtype: np.dtype | type | None = None
) -> NDArray[np.int64]:
    """The degree each query's local fit of ``degree`` uses: :func:`solve`'s own decision.

    Every consumer of a local fit (its variance, the smoother's rows) decides by this one rule.

    Parameters
    ----------
    parts : Partials
        As for :func:`solve`: summed with ``moments=degree``.
    degree : int
        The degree asked for, at least 0.
    bandwidth : ndarray of shape (d,)
        The bandwidth per feature the moments were summed with (as for :func:`solve`).
    dtype : dtype, optional
        The dtype of the sums the decision is made for (:func:`rcond_for` it): by default the
        narrowest among ``parts``' own, as :func:`solve` takes; a caller that holds the sums wider
        than the fit it follows names the fit's.

    Returns
    -------
    ndarray of shape (m,)
        ``degree`` where its system is regular, else the highest lower degree whose system is,
        0 at worst; -1 where no key has positive weight.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.backends import reference
    >>> from nadaraya.kernels import get
    >>> h, keys = np.array([0.2]), np.arange(11.0)[:, None] / 10
    >>> q = np.array([[0.5], [3.0], [9.0]])  # at the keys' centre, 10 and 40 bandwidths outside
    >>> parts = reference.partials(q, keys, keys, kernel=get("gaussian"), bandwidth=h, moments=2)
    >>> used_degree(parts, 2, h).tolist(), used_degree(parts, 2, h, np.float32).tolist()
    ([2, 1, 0], [2, 0, 0])
    """
    h = np.asarray(bandwidth, dtype=np.float64).reshape(-1)
    d = parts.moments[0].shape[1] if parts.moments else h.size
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 0:
        raise ValueError(f"degree must be an integer >= 0, got {degree!r}")
    if len(parts.moments) != 3 * degree:
        raise ValueError(f"degree={degree} needs the {3 * degree} moment sums of moments={degree}; "
                         f"parts carry {len(parts.moments)}")
    if h.size != d:
        raise ValueError(f"bandwidth must hold one value per feature ({d}), got {h.size}: {bandwidth!r}")
    size = len(monomials(degree, h.size))
    rcond_min = _threshold(parts, size) if dtype is None else rcond_for(dtype, size)
    return _solve(parts, degree, h, rcond_min).degree


def _solve(parts: Partials, degree: int, h: NDArray[np.float64], rcond_min: float) -> LocalFit:
    """:func:`solve` with its singular threshold given."""
    m, p = parts.value.shape
    d = h.size
    if degree == 1 and d == 1:
        return _line(parts, h, rcond_min)
    done = None
    if degree == 2 and d == 1:  # closed form; the queries it leaves take the general solve below
        from nadaraya.local._parabola import parabola

        done, est2, slope2, inv2 = parabola(parts, float(h[0]), rcond_min)
        if done.all():
            return LocalFit(est2, slope2[:, None, :], np.full(m, 2, dtype=np.int64), inv2)
    ok = parts.weight > 0
    estimate = np.full((m, p), np.nan)
    slope = np.full((m, d, p), np.nan)
    used = np.full(m, -1, dtype=np.int64)
    inv00 = np.full(m, np.nan)
    if degree == 0 or not ok.any():
        with np.errstate(invalid="ignore", divide="ignore"):
            estimate[ok] = parts.value[ok].astype(np.float64) / parts.weight[ok, None].astype(np.float64)
        used[ok] = 0
        inv00[ok] = 1.0
        return LocalFit(estimate, slope, used, inv00)
    if done is not None:
        if done.any():
            rest = np.nonzero(~done)[0]
            sub = _solve(parts[rest], degree, h, rcond_min)
            estimate[done], slope[done, 0], inv00[done], used[done] = est2[done], slope2[done], inv2[done], 2
            estimate[rest], slope[rest], inv00[rest] = sub.estimate, sub.slope, sub.inverse00
            used[rest] = sub.degree
            return LocalFit(estimate, slope, used, inv00)
        return _general(parts, degree, h, estimate, slope, used, inv00, rcond_min)
    return _general(parts, degree, h, estimate, slope, used, inv00, rcond_min)


@functools.lru_cache(maxsize=64)
def _layout(degree: int, d: int) -> tuple[NDArray, ...]:
    """The part of :func:`_tables` that depends on ``degree`` and ``d`` only (computed once)."""
    basis = monomials(degree, d)
    size = len(basis)

    def flat(idx: tuple[int, ...]) -> int:
        return int(np.ravel_multi_index(idx, (d,) * len(idx))) if idx else 0

    morder, mflat = np.zeros((size, size), dtype=np.int64), np.zeros((size, size), dtype=np.int64)
    rorder, rflat = np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64)
    for a, ba in enumerate(basis):
        rorder[a], rflat[a] = len(ba), flat(ba)
        for b, bb in enumerate(basis[: a + 1]):
            idx = tuple(sorted(ba + bb))
            morder[a, b], mflat[a, b] = len(idx), flat(idx)
    sizes = np.array([len(monomials(r, d)) for r in range(degree + 1)], dtype=np.int64)
    return morder, mflat, rorder, rflat, sizes


def _tables(degree: int, h: NDArray[np.float64]) -> tuple[NDArray, ...]:
    """Where each entry of ``M`` and ``R`` sits among the moment sums, and its power of ``1 / h``:
    the order and flat index of ``M[a, b]`` and ``R[a]`` (the layout of :func:`_systems`)."""
    d = h.size
    inv_h = 1.0 / h
    morder, mflat, rorder, rflat, sizes = (a.copy() for a in _layout(degree, d))
    rscale = np.array([float(np.prod(inv_h[list(ba)])) if ba else 1.0 for ba in monomials(degree, d)])
    lower = np.tril(np.ones(morder.shape, dtype=bool))
    mscale = np.where(lower, rscale[:, None] * rscale[None, :], 1.0)
    return morder, mflat, mscale, rorder, rflat, rscale, sizes


def _general(parts: Partials, degree: int, h: NDArray[np.float64], estimate: NDArray[np.float64],
             slope: NDArray[np.float64], used: NDArray[np.int64], inv00: NDArray[np.float64],
             rcond_min: float = RCOND, exact: bool = False) -> LocalFit:
    """Every query's system by the general solve (any degree and number of features), singular
    below ``rcond_min``: compiled, one query at a time (:mod:`nadaraya.local._small_solve`), the
    rule of :func:`_general_numpy`. Writes the rows with positive weight of the outputs given.
    ``exact``: decide every system by its eigenvalues (for tests; the default skips them where
    a lower bound on the reciprocal condition already clears the threshold)."""
    from nadaraya._support.jit import run_ranges
    from nadaraya.local._small_solve import rows

    m = parts.value.shape[0]
    f64 = np.float64
    def rows_of(x: NDArray[np.floating]) -> NDArray[np.float64]:
        # contiguous, float64 and writeable alike: a tuple the compiled loop indexes at run time
        # must hold one array type (a read-only field, e.g. memory-mapped, would be another)
        return np.require(x.reshape(m, math.prod(x.shape[1:])), dtype=f64, requirements=["C", "W"])

    mom = (rows_of(parts.weight), *(rows_of(parts.moments[j]) for j in range(2 * degree)))
    vmom = (rows_of(parts.value), *(rows_of(parts.moments[2 * degree + j]) for j in range(degree)))
    tables = _tables(degree, h)
    size = int(tables[-1][-1])
    args = (mom[0][:, 0], mom, vmom, *tables, 1.0 / h, float(rcond_min), bool(exact))
    run_ranges(rows, args, m, (estimate, slope, used, inv00), work=float(m) * size**3)
    return LocalFit(estimate, slope, used, inv00)


def _general_numpy(parts: Partials, degree: int, h: NDArray[np.float64], estimate: NDArray[np.float64],
                   slope: NDArray[np.float64], used: NDArray[np.int64], inv00: NDArray[np.float64],
                   rcond_min: float = RCOND) -> LocalFit:
    """Every query's system by the general solve in NumPy, batched (the reference of
    :func:`_general`): the systems of :func:`_systems`, decided by :func:`_regular`, solved by
    ``np.linalg.solve``."""
    p = parts.value.shape[1]
    d = h.size
    ok = parts.weight > 0
    M, R = _systems(parts[ok] if not ok.all() else parts, degree, h)
    rows = np.nonzero(ok)[0]
    todo = np.ones(rows.size, dtype=bool)
    for r in range(degree, 0, -1):
        size = len(monomials(r, d))
        Mr, Rr = M[:, :size, :size], R[:, :size, :]
        regular, scale = _regular(Mr, rcond_min)
        now = todo & regular
        if now.any():
            S = Mr[now] * scale[now, :, None] * scale[now, None, :]
            rhs = np.concatenate(
                [Rr[now] * scale[now, :, None], np.eye(size)[None, :, :1].repeat(now.sum(), 0)], axis=2
            )
            beta = np.linalg.solve(S, rhs) * scale[now, :, None]
            at = rows[now]
            estimate[at] = beta[:, 0, :p]
            slope[at] = beta[:, 1 : d + 1, :p] / h[None, :, None]
            inv00[at] = beta[:, 0, p] * scale[now, 0]
            used[at] = r
            todo &= ~now
        if not todo.any():
            break
    if todo.any():
        at = rows[todo]
        estimate[at] = R[todo, 0, :] / M[todo, 0, 0][:, None]
        inv00[at] = 1.0 / M[todo, 0, 0]
        used[at] = 0
    return LocalFit(estimate, slope, used, inv00)


def hat_diagonal(
    loo: Partials, loo_fit: LocalFit, own_log: NDArray[np.float64], own_values: NDArray[np.floating],
    degree: int, bandwidth: NDArray[np.floating],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The hat-matrix diagonal ``H_ii`` and the in-sample fits from leave-one-out partials.

    The in-sample fit at ``x_i`` is the local fit from every point, its own term
    ``w_ii e_0 e_0^T`` included, at the highest degree whose system is regular (the rule of
    :func:`solve`), and ``H_ii = w_ii [M_i^-1]_00`` is that fit's. Where the leave-one-out fit
    got the same degree, Sherman-Morrison gives both from the leave-one-out system:
    ``H_ii = t / (1 + t)``, ``t = w_ii [M_{-i}^-1]_00``, and the in-sample fit is
    ``y_i - (1 - H_ii) (y_i - f_{-i})``. Where it fell back to a lower degree (an isolated
    pair of keys under a compact kernel at degree 1: the in-sample line through both
    interpolates, ``H_ii = 1``, while the leave-one-out fit is a constant), the own term is
    merged back and the in-sample system solved.

    Parameters
    ----------
    loo : Partials
        Leave-one-out partials of the training points (queries = keys), with moments.
    loo_fit : LocalFit
        ``solve(loo, degree, bandwidth)``.
    own_log : ndarray of shape (n,)
        Each point's log weight on itself, on the scale of ``loo``.
    own_values : ndarray of shape (n, p)
        The points' values, on the scale of ``loo.value``.
    degree : int
    bandwidth : ndarray of shape (d,)

    Returns
    -------
    hat : ndarray of shape (n,)
    fits : ndarray of shape (n, p)
        The in-sample fits, on the scale of ``loo.value``.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.backends import reference
    >>> from nadaraya.kernels import get
    >>> x = np.array([[0.0], [0.5], [5.0], [5.5]]); y = np.array([[1.0], [2.0], [0.0], [4.0]])
    >>> k = get("epanechnikov")
    >>> loo = reference.partials(x, x, y, kernel=k, bandwidth=np.array([1.0]), moments=1,
    ...                          exclude=np.arange(4))
    >>> hat, fits = hat_diagonal(loo, solve(loo, 1, np.array([1.0])), np.log(0.75) * np.ones(4), y, 1,
    ...                          np.array([1.0]))
    >>> hat.round(12).tolist(), fits[:, 0].round(12).tolist()  # each pair's line interpolates it
    ([1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 0.0, 4.0])
    """
    own_log = np.asarray(own_log, dtype=np.float64)
    values = np.asarray(own_values, dtype=np.float64).reshape(loo.value.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rest = loo.shift.astype(np.float64) + np.log(loo.weight.astype(np.float64))
        t = np.exp(own_log - rest) * loo_fit.inverse00
        hat = np.where(np.isfinite(t), t / (1.0 + t), 1.0)
        fits = values - (1.0 - hat)[:, None] * (values - loo_fit.estimate)
    fits = np.where(hat[:, None] >= 1.0, values, fits)  # interpolated (or no other point)
    fell = np.flatnonzero(loo_fit.degree < degree)
    if degree == 0 or fell.size == 0:
        return hat, fits
    sub = loo[fell]
    dtype = sub.weight.dtype
    own = Partials(own_log[fell].astype(dtype), np.ones(fell.size, dtype=dtype), values[fell].astype(dtype),
                   tuple(np.zeros_like(a) for a in sub.moments))
    full = merge(sub, own)
    fit = solve(full, degree, bandwidth)
    apart = fit.degree != loo_fit.degree[fell]
    if apart.any():
        at = fell[apart]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            share = np.exp(own_log[at] - full.shift[apart] - np.log(full.weight[apart]))
            h_full = share * fit.inverse00[apart]
        hat[at] = np.clip(h_full, 0.0, 1.0)
        fits[at] = fit.estimate[apart]
    return hat, fits
