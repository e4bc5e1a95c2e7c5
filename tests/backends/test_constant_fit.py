"""The constant kernel's local fits of degree 1 and 2 as one weighted polynomial (constant.local_fit).

Against a plainly written weighted least squares (numpy lstsq per query, and in 50-digit
arithmetic for queries far from the keys), and against the general rule (the constant
backend's moments and nadaraya.local.solve): every query's degree must be the general rule's,
including the singular systems (too few distinct keys, zero weights, queries far enough that the
system is singular) and the queries whose degree sits at the edge of RCOND.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import nadaraya
from nadaraya.backends import _constant_fit, constant
from nadaraya.kernels import get
from nadaraya.local import fit as local_fit_module
from nadaraya.local.solve import RCOND, solve

K = get("constant")
H = np.array([0.1])


def general(q, x, y, degree, w=None, ex=None):
    parts = constant.partials(q, x, y, kernel=K, bandwidth=H, sample_weight=w, exclude=ex, moments=degree)
    return solve(parts, degree, H)


def mine(q, x, y, degree, w=None, ex=None):
    """local_fit, the queries it leaves to the general rule solved by it; ``rest`` how many."""
    rest = []

    def rule(parts):
        rest.append(parts.weight.shape[0])
        return solve(parts, degree, H)

    got = constant.local_fit(q, x, y, kernel=K, degree=degree, rcond=RCOND, solve=rule, sample_weight=w,
                             exclude=ex)
    assert got is not None
    base, (est, slope, used, inv00) = got
    return base, est, slope, used, inv00, sum(rest)


def plain_wls(q, x, y, degree, w=None):
    """Each query's intercept by lstsq over the keys with weight, basis (k - q)^j."""
    w = np.ones(x.shape[0]) if w is None else w
    out = np.empty((q.shape[0], y.shape[1]))
    for i, qq in enumerate(q[:, 0]):
        basis = np.vander(x[:, 0] - qq, degree + 1, increasing=True) * np.sqrt(w)[:, None]
        out[i] = np.linalg.lstsq(basis, y * np.sqrt(w)[:, None], rcond=None)[0][0]
    return out


def exact_wls(q, x, y, degree, w=None):
    """The same in 50 digits (mpmath), for queries far from the keys."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    w = np.ones(x.shape[0]) if w is None else w
    out = np.empty(q.shape[0])
    for i, qq in enumerate(q[:, 0]):
        d = [mpmath.mpf(float(k)) - mpmath.mpf(float(qq)) for k in x[:, 0]]
        M = mpmath.matrix(degree + 1, degree + 1)
        R = mpmath.matrix(degree + 1, 1)
        for a in range(degree + 1):
            R[a] = mpmath.fsum(mpmath.mpf(float(wi)) * di**a * mpmath.mpf(float(yi))
                               for wi, di, yi in zip(w, d, y[:, 0], strict=True))
            for b in range(degree + 1):
                M[a, b] = mpmath.fsum(mpmath.mpf(float(wi)) * di ** (a + b)
                                      for wi, di in zip(w, d, strict=True))
        out[i] = float(mpmath.lu_solve(M, R)[0])
    return out


def data(n=200, seed=0, offset=0.0, spread=1.0):
    rng = np.random.default_rng(seed)
    x = offset + spread * rng.uniform(0.0, 1.0, (n, 1))
    y = np.column_stack([np.sin(6 * (x[:, 0] - offset) / spread), np.cos(3 * (x[:, 0] - offset) / spread)])
    return x, y, rng.uniform(0.0, 2.0, n)


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_against_plain_wls(degree, weighted):
    x, y, w = data()
    w = w if weighted else None
    q = np.linspace(-0.5, 1.5, 41)[:, None]
    _, est, _, used, _, _ = mine(q, x, y, degree, w)
    assert (used == degree).all()
    ref = plain_wls(q, x, y, degree, w)
    assert np.abs(est - ref).max() <= 1e-9 * max(1.0, np.abs(ref).max())
    # loo: every key left out in turn
    _, est, _, used, _, _ = mine(x, x, y, degree, w, np.arange(x.shape[0]))
    for i in range(0, x.shape[0], 7):
        keep = np.arange(x.shape[0]) != i
        ref = plain_wls(x[i:i + 1], x[keep], y[keep], degree, None if w is None else w[keep])
        assert np.abs(est[i] - ref[0]).max() <= 1e-9


@pytest.mark.parametrize("degree", [1, 2])
def test_slopes_and_inverse_match_the_general_rule(degree):
    x, y, w = data(n=120, seed=3)
    q = np.linspace(-1.0, 2.0, 31)[:, None]
    _, est, slope, used, inv00, _ = mine(q, x, y, degree, w)
    ref = general(q, x, y, degree, w)
    assert (used == ref.degree).all()
    np.testing.assert_allclose(est, ref.estimate, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(slope, ref.slope[:, 0], rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(inv00, ref.inverse00, rtol=1e-8)


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("offset,spread", [(0.0, 1.0), (1e6, 1e-3)])
def test_degrees_at_every_distance_are_the_general_rules(degree, offset, spread):
    """Queries from the keys' middle to 1e8 spreads away, densely where the general rule's
    degree changes: every degree equal, every estimate within 1e-9 of the 50-digit WLS (or
    of the general rule where it is as accurate)."""
    x, y, _ = data(n=40, seed=1, offset=offset, spread=spread)
    y = y[:, :1]
    dist = np.geomspace(1e-2, 1e8, 900) * spread
    q = np.concatenate([offset + 0.5 * spread + dist, offset + 0.5 * spread - dist])[:, None]
    ref = general(q, x, y, degree)
    _, est, _, used, _, rest = mine(q, x, y, degree)
    assert (used == ref.degree).all()
    assert rest < q.shape[0] // 4  # the band left to the general rule is narrow
    # the degree changes within this sweep
    assert len(np.unique(ref.degree)) == degree + 1
    # densely across each change of degree
    change = np.flatnonzero(np.diff(ref.degree) != 0)
    near = np.concatenate([np.linspace(q[i, 0], q[i + 1, 0], 300) for i in change])[:, None]
    assert (mine(near, x, y, degree)[3] == general(near, x, y, degree).degree).all()
    pick = np.arange(0, q.shape[0], 45)
    for i in pick:
        exact = exact_wls(q[i:i + 1], x, y, int(used[i]))[0]
        assert abs(est[i, 0] - exact) <= 1e-9 * max(1.0, abs(exact)), (i, est[i, 0], exact)


def test_one_distinct_key_and_two():
    """Too few distinct keys: degree 1 with one, degree 2 with two (and one), as the general rule."""
    rng = np.random.default_rng(5)
    y = rng.normal(size=(6, 1))
    q = np.array([[0.3], [1.0 / 3.0], [2.0], [-7.0], [1e6]])
    for keys, degree in [([1.0 / 3.0] * 6, 1), ([1.0 / 3.0] * 6, 2), ([0.1, 0.1, 0.1, 0.7, 0.7, 0.7], 2),
                         ([0.1, 0.7, 0.7, 0.7, 0.7, 0.7], 2), ([0.25, 0.25, 1.5, 1.5, 1.5, 1.5], 1)]:
        x = np.array(keys)[:, None]
        for ex in (None, np.arange(6)):
            qq = x if ex is not None else q
            ref = general(qq, x, y, degree, ex=ex)
            _, est, _, used, _, _ = mine(qq, x, y, degree, ex=ex)
            assert (used == ref.degree).all(), (keys, degree, used, ref.degree)
            ok = used >= 0
            np.testing.assert_allclose(est[ok], ref.estimate[ok], rtol=1e-9, atol=1e-12)


def test_zero_weights():
    x, y, w = data(n=30, seed=2)
    w[:] = 0.0
    assert constant.local_fit(x, x, y, kernel=K, degree=1, rcond=RCOND, solve=None, sample_weight=w) is None
    # one key of weight: degree 1 singular everywhere (the others weigh nothing)
    w[4] = 1.5
    for degree in (1, 2):
        ref = general(x, x, y, degree, w)
        _, est, _, used, _, _ = mine(x, x, y, degree, w)
        assert (used == ref.degree).all() and (used == 0).all()
        np.testing.assert_allclose(est, np.repeat(y[4:5], 30, axis=0), rtol=1e-14)
        # loo: the query leaving out the key of weight has none
        ex = np.arange(30)
        ref = general(x, x, y, degree, w, ex)
        base, _, _, used, _, _ = mine(x, x, y, degree, w, ex)
        assert (used == ref.degree).all() and used[4] == -1
        assert base.weight[4] == 0 and base.shift[4] == -np.inf


@pytest.mark.parametrize("degree", [1, 2])
def test_pool_and_loo_pool_end_to_end(degree, monkeypatch):
    """nadaraya.pool / loo_pool on the constant backend: the answers of the per-query rule, the
    same warnings; float32 is the float64 call of the rounded inputs, rounded once (its degrees
    and warnings too: far queries included)."""
    x, y, w = data(n=300, seed=4)
    q = np.concatenate([np.linspace(-2, 3, 60), [0.5 + 3e4, 0.5 - 1e5, 2e6]])
    kw = {"kernel": "constant", "backend": "constant", "bandwidth": 0.1, "degree": degree}
    f32 = np.float32
    calls = [
        lambda: nadaraya.pool(q, x[:, 0], y, **kw),
        lambda: nadaraya.pool(q, x[:, 0], y[:, 0], sample_weight=w, **kw),
        lambda: nadaraya.loo_pool(x[:, 0], y[:, 0], sample_weight=w, **kw),
        lambda: nadaraya.loo_pool(x[:, 0], y, **kw),
        lambda: nadaraya.pool(q.astype(f32), x[:, 0].astype(f32), y[:, 0].astype(f32), **kw),
    ]
    for i, call in enumerate(calls):
        with warnings.catch_warnings(record=True) as new_warn:
            warnings.simplefilter("always")
            new = call()
        if i == 4:  # float32: the one polynomial in float64, rounded once, at float64's degrees
            with warnings.catch_warnings(record=True) as wide_warn:
                warnings.simplefilter("always")
                wide = nadaraya.pool(q.astype(f32).astype(float), x[:, 0].astype(f32).astype(float),
                                     y[:, 0].astype(f32).astype(float), **kw)
            assert [str(m.message) for m in new_warn] == [str(m.message) for m in wide_warn]
            assert new.dtype == f32
            assert np.all(np.abs(new - wide) <= 1e-6 * np.maximum(1.0, np.abs(wide)))
            continue
        with monkeypatch.context() as mp:
            mp.setattr(local_fit_module, "_constant_fit", lambda *a: None)
            with warnings.catch_warnings(record=True) as old_warn:
                warnings.simplefilter("always")
                old = call()
        assert [str(m.message) for m in new_warn] == [str(m.message) for m in old_warn]
        assert new.dtype == old.dtype
        np.testing.assert_allclose(new, old, rtol=1e-6, atol=1e-9)


def test_loo_rows_agree_with_the_backends_loo_sums():
    """The loo rows (one value column, the general layout) are the backend's leave-one-out
    moments about the centre: prefix and suffix, the left-out key masked."""
    rng = np.random.default_rng(7)
    n = 50
    k = rng.uniform(-1, 1, (n, 1))
    s = rng.uniform(0, 1, n)
    v1 = rng.normal(size=(n, 1))
    v2 = rng.normal(size=(n, 2))
    for ex in (np.arange(n), rng.permutation(np.concatenate([np.arange(n), [-1, -1, 3]]))):
        for degree in (1, 2):
            mono = constant._monomials(1, 2 * degree)
            parent, feature = constant._parents(mono)
            for v in (v1, v2):
                ref = constant._left_out(k, s, v, np.zeros(1), np.ones(1), parent, feature, degree + 1, ex).T
                got = _constant_fit.loo_rows(k[:, 0], s, v, degree, ex)
                np.testing.assert_array_equal(got, ref)
            got1 = _constant_fit.loo_rows1(k, s, v1, 0.0, 1.0, degree, ex)
            ref = _constant_fit.loo_rows(k[:, 0], s, v1, degree, ex)
            np.testing.assert_array_equal(got1, ref)
            # masked, not subtracted: each row is the plain sum over the other keys
            keep = [np.arange(n) != e if e >= 0 else np.ones(n, bool) for e in ex]
            plain = np.array([[np.sum(s[m] * k[m, 0] ** 2)] for m in keep])
            np.testing.assert_allclose(got1[:, 2:3], plain, rtol=1e-13)


@pytest.mark.parametrize("case", ["lognormal", "five values", "outlier"])
@pytest.mark.parametrize("degree", [1, 2])
def test_odd_keys(case, degree):
    """Heavy tails, duplicates, one far key of large weight (its left-out rows lose the keys'
    spread): the rule's degrees, and the plain WLS within 1e-9 where the query is in range."""
    rng = np.random.default_rng(11)
    n = 80
    w = rng.uniform(0.5, 1.5, n)
    if case == "lognormal":
        x = rng.lognormal(0.0, 1.5, n)
    elif case == "five values":
        x = rng.choice([0.0, 0.25, 0.5, 2.0, 3.0], n)
    else:
        x = rng.uniform(0.0, 1e-3, n)
        x[7], w[7] = 50.0, 1e3
    x = x[:, None]
    y = np.sin(x) + rng.normal(0.0, 0.1, (n, 1))
    q = np.concatenate([np.linspace(x.min(), x.max(), 25), x.max() + np.geomspace(1.0, 1e7, 25)])[:, None]
    for qq, ex in ((q, None), (x, np.arange(n))):
        ref = general(qq, x, y, degree, w, ex)
        _, est, _, used, _, _ = mine(qq, x, y, degree, w, ex)
        assert (used == ref.degree).all()
    _, est, _, used, _, _ = mine(q[:25], x, y, degree, w)
    fine = used == degree
    # the outlier's keys are two clusters 5e4 spreads apart: nearly two points, singular at degree 2
    assert fine.sum() >= 20 if (case, degree) != ("outlier", 2) else not fine.any()
    if fine.any():
        ref = plain_wls(q[:25][fine], x, y, degree, w)
        assert np.abs(est[fine] - ref).max() <= 1e-9 * max(1.0, np.abs(ref).max())
