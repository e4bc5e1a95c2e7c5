"""The dense cells' moments (local fits of degree 1 and 2): wider cells, the leave-one-out cell's
sub-cells and the walks' chunked Horner passes, every moment sum against the reference backend."""

from __future__ import annotations

import math

import numpy as np
import pytest

from _spies import cells_served
from nadaraya.backends import _truncated_cells, reference, truncated
from nadaraya.backends._truncated_sums import horner, horner_each
from nadaraya.kernels import get

GAUSS = get("gaussian")


@pytest.fixture
def served(monkeypatch):
    """The share of queries the dense cells served in each truncated call."""
    return cells_served(monkeypatch)


def _abs_moments(q, k, v, h, shift, exclude):
    """Per query under ``shift``, bounds of ``sum w |k - q|^j`` (j <= 4) and ``sum w |v| |k - q|^j``
    (j <= 2), the scale each moment's rounding is held to: the even ones are the reference's own
    (nothing cancels), the odd ones Cauchy-Schwarz's ``(S_(j-1) S_(j+1))^(1/2)``."""
    kw = {"kernel": GAUSS, "bandwidth": np.array([h]), "moments": 2, "exclude": exclude}
    ref = reference.partials(q[:, None], k[:, None], np.abs(v), **kw)
    f = np.exp(ref.shift - shift)
    w = [ref.weight * f] + [mom.reshape(q.size) * f for mom in ref.moments[:4]]
    val = [ref.value * f[:, None]] + [mom.reshape(q.size, -1) * f[:, None] for mom in ref.moments[4:6]]
    weight = np.stack([np.sqrt(w[0] * w[2]), w[2], np.sqrt(w[2] * w[4]), w[4]], 1)
    return weight, np.stack([np.sqrt(val[0] * val[2]), val[2]], 1)


def _same_sums(q, k, v, h, degree, exclude=None, tol=1e-14, mtol=4e-14):
    """Every sum of the truncated backend (weight, values, each moment) against the reference's on
    every query: the weight and values within ``tol`` of the column's largest absolute term, each
    moment within ``mtol`` of its own query's sum of ``|terms|`` (``sum w |v| |k - q|^j``)."""
    kw = {"kernel": GAUSS, "bandwidth": np.array([h]), "moments": degree, "exclude": exclude}
    a = truncated.partials(q[:, None], k[:, None], v, **kw)
    b = reference.partials(q[:, None], k[:, None], v, **kw)
    mags = reference.partials(q[:, None], k[:, None], np.abs(v), **{**kw, "moments": 0})
    scale = np.exp(a.shift - b.shift)
    np.testing.assert_allclose(a.weight * scale, b.weight, rtol=tol, atol=0)
    vmax = mags.value.max() / mags.weight.min()  # a bound of every value column's scale
    np.testing.assert_allclose(a.value * scale[:, None], b.value, rtol=0, atol=tol * vmax * b.weight.max())
    aw, av = _abs_moments(q, k, v, h, b.shift, exclude)
    for j, (ma, mb) in enumerate(zip(a.moments, b.moments, strict=True)):
        bound = aw[:, j, None] if j < 2 * degree else av[:, j - 2 * degree]
        ma = ma.reshape(q.size, -1) * scale[:, None]
        err = np.abs(ma - mb.reshape(q.size, -1))
        assert np.all(err <= mtol * bound), (j, float(np.max(err / bound)))


def _data(n, seed, origin=0.0):
    rng = np.random.default_rng(seed)
    x = origin + rng.uniform(0.0, 1.0, n)
    v = np.column_stack([np.sin(6 * (x - origin)), rng.normal(size=n), np.ones(n)])
    return x, v


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("p", [1, 3])
def test_wide_cells_match_the_reference_on_every_query(served, degree, p):
    x, v = _data(3000, seed=degree)
    q = np.linspace(-0.05, 1.05, 2500)
    _same_sums(q, x, v[:, :p], 0.01, degree)
    assert served[-1] > 0.9


@pytest.mark.parametrize("degree", [1, 2])
def test_leave_one_out_sub_cells_in_chunks_match_the_reference(served, degree):
    """Wide cells of about 1600 keys: each sub-cell's walk has more queries than two chunks."""
    x, v = _data(8000, seed=3 + degree)
    h = 0.08
    assert np.ptp(x) >= _truncated_cells.WIDE_CELLS * _truncated_cells.RHO_MOMENTS * h
    assert 8000 * _truncated_cells.RHO_MOMENTS * h / _truncated_cells.SUB > 2 * 256
    _same_sums(x, x, v[:, :2], h, degree, exclude=np.arange(x.size))
    assert served[-1] > 0.9


def test_some_queries_leave_out_a_key_and_duplicates(served):
    """Duplicated keys (their twin stays in), and only every third query leaving out its key."""
    x, v = _data(2000, seed=7)
    x = np.concatenate([x, x[:500]])
    v = np.concatenate([v, v[:500]])
    ex = np.where(np.arange(x.size) % 3 == 0, np.arange(x.size), -1)
    _same_sums(x, x, v[:, :1], 0.01, 1, exclude=ex)
    assert served[-1] > 0.9


@pytest.mark.parametrize("exclude", [False, True])
def test_far_from_the_origin(served, exclude):
    """Keys near 1e6 with a small bandwidth: the centres' rounding widens the cells' bound."""
    x, v = _data(3000, seed=11, origin=1e6)
    _same_sums(x, x, v[:, :1], 0.01, 2, exclude=np.arange(x.size) if exclude else None, tol=1e-11,
               mtol=1e-11)
    assert served[-1] > 0.9


def test_float32_rounds_once():
    x, v = _data(3000, seed=13)
    kw = {"kernel": GAUSS, "bandwidth": np.array([0.01]), "moments": 1, "exclude": np.arange(x.size)}
    a = truncated.partials(x[:, None].astype(np.float32), x[:, None].astype(np.float32),
                           v[:, :1].astype(np.float32), **kw)
    b = truncated.partials(x.astype(np.float32).astype(np.float64)[:, None],
                           x.astype(np.float32).astype(np.float64)[:, None],
                           v[:, :1].astype(np.float32).astype(np.float64), **kw)
    assert a.weight.dtype == np.float32
    got = a.finalize()[:, 0].astype(np.float64)
    np.testing.assert_allclose(got, b.finalize()[:, 0], rtol=2e-6, atol=2e-6)


def _derivative(coef, a, j):
    """The ``j``-th derivative over ``j!`` of ``sum_k coef[k] a^k``, term by term."""
    out = np.zeros_like(a)
    for k in range(j, coef.size):
        out += coef[k] * math.comb(k, j) * a ** (k - j)
    return out


def test_horner_passes_against_a_plain_polynomial():
    """The four-terms-at-a-time passes (shared and per-query coefficients) and their derivatives."""
    rng = np.random.default_rng(17)
    a = rng.uniform(-1.25, 1.25, 37)
    for nt in (1, 2, 5, 8, 17, 23):
        mom = rng.normal(size=(nt, 2))
        co = rng.normal(size=(nt, 40))
        for jmax in (0, 1, 2, 4):
            pd = np.full((5, 37), np.nan)
            horner(mom, nt, 1, jmax, a, 37, pd)
            pe = np.full((5, 37), np.nan)
            horner_each(co, 3, nt, jmax, a, 37, pe)
            for j in range(jmax + 1):
                np.testing.assert_allclose(pd[j], _derivative(mom[:, 1], a, j), rtol=1e-12, atol=1e-12)
                each = [_derivative(co[:, 3 + i], a[i:i + 1], j)[0] for i in range(37)]
                np.testing.assert_allclose(pe[j], each, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("jitter", [1e-3, 1e-5])
def test_clustered_keys_hold_every_moment_to_its_own_size(degree, jitter):
    """Keys in tight clusters, the queries on them: the moments about a query are far below the
    cells' centred powers; the queries whose shift from the centres would lose digits are summed
    key by key (each moment within 4e-14 of its own sum of |terms|)."""
    rng = np.random.default_rng(5)
    h = 0.01
    centres = np.arange(40) * 6 * h + 0.37 * h
    x = np.sort((centres[:, None] + rng.normal(0.0, jitter * h, (40, 60))).ravel())
    v = np.column_stack([np.sin(50 * x), (x - np.repeat(centres, 60)) / (jitter * h)])
    _same_sums(x, x, v, h, degree)
    _same_sums(x, x, v, h, degree, exclude=np.arange(x.size))


@pytest.mark.parametrize("h", [1.5e-9, 3.6e-9])
def test_bandwidth_a_few_ulps_of_the_keys(h):
    """Keys near 1e6 and a bandwidth of a few of their ulps: the wide cells' bound would pass 2.5
    bandwidths, so the cells are the narrow ones (or none); every moment stays exact."""
    rng = np.random.default_rng(0)
    x = 1e6 + np.sort(rng.uniform(0.0, 60 * h, 1500))
    v = np.sin(x / h)[:, None]
    for degree in (1, 2):
        _same_sums(x, x, v, h, degree, tol=1e-11, mtol=1e-11)
        _same_sums(x, x, v, h, degree, exclude=np.arange(x.size), tol=1e-11, mtol=1e-11)
