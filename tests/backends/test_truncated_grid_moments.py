"""The moments of local fits (degree 1 and 2) on the truncated grid of 2 and 3 features, every sum
of every query against plain log-domain sums written out here, and local fits against the reference."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from nadaraya._core.call import choose_backend, prepare
from nadaraya.backends import _choose, reference, truncated
from nadaraya.backends import _truncated_grid as grid
from nadaraya.backends._capabilities import CAPABILITIES, FUSED_MOMENTS
from nadaraya.kernels import get

GAUSS = get("gaussian")


def plain(q, k, v, h, degree, sw=None, exclude=None):
    """Per query, from every key (the left-out one's weight 0): the log of the weights' sum, the
    largest log weight and, over
    that sum, each moment ``sum w (k - q)^(x)j`` (j <= 2 degree), then ``sum w (k - q)^(x)j (x) v``
    (j <= degree), in the order of ``reference.moment_shapes``; also the same with ``|k - q|`` and
    ``|v|`` (nothing cancels: the scale each sum's rounding is held to)."""
    m, d = q.shape
    log_w, tops, sums, bounds = np.empty(m), np.empty(m), [], []
    for i in range(m):
        u = k - q[i]
        with np.errstate(divide="ignore"):
            lw = -0.5 * (((q[i] - k) / h) ** 2).sum(axis=1) + (0.0 if sw is None else np.log(sw))
        if exclude is not None:
            lw[exclude[i]] = -np.inf
        top = lw.max()
        w = np.exp(lw - top)
        total = w.sum()
        log_w[i], tops[i] = top + np.log(total), top
        row, brow = [], []
        for signed, uu, vv in ((True, u, v), (False, np.abs(u), np.abs(v))):
            t, out, with_v = w / total, [], []
            for j in range(1, 2 * degree + 1):
                t = t[:, ..., None] * uu.reshape((k.shape[0],) + (1,) * (j - 1) + (d,))
                out.append(t.sum(axis=0))
                if j <= degree:
                    with_v.append(np.tensordot(t, vv, axes=(0, 0)))
            (row if signed else brow).append(out + with_v)
        sums.append(row[0])
        bounds.append(brow[0])
    stack = lambda rows: [np.stack([r[j] for r in rows]) for j in range(len(rows[0]))]  # noqa: E731
    return log_w, tops, stack(sums), stack(bounds)


def check(q, k, v, h, degree, sw=None, exclude=None, dtype=np.float64, tol=1e-13):
    """The truncated backend's partials with moments against :func:`plain` on every query: the log
    of the weight sum to ``tol`` relative, each normalised moment within ``tol`` of its own
    query's normalised sum of ``|terms|`` (times the largest log weight's magnitude, where above
    1: its rounding), plus what the skipped keys may hold (``2^-60 h^j``
    of the weight, times ``max |v|`` with the values)."""
    part = truncated.partials(q.astype(dtype), k.astype(dtype), v.astype(dtype), kernel=GAUSS,
                              bandwidth=np.asarray(h, dtype=dtype), sample_weight=sw, exclude=exclude,
                              moments=degree)
    log_w, top, want, bound = plain(q, k, v, h, degree, sw, exclude)
    assert part.weight.dtype == dtype and all(x.dtype == dtype for x in part.moments)
    got_log_w = part.shift.astype(np.float64) + np.log(part.weight.astype(np.float64))
    gap = np.abs(got_log_w - log_w)
    assert np.all(gap <= tol * np.maximum(1.0, np.abs(log_w))), float(gap.max())
    assert len(part.moments) == len(want) == 3 * degree
    for j, (got, w, b) in enumerate(zip(part.moments, want, bound, strict=True)):
        assert got.shape == w.shape, (j, got.shape, w.shape)
        norm = got.astype(np.float64) / part.weight.astype(np.float64).reshape((-1,) + (1,) * (w.ndim - 1))
        err = np.abs(norm - w)
        # the skipped keys' terms: under 2^-60 of the largest weight times h^j (and |v|) together
        power, has_v = (j + 1, False) if j < 2 * degree else (j + 1 - 2 * degree, True)
        skipped = 2.0**-60 * np.max(h) ** power * (np.abs(v).max() if has_v else 1.0)
        # log weights of magnitude |top| are rounded to eps |top|: so are the weights, relative
        limit = tol * np.maximum(1.0, np.abs(top)).reshape((-1,) + (1,) * (w.ndim - 1)) * b + skipped
        assert np.all(err <= limit), (j, float(np.max(err / limit)))
    return part


def _data(d, n, seed, p=2):
    rng = np.random.default_rng(seed)
    k = rng.uniform(0.0, 5.0, (n, d))
    v = np.column_stack([np.sin(2 * k[:, 0]) + k[:, -1], rng.normal(size=(n, p - 1))])
    return k, v


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("h", [0.02, 0.3, 30.0])
def test_every_moment_of_every_query(d, degree, h):
    k, v = _data(d, 600, seed=d * 10 + degree)
    q = np.vstack([np.random.default_rng(1).uniform(-1.0, 6.0, (150, d)), k[:30]])
    check(q, k, v, np.full(d, h), degree)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("degree", [1, 2])
def test_leave_one_out_and_sample_weights_with_anisotropic_bandwidths(d, degree):
    k, v = _data(d, 500, seed=d + degree, p=3)
    h = np.array([0.08, 0.5, 1.5])[:d]
    sw = np.random.default_rng(7).uniform(0.1, 4.0, 500)
    sw[::9] = 0.0  # zero-weight keys add nothing
    check(k, k, v, h, degree, exclude=np.arange(500))
    check(k, k, v, h, degree, sw=sw, exclude=np.arange(500))
    check(k[:60] + 0.01, k, v[:, :1], h, degree, sw=sw)


@pytest.mark.parametrize("d", [2, 3])
def test_far_queries_and_duplicated_keys(d):
    rng = np.random.default_rng(d)
    k = np.repeat(rng.uniform(0.0, 1.0, (80, d)), 4, axis=0)  # each key four times
    v = rng.normal(size=(k.shape[0], 2))
    q = np.vstack([k[::5], np.full((1, d), 1e6), k[:1] + 40.0])  # one query 1e6 away, one 40 bandwidths
    for degree in (1, 2):
        check(q, k, v, np.full(d, 0.05 if d == 2 else 0.1), degree, tol=1e-12)
        check(k, k, v, np.full(d, 0.05), degree, exclude=np.arange(k.shape[0]), tol=1e-12)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("degree", [1, 2])
def test_float32_inputs(d, degree):
    k, v = _data(d, 400, seed=5)
    k = k.astype(np.float32).astype(np.float64)
    v = v.astype(np.float32).astype(np.float64)
    q = k[:100] + np.float32(0.03)
    q = q.astype(np.float32).astype(np.float64)
    h = np.array([0.1, 0.2, 0.3], dtype=np.float32)[:d].astype(np.float64)
    check(q, k, v, h, degree, exclude=np.arange(100), dtype=np.float32, tol=2e-6)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("degree", [1, 2])
def test_a_key_beyond_the_plain_radius_counts_in_the_moments(d, degree):
    """A query on a key; the other key, 9.6 bandwidths away, lies beyond the plain radius
    ``sqrt(2 L)`` = 9.2 (its weight under 2^-60 / n of the first's) but within the moments' (9.7
    and 10.1), and a cell boundary of the grid lies between the two radii (a second query moves
    the grid's corner): the far key's ``w u^j`` is all the first query's moments hold."""
    big_l = grid.log_ratio(2)
    r0, side = np.sqrt(2 * big_l), np.sqrt(2 * big_l) / grid.CELLS_PER_RADIUS
    assert r0 < 9.6 < np.sqrt(grid._radius2(big_l, 2 * degree))
    corner = 5 * side - (r0 + 9.6) / 2  # the first query this many bandwidths from the corner
    h = np.full(d, 0.5)
    k = np.zeros((2, d))
    k[1, 0] = 9.6 * 0.5
    q = np.zeros((2, d))
    q[1, 0] = -corner * 0.5
    check(q, k, np.array([[1.0], [2.0]]), h, degree)


def test_no_value_columns():
    k, v = _data(2, 300, seed=3)
    part = truncated.partials(k, k, v[:, :0], kernel=GAUSS, bandwidth=np.array([0.1, 0.2]), moments=2)
    full = truncated.partials(k, k, v, kernel=GAUSS, bandwidth=np.array([0.1, 0.2]), moments=2)
    assert part.value.shape == (300, 0)
    assert [x.shape for x in part.moments[4:]] == [(300, 2, 0), (300, 2, 2, 0)]
    for a, b in zip(part.moments[:4], full.moments[:4], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=0)


@pytest.mark.parametrize("degree", [1, 2])
def test_no_queries(degree):
    """No queries: empty moments of the right shapes (the full tensors gathered from no rows)."""
    k, v = _data(2, 300, seed=3)
    part = truncated.partials(k[:0], k, v, kernel=GAUSS, bandwidth=np.array([0.1, 0.2]), moments=degree)
    want = reference.moment_shapes(degree, 2, v.shape[1])
    assert [x.shape for x in part.moments] == [(0, *s) for s in want]


def test_the_moment_radius_covers_every_skipped_term():
    """``R^2 / 2 - (j / 2) ln R^2 >= slack`` at the radius, and it is within 1 % of the least such."""
    for slack in (40.0, 55.4, 90.0):
        for jp in (0, 2, 4):
            x = grid._radius2(slack, jp)
            assert 0.5 * x - 0.5 * jp * np.log(x) >= slack
            y = 0.99 * x
            assert jp == 0 or 0.5 * y - 0.5 * jp * np.log(y) < slack


def test_the_capabilities_serve_degree_two_in_three_features():
    assert CAPABILITIES["truncated"].degree == (2, 2, 2)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("degree", [1, 2])
def test_local_fits_match_the_reference_backend(d, degree):
    """Local linear to 1e-12 relative; local quadratic to 5e-11 (its 10 x 10 normal equations in
    3-D on 800 keys are ill-conditioned: the fused loop reads 2.5e-12 from the reference there)."""
    rtol = 1e-12 if degree == 1 else 5e-11
    k, v = _data(d, 800, seed=11)
    y = v[:, 0]
    h = np.array([0.15, 0.3, 0.45])[:d]
    sw = np.random.default_rng(2).uniform(0.5, 2.0, 800)
    for kw in ({}, {"sample_weight": sw}):
        a = nadaraya.pool(k[:200], k, y, bandwidth=h, degree=degree, backend="truncated", **kw)
        b = nadaraya.pool(k[:200], k, y, bandwidth=h, degree=degree, backend="reference", **kw)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0)
        a = nadaraya.loo_pool(k, y, bandwidth=h, degree=degree, backend="truncated", **kw)
        b = nadaraya.loo_pool(k, y, bandwidth=h, degree=degree, backend="reference", **kw)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("degree", [0, 1, 2])
def test_the_window_cost_model_with_moments(d, degree):
    """``choose_window`` takes the grid where its pairs at ``GRID_MOMENTS`` cost under half the fused
    loop's at ``FUSED_MOMENTS`` (written out here), on both sides of that line."""
    n = m = 10**5
    exact = n * m * _choose.EXACT_NS_PER_PAIR * FUSED_MOMENTS[degree]
    per_pair = _choose.TRUNCATED_NS["pair"] * _choose.GRID_MOMENTS[d][degree]
    line = (exact / 2 - (n + m) * _choose.TRUNCATED_NS["point"]) / per_pair  # the pairs where it stops paying
    assert _choose.choose_window(GAUSS, n=n, m=m, d=d, moments=degree, pairs=0.98 * line).name == "truncated"
    assert _choose.choose_window(GAUSS, n=n, m=m, d=d, moments=degree, pairs=1.02 * line) is None
    assert _choose.choose_window(GAUSS, n=n, m=m, d=d, moments=3, pairs=1.0) is None


def test_auto_takes_the_grid_for_a_local_linear_fit_with_small_windows():
    """The bench's 2-D cell (n = 5e4 there; 2e4 here, h = 0.01 and 0.014): the windows hold about 1/12
    of the keys; the grid costs about a ninth of the fused loop, and auto's fit is the reference's."""
    x = np.random.default_rng(2).uniform(0.0, 1.0, (20000, 2))
    y = np.sin(6 * x[:, 0]) + x[:, 1]
    h = 0.01 * np.sqrt([1.0, 2.0])
    for degree in (1, 2):
        got = choose_backend(prepare(x, x, y, kernel="gaussian", bandwidth=h), moments=degree)
        assert got.name == "truncated", got
        got = choose_backend(prepare(x, x, y, kernel="gaussian", bandwidth=50 * h), moments=degree)
        assert got.name != "truncated", got  # the windows hold every key
    a = nadaraya.pool(x[:300], x, y, bandwidth=h, degree=1)
    b = nadaraya.pool(x[:300], x, y, bandwidth=h, degree=1, backend="reference")
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)
