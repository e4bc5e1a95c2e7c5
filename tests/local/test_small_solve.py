"""The compiled per-query local solve (``solve._general``) against the NumPy batch rule
(``solve._general_numpy``: eigvalsh of the equilibrated systems, ``np.linalg.solve``), and local
fits through ``pool`` / ``loo_pool`` against weighted least squares written out per query."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import nadaraya
from nadaraya.backends import reference
from nadaraya.kernels import get
from nadaraya.local import solve as S
from nadaraya.partials import Partials


def _run(general, parts, degree, h, **kw):
    m, p = parts.value.shape
    out = (np.full((m, p), np.nan), np.full((m, h.size, p), np.nan), np.full(m, -1, dtype=np.int64),
           np.full(m, np.nan))
    with np.errstate(all="ignore"):
        return general(parts, degree, h, *out, **kw)


def _rconds(parts, degree, h):
    """The NumPy rule's reciprocal condition of every query's block of each degree (0 where a
    diagonal entry is not positive or an entry not finite), (m, degree + 1)."""
    with np.errstate(all="ignore"):
        M, _ = S._systems(parts, degree, h)
    out = np.full((M.shape[0], degree + 1), np.inf)
    for r in range(1, degree + 1):
        n = len(S.monomials(r, h.size))
        Mr = M[:, :n, :n]
        diag = np.einsum("mii->mi", Mr)
        positive = (diag > 0).all(axis=1) & np.isfinite(Mr).all(axis=(1, 2))
        scale = 1.0 / np.sqrt(np.where(diag > 0, diag, 1.0))
        Sr = np.where(positive[:, None, None], Mr * scale[:, :, None] * scale[:, None, :], np.eye(n))
        ev = np.linalg.eigvalsh(Sr)
        out[:, r] = np.where(positive, ev[:, 0] / ev[:, -1], 0.0)
    return out


def _parts(q, x, v, degree, h, kernel="gaussian"):
    return reference.partials(q, x, v, kernel=get(kernel), bandwidth=h, moments=degree)


def _agree(parts, degree, h, rtol, exact):
    got = _run(S._general, parts, degree, h, exact=exact)
    want = _run(S._general_numpy, parts, degree, h)
    np.testing.assert_array_equal(got.degree, want.degree)
    for a, b in ((got.estimate, want.estimate), (got.slope, want.slope), (got.inverse00, want.inverse00)):
        assert np.array_equal(np.isnan(a), np.isnan(b))
        scale = np.nanmax(np.abs(b)) if np.isfinite(b).any() else 1.0
        np.testing.assert_allclose(np.nan_to_num(a), np.nan_to_num(b), rtol=0, atol=rtol * scale)
    return got, want


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize(("d", "degree"), [(2, 1), (2, 2), (2, 3), (3, 1), (3, 2), (3, 3), (4, 1), (4, 2)])
def test_well_conditioned_systems_agree(d, degree, exact):
    rng = np.random.default_rng(10 * d + degree)
    x = rng.uniform(size=(300, d))
    q = rng.uniform(0.3, 0.7, size=(200, d))
    v = rng.normal(size=(300, 2)) + x[:, :1] ** 2
    h = rng.uniform(0.4, 0.6, d)
    got, _ = _agree(_parts(q, x, v, degree, h), degree, h, 1e-12, exact)
    assert (got.degree == degree).all()


def _cut(full, degree, p):
    """``full`` with its values and value moments cut to the first ``p`` columns."""
    moms = list(full.moments)
    for j in range(degree):
        moms[2 * degree + j] = np.ascontiguousarray(moms[2 * degree + j][..., :p])
    return Partials(full.shift, full.weight, np.ascontiguousarray(full.value[:, :p]), tuple(moms))


@pytest.mark.parametrize("p", [0, 1, 3])
@pytest.mark.parametrize(("d", "degree"), [(2, 1), (3, 2)])
def test_value_columns(p, d, degree):
    """p = 0 too (the NumPy rule, which cannot reshape it, is run on one column there)."""
    rng = np.random.default_rng(p)
    x = rng.uniform(size=(200, d))
    q = rng.uniform(0.2, 0.8, size=(50, d))
    h = np.full(d, 0.4)
    full = _parts(q, x, rng.normal(size=(200, 3)), degree, h)
    got = _run(S._general, _cut(full, degree, p), degree, h)
    want = _run(S._general_numpy, _cut(full, degree, max(p, 1)), degree, h)
    assert got.estimate.shape == (50, p) and got.slope.shape == (50, d, p)
    np.testing.assert_array_equal(got.degree, want.degree)
    assert (got.degree == degree).all() and np.isfinite(got.inverse00).all()
    np.testing.assert_allclose(got.inverse00, want.inverse00, rtol=1e-12, atol=0)
    np.testing.assert_allclose(got.estimate, want.estimate[:, :p], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.slope, want.slope[..., :p], rtol=0, atol=1e-11)


def _singular_cases():
    """(name, keys, degree, the degree every query must get)."""
    t = np.linspace(-1.0, 1.0, 40)
    line = np.column_stack([t, 0.5 * t + 0.1])
    angle = np.linspace(0.0, 2 * np.pi, 40, endpoint=False)
    circle = np.column_stack([np.cos(angle), np.sin(angle)]) * 0.5
    yield "collinear keys, degree 1", line, 1, 0
    yield "keys on a line, degree 2", line, 2, 0
    yield "one key", np.array([[0.2, 0.3]]), 1, 0
    yield "two keys, degree 1", np.array([[0.2, 0.3], [0.4, -0.1]]), 1, 0
    yield "keys on a circle, degree 2", circle, 2, 1
    yield "collinear keys in 3-D, degree 2", np.column_stack([t, 2 * t, -t]), 2, 0


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("case", list(_singular_cases()), ids=lambda c: c[0])
def test_singular_systems_fall_back(case, exact):
    _name, x, degree, expected = case
    rng = np.random.default_rng(0)
    d = x.shape[1]
    q = rng.uniform(-0.5, 0.5, size=(60, d))
    v = rng.normal(size=(x.shape[0], 2))
    h = np.full(d, 0.7)
    _got, want = _agree(_parts(q, x, v, degree, h), degree, h, 1e-10, exact)
    assert (want.degree == expected).all()


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize(("d", "degree"), [(2, 1), (2, 2), (3, 1), (3, 2)])
def test_near_singular_fallback_degree_is_the_rule(d, degree, exact):
    """Keys at a distance ``10^-k`` from a line: reciprocal conditions on both sides of the
    threshold; the degree must be the rule's wherever its rcond is clear by a factor 2."""
    rng = np.random.default_rng(d + degree)
    blocks = []
    h = np.full(d, 0.5)
    for k in np.arange(2.0, 9.0, 0.25):
        t = rng.uniform(-1, 1, 60)
        x = np.outer(t, rng.normal(size=d)) + 10.0**-k * rng.normal(size=(60, d))
        q = x[rng.integers(0, 60, 8)]
        blocks.append(_parts(q, x, rng.normal(size=(60, 1)), degree, h))
    stack = [np.concatenate([getattr(b, f) for b in blocks]) for f in ("shift", "weight", "value")]
    parts = Partials(*stack, tuple(np.concatenate(m) for m in zip(*(b.moments for b in blocks), strict=True)))
    rc = _rconds(parts, degree, h)
    clear = ((rc[:, 1:] < S.RCOND / 2) | (rc[:, 1:] > 2 * S.RCOND)).all(axis=1)
    assert clear.mean() > 0.8
    got = _run(S._general, parts, degree, h, exact=exact)
    want = _run(S._general_numpy, parts, degree, h)
    np.testing.assert_array_equal(got.degree[clear], want.degree[clear])
    assert len(set(want.degree[clear].tolist())) >= 2  # both sides of the threshold were seen


def test_zero_weights_and_non_finite_moments():
    rng = np.random.default_rng(3)
    d, degree = 2, 2
    x = rng.uniform(size=(200, d))
    q = np.concatenate([rng.uniform(0.2, 0.8, size=(40, d)), np.full((5, d), 9.0)])  # far: no weight
    h = np.full(d, 0.3)
    parts = _parts(q, x, rng.normal(size=(200, 2)), degree, h, kernel="epanechnikov")
    assert (parts.weight[-5:] == 0).all()
    moms = [m.copy() for m in parts.moments]
    moms[0][0, 1] = np.inf  # order 1: every degree >= 1 is singular
    moms[2][1, 0, 0, 1] = np.nan  # order 3: degree 2 singular, degree 1 regular
    moms[3][2, 1, 1, 1, 1] = np.inf  # order 4
    parts = Partials(parts.shift, parts.weight, parts.value, tuple(moms))
    got, want = _agree(parts, degree, h, 1e-12, False)
    assert got.degree[:3].tolist() == [0, 1, 1] and (got.degree[-5:] == -1).all()
    assert np.isnan(got.estimate[-5:]).all() and np.isnan(got.inverse00[-5:]).all()
    fit = S.solve(parts, degree, h)  # through the public door, rows of zero weight left NaN there
    np.testing.assert_array_equal(fit.degree, want.degree)


def _design(z, degree):
    cols = [np.ones(z.shape[0])]
    for r in range(1, degree + 1):
        for combo in itertools.combinations_with_replacement(range(z.shape[1]), r):
            cols.append(np.prod(z[:, list(combo)], axis=1))
    return np.column_stack(cols)


def _wls(q, x, y, h, degree, exclude_self=False):
    """Per query, the weighted least-squares intercept with Gaussian weights, by lstsq."""
    out = np.empty((q.shape[0], y.shape[1]))
    for i in range(q.shape[0]):
        z = (x - q[i]) / h
        w = np.exp(-0.5 * (z**2).sum(axis=1))
        if exclude_self:
            w[i] = 0.0
        sw = np.sqrt(w)
        out[i] = np.linalg.lstsq(_design(z, degree) * sw[:, None], y * sw[:, None], rcond=None)[0][0]
    return out


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("d", [2, 3])
def test_pool_and_loo_pool_are_weighted_least_squares(d, degree):
    rng = np.random.default_rng(d * 7 + degree)
    x = rng.uniform(size=(150, d))
    y = np.column_stack([np.sin(3 * x[:, 0]) + x[:, -1] ** 2, rng.normal(size=150)])
    q = rng.uniform(0.1, 0.9, size=(60, d))
    h = np.full(d, 0.35)
    got = nadaraya.pool(q, x, y, bandwidth=h, degree=degree)
    np.testing.assert_allclose(got, _wls(q, x, y, h, degree), rtol=0, atol=1e-10)
    loo = nadaraya.loo_pool(x, y, bandwidth=h, degree=degree)
    np.testing.assert_allclose(loo, _wls(x, x, y, h, degree, exclude_self=True), rtol=0, atol=1e-10)


def test_lu_fallback_solve():
    """The LU solve (taken where a regular system's Cholesky factorisation fails) is np.linalg.solve."""
    from nadaraya.local._small_solve import _lu_solve

    rng = np.random.default_rng(5)
    for n in (1, 3, 6, 10):
        A = rng.normal(size=(n, n))
        B = rng.normal(size=(n, 3))
        X, work = B.copy(), np.empty((n, n))
        _lu_solve(A, work, X, n, 3)
        np.testing.assert_allclose(X, np.linalg.solve(A, B), rtol=1e-10, atol=1e-12)


def test_a_read_only_field_among_writeable_ones():
    """A read-only field (memory-mapped, a shared buffer) beside writeable ones: the same fit."""
    rng = np.random.default_rng(0)
    x, h = rng.uniform(size=(50, 2)), np.full(2, 0.4)
    p = reference.partials(x[:5], x, rng.normal(size=(50, 1)), kernel=get("gaussian"), bandwidth=h, moments=1)
    w = p.weight.copy()
    w.flags.writeable = False
    got = S.solve(Partials(p.shift, w, p.value, p.moments), 1, h)
    want = S.solve(p, 1, h)
    np.testing.assert_array_equal(got.estimate, want.estimate)
