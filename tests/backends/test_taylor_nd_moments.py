"""The taylor backend's moments in 2 and 3 features (issue 16, item 5): the sums of local linear and
quadratic fits within the stated bound on every query and every tensor entry, with and without a
left-out key; local fits with ``tol`` on the series against the exact fits; the choice behind
``backend="auto"``."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import nadaraya
from nadaraya import backends
from nadaraya.backends import _taylor_nd, reference
from nadaraya.kernels import get as kernel

GAUSS = kernel("gaussian")


@pytest.fixture
def series_everywhere(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every box the series can certify takes it (the exact sums priced out of the cost model);
    returns the list to which each call's exact rows are counted."""
    monkeypatch.setitem(_taylor_nd.NS, "pair", 1e9)
    exact_rows: list[int] = []
    inner = _taylor_nd.exact_rows

    def counted(rows, *args):  # type: ignore[no-untyped-def]
        exact_rows.append(rows.size)
        return inner(rows, *args)

    monkeypatch.setattr(_taylor_nd, "exact_rows", counted)
    return exact_rows


def _data(d: int, n: int, m: int, seed: int):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 4, (n, d))
    q = rng.uniform(-0.5, 4.5, (m, d))
    v = np.column_stack([np.sin(x).sum(axis=1), rng.uniform(-3, 1, n)])
    sw = rng.uniform(0.2, 3.0, n)
    sw[rng.random(n) < 0.1] = 0.0
    return q, x, v, sw


def _h_power(h: np.ndarray, j: int) -> np.ndarray:
    """``h^gamma`` for every entry ``(i_1 .. i_j)`` of a j-th moment tensor, as a (d,) * j array."""
    out = np.ones((h.size,) * j)
    for cell in itertools.product(range(h.size), repeat=j):
        out[cell] = math.prod(h[i] for i in cell)
    return out


@pytest.mark.parametrize(("d", "degree", "tol"), [
    (2, 1, 1e-4), (2, 1, 1e-10), (2, 2, 1e-4), (2, 2, 1e-10),
    # in 3-D the series of a local fit reaches its most terms (MAX_TERMS) near 1e-6 at these boxes
    (3, 1, 1e-3), (3, 1, 1e-6), (3, 2, 1e-3), (3, 2, 1e-5),
])
@pytest.mark.parametrize("loo", [False, True])
def test_every_moment_within_the_stated_bound(series_everywhere, d: int, degree: int, tol: float,
                                               loo: bool) -> None:
    """The bound of the module's text, entry by entry: each sum ``sum_i s_i w_i (x_i - q)^gamma g_i``
    within ``tol (1 + rho)^j h^gamma max|g| W`` of the exact one (``j = |gamma|``, ``W`` the
    query's exact weight, ``g`` = 1 or a value column)."""
    rho = 0.5
    n, m = (1500, 400) if d == 2 else (700, 150)
    q, x, v, sw = _data(d, n, m, seed=10 * d + degree)
    h = np.array([1.1, 1.7, 2.3][:d])
    exclude = np.random.default_rng(d).integers(0, n, m) if loo else None
    got = _taylor_nd.partials(q, x, v, kernel=GAUSS, bandwidth=h, sample_weight=sw, tol=tol, rho=rho,
                              exclude=exclude, moments=degree)
    exact = reference.partials(q, x, v, kernel=GAUSS, bandwidth=h, sample_weight=sw, exclude=exclude,
                               moments=degree)
    assert sum(series_everywhere) < m / 2  # most queries took the series
    scale = np.exp(got.shift - exact.shift)
    weight = exact.weight
    vmax = np.abs(v[sw > 0]).max(axis=0)
    assert np.all(np.abs(got.weight * scale - weight) <= tol * weight)
    assert np.all(np.abs(got.value * scale[:, None] - exact.value) <= tol * weight[:, None] * vmax)
    shapes = reference.moment_shapes(degree, d, v.shape[1])
    assert [s.shape[1:] for s in got.moments] == shapes
    orders = [(j, False) for j in range(1, 2 * degree + 1)] + [(j, True) for j in range(1, degree + 1)]
    for (j, valued), a, b in zip(orders, got.moments, exact.moments, strict=True):
        bound = tol * (1 + rho) ** j * _h_power(h, j)[None]  # (1, d, ..., d)
        if valued:
            bound = bound[..., None] * vmax
        per_query = weight.reshape((-1,) + (1,) * (a.ndim - 1))
        err = np.abs(a * scale.reshape(per_query.shape) - b)
        assert np.all(err <= bound * per_query), (j, valued, float((err / (bound * per_query)).max()))


@pytest.mark.parametrize("degree", [1, 2])
def test_keys_beyond_the_drop_radius_weigh_within_the_bound_with_their_moments(series_everywhere,
                                                                                degree: int) -> None:
    """One key at the centre of the queries' box and many in a narrow cone 6.5 to 8 bandwidths out,
    towards the queries at the box's far corner: the moments of the cone's keys grow as
    ``|x - q|^(2 degree)``, so the drop radius must grow with the degree (module text); the one
    plain sums take would drop keys whose moments pass the bound."""
    rng = np.random.default_rng(degree)
    angle, radius = rng.uniform(np.pi / 4 - 0.05, np.pi / 4 + 0.05, 40000), rng.uniform(6.5, 8, 40000)
    x = 0.5 + np.vstack([[0.0, 0.0], np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])])
    # the box of half-width 0.5 bandwidths from the corner (0, 0): centred at (0.5, 0.5)
    q = np.vstack([[0.0, 0.0], rng.uniform(0.9, 1.0, (200, 2))])
    v = np.ones((x.shape[0], 1))
    h, tol, rho = np.ones(2), 1e-4, 0.5
    got = _taylor_nd.partials(q, x, v, kernel=GAUSS, bandwidth=h, sample_weight=None, tol=tol, rho=rho,
                              moments=degree)
    exact = reference.partials(q, x, v, kernel=GAUSS, bandwidth=h, moments=degree)
    assert sum(series_everywhere) == 0
    scale = np.exp(got.shift - exact.shift)
    top = got.moments[2 * degree - 1]  # the highest power: sum w (x - q)^(x) 2 degree
    err = np.abs(top * scale.reshape((-1,) + (1,) * (top.ndim - 1)) - exact.moments[2 * degree - 1])
    bound = tol * (1 + rho) ** (2 * degree) * exact.weight.reshape((-1,) + (1,) * (top.ndim - 1))
    assert np.all(err <= bound), float((err / bound).max())


@pytest.fixture
def series_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The moments (local polynomial degree) of each call of the series in 2 and 3 features."""
    calls: list[int] = []
    inner = _taylor_nd.partials

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(kwargs.get("moments", 0))
        return inner(*args, **kwargs)

    monkeypatch.setattr(_taylor_nd, "partials", counted)
    return calls


def _plane_data(n: int, seed: int):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 5, (n, 2))
    return x, np.sin(x[:, 0]) * np.cos(x[:, 1]) + rng.normal(0, 0.1, n)


def test_auto_takes_the_series_for_local_fits_where_it_pays() -> None:
    x, _ = _plane_data(60000, 0)
    for degree in (1, 2):
        wide = backends.choose_for_data(GAUSS, x, x, np.array([1.0, 1.0]), tol=1e-8, moments=degree)
        assert wide is not None and wide.name == "taylor"
        assert f"the moment sums of a degree-{degree} local fit within their stated bound" in wide.reason
    # narrow windows: the series would need a box per query (the exact loop, or no choice here)
    narrow = backends.choose_for_data(GAUSS, x, x, np.array([0.01, 0.01]), tol=1e-8, moments=1)
    assert narrow is None or narrow.name != "taylor"
    assert backends.choose_for_data(GAUSS, x, x, np.array([1.0, 1.0]), moments=1) is None  # exact


@pytest.mark.parametrize("degree", [1, 2])
def test_local_fits_with_tol_take_the_series_and_match_the_exact_fits(series_calls, degree: int) -> None:
    x, y = _plane_data(30000, degree)
    q = np.random.default_rng(5).uniform(0, 5, (30000, 2))  # many queries per box: the series pays
    fast = nadaraya.NadarayaWatson(bandwidth=[1.5, 2.0], degree=degree, tol=1e-10).fit(x, y).predict(q)
    assert degree in series_calls
    exact = nadaraya.NadarayaWatson(bandwidth=[1.5, 2.0], degree=degree).fit(x, y).predict(q[:1500])
    fast = fast[:1500]
    # the bound is on the sums (module text); a fit's conditioning takes it to the prediction
    assert np.abs(fast - exact).max() <= 1e-7 * np.abs(y).max()


def test_local_linear_with_tol_reproduces_a_plane(series_calls) -> None:
    x, _ = _plane_data(30000, 7)
    y = 1.5 + 2.0 * x[:, 0] - 3.0 * x[:, 1]
    q = np.random.default_rng(8).uniform(0, 5, (30000, 2))
    got = nadaraya.NadarayaWatson(bandwidth=[1.5, 1.5], degree=1, tol=1e-10).fit(x, y).predict(q)
    assert 1 in series_calls
    assert np.abs(got - (1.5 + 2.0 * q[:, 0] - 3.0 * q[:, 1])).max() <= 1e-7 * np.abs(y).max()


def test_local_linear_leave_one_out_with_tol_takes_the_series_and_matches_the_exact(series_calls) -> None:
    """The passes of a local fit's CV: each point fitted without itself, on the series."""
    x, y = _plane_data(30000, 3)
    fast = nadaraya.loo_pool(x, y, bandwidth=[1.5, 2.0], degree=1, tol=1e-10)
    assert 1 in series_calls
    exact = nadaraya.loo_pool(x, y, bandwidth=[1.5, 2.0], degree=1)  # the fused loop
    assert np.abs(fast - exact).max() <= 1e-7 * np.abs(y).max()


def test_float32_zero_weights_and_no_queries_keep_their_shapes(series_everywhere) -> None:
    q, x, v, sw = _data(2, 600, 120, seed=9)
    h = np.array([1.2, 1.6])
    f64 = _taylor_nd.partials(q, x, v, kernel=GAUSS, bandwidth=h, sample_weight=sw, tol=1e-8, moments=1)
    f32 = _taylor_nd.partials(q.astype(np.float32), x.astype(np.float32), v.astype(np.float32), kernel=GAUSS,
                              bandwidth=h, sample_weight=sw, tol=1e-8, moments=1)
    assert all(a.dtype == np.float32 for a in (f32.shift, f32.weight, f32.value, *f32.moments))
    scale = np.exp(f32.shift.astype(float) - f64.shift)
    for a, b in zip((f32.weight, *f32.moments), (f64.weight, *f64.moments), strict=True):
        ref = np.abs(b).max() + 1e-300
        assert np.abs(a * scale.reshape((-1,) + (1,) * (a.ndim - 1)) - b).max() <= 1e-5 * ref
    none = _taylor_nd.partials(q, x, v, kernel=GAUSS, bandwidth=h, sample_weight=np.zeros(600), tol=1e-8,
                               moments=2)
    assert [s.shape for s in none.moments] == [(120, *s) for s in reference.moment_shapes(2, 2, 2)]
    assert not none.weight.any() and not any(s.any() for s in none.moments)
    empty = _taylor_nd.partials(q[:0], x, v, kernel=GAUSS, bandwidth=h, sample_weight=sw, tol=1e-8, moments=1)
    assert [s.shape for s in empty.moments] == [(0, *s) for s in reference.moment_shapes(1, 2, 2)]


def test_local_linear_selection_with_tol_picks_what_the_exact_search_picks(series_calls) -> None:
    """Item 5's promise for local fits in two features: a search with ``tol=1e-8`` (its passes at
    wide bandwidths on the series) picks a bandwidth whose exact CV is within 1e-6 of the exact
    search's best."""
    from nadaraya.bandwidth import score_bandwidth

    x, y = _plane_data(10000, 11)
    fast = nadaraya.select_bandwidth(x, y, degree=1, tol=1e-8)
    assert 1 in series_calls
    exact = nadaraya.select_bandwidth(x, y, degree=1)
    rescored = score_bandwidth(x, y, fast.bandwidth, degree=1)
    assert rescored <= exact.score * (1 + 1e-6)
