"""The binned backend: every prediction within tol * max|v| of dense log-domain sums, on every query."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nadaraya
from nadaraya import backends
from nadaraya.backends import binned, reference
from nadaraya.kernels import get


def dense(q, x, v, kernel, h, sw=None):
    """Predictions from plain log-domain sums over every key (1-D arrays, or (m, 2) and (n, 2) with
    one bandwidth per feature: the product kernel's log weight is the sum over features)."""
    if q.ndim == 2:
        prof = get(kernel).log_profile
        lw = sum(prof((q[:, None, k] - x[None, :, k]) / h[k]) for k in range(q.shape[1]))
    else:
        lw = get(kernel).log_profile((q[:, None] - x[None, :]) / h)
    if sw is not None:
        with np.errstate(divide="ignore"):  # zero weights: log weight -inf
            lw = lw + np.log(sw)[None, :]
    w = np.exp(lw - lw.max(axis=1, keepdims=True))
    return (w @ v) / w.sum(axis=1, keepdims=True)


def check(q, x, v, kernel, h, tol, sw=None):
    part = binned.partials(q[:, None], x[:, None], v, kernel=get(kernel), bandwidth=np.array([h]), tol=tol,
                           sample_weight=sw)
    err = np.abs(part.finalize() - dense(q, x, v, kernel, h, sw))
    assert np.all(err <= tol * np.abs(v).max(axis=0)), float((err / np.abs(v).max(axis=0)).max() / tol)
    return part


@pytest.mark.parametrize("kernel", ["logistic", "gaussian"])
@pytest.mark.parametrize("h", [5e-6, 1e-3, 0.05, 1.0, 5e3])  # 1e-6 to 1e3 times the keys' range
@pytest.mark.parametrize("tol", [1e-3, 1e-6, 1e-10])
def test_every_prediction_is_within_tol(kernel: str, h: float, tol: float, monkeypatch) -> None:
    monkeypatch.setattr(binned, "GRID_MAX", 2**20)  # finer grids are computed exactly: quick tests
    rng = np.random.default_rng(int(h * 1e6) % 1000 + int(-np.log10(tol)))
    x = rng.uniform(0, 5, 3000)
    v = np.column_stack([2 * np.sin(x) + x + rng.normal(0, 0.5, x.size), rng.normal(size=x.size)])
    q = np.concatenate([rng.uniform(-1, 6, 1500), x[:200], [-50.0, 1e4]])  # far queries too
    check(q, x, v, kernel, h, tol)


def test_weights_duplicates_and_heavy_tails() -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate([np.repeat(rng.uniform(0, 1, 200), 4), rng.standard_cauchy(1000)])
    v = np.sin(3 * x)[:, None]
    sw = rng.uniform(0.1, 5.0, x.size)
    sw[::9] = 0.0
    q = np.concatenate([x[::5], rng.standard_cauchy(500)])
    for h in (0.001, 0.1):
        check(q, x, v, "logistic", h, 1e-6, sw=sw)


def test_most_queries_amid_the_keys_are_served_by_the_grid() -> None:
    """The certificate holds where the keys are dense: the exact fallback is for the rest."""
    rng = np.random.default_rng(4)
    x = rng.uniform(0, 5, 20000)
    v = np.sin(x)[:, None]
    q = rng.uniform(0.5, 4.5, 5000)
    assert served(q[:, None], x[:, None], v, "logistic", np.array([0.01]), 1e-6) > 0.99


def served(q, x, v, kernel, h, tol):
    """The share of the queries that the grid's bound certifies (on a grid partials would build)."""
    assert binned.grid_points(q, x, h, tol, kernel)[1]
    cols = np.column_stack([np.ones(x.shape[0]), v])
    w, val, ok = np.zeros(q.shape[0]), np.zeros((q.shape[0], v.shape[1])), np.zeros(q.shape[0], dtype=bool)
    binned._binned_sums(q, x, cols, np.abs(v).max(axis=0), get(kernel), h, tol, w, val, ok)
    return ok.mean()


def test_float32_in_float32_out() -> None:
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 5, 2000).astype(np.float32)
    v = np.sin(x)[:, None].astype(np.float32)
    part = binned.partials(x[:, None], x[:, None], v, kernel=get("logistic"),
                           bandwidth=np.array([0.05], np.float32), tol=1e-4)
    assert part.weight.dtype == np.float32
    exact = reference.partials(x[:, None], x[:, None], v, kernel=get("logistic"), bandwidth=np.array([0.05]))
    assert np.abs(part.finalize() - exact.finalize()).max() <= 1e-4 + 1e-6


def test_second_derivative_bounds_hold() -> None:
    """max|K''| and the decreasing envelope of |K''| against finite differences of the profile."""
    u = np.linspace(-40, 40, 400001)
    step = u[1] - u[0]
    for name in ("gaussian", "logistic"):
        k = np.exp(get(name).log_profile(u))
        second = np.abs(np.diff(k, 2)) / step**2
        mid = u[1:-1]
        assert second.max() <= binned.SECOND_DERIVATIVE[name] * (1 + 1e-6)
        assert second.max() >= binned.SECOND_DERIVATIVE[name] * (1 - 1e-3)  # the constant is tight
        env = binned._envelope(get(name), np.abs(mid))
        assert np.all(second <= env * (1 + 1e-6) + 1e-12)
        assert np.all(np.diff(env[mid >= 0]) <= 1e-300)  # decreasing in |u| (up to subnormal rounding)
        # the rounding margin needs M >= K and M >= |K'| too
        assert np.all(k[1:-1] <= env * (1 + 1e-12))
        first = np.abs(k[2:] - k[:-2]) / (2 * step)
        assert np.all(first <= env * (1 + 1e-6) + 1e-12)


def test_bad_input_names_the_argument() -> None:
    x = np.linspace(0, 1, 50)[:, None]
    k = get("logistic")
    door = backends.compute  # the backend door checks each call against binned's capabilities, once
    with pytest.raises(ValueError, match=r"backend='binned'.*'epanechnikov'"):
        door("binned", x, x, x, kernel=get("epanechnikov"), bandwidth=np.ones(1), tol=1e-6)
    with pytest.raises(ValueError, match=r"backend='binned'.*1 to 2 features"):
        door("binned", np.c_[x, x, x], np.c_[x, x, x], x, kernel=k, bandwidth=np.ones(3), tol=1e-6)
    with pytest.raises(ValueError, match=r"degree \(moments\) up to 0"):
        door("binned", np.c_[x, x], np.c_[x, x], x, kernel=k, bandwidth=np.ones(2), moments=1, tol=1e-6)
    with pytest.raises(ValueError, match="without leave-one-out"):
        door("binned", np.c_[x, x], np.c_[x, x], x, kernel=k, bandwidth=np.ones(2), exclude=np.arange(50),
             tol=1e-6)
    with pytest.raises(ValueError, match="without leave-one-out"):
        door("binned", x, x, x, kernel=k, bandwidth=np.ones(1), exclude=np.arange(50), tol=1e-6)
    with pytest.raises(ValueError, match=r"tol must be a number from 1e-12 to 0.1.*0.5"):
        binned.partials(x, x, x, kernel=k, bandwidth=np.ones(1), tol=0.5)


def test_auto_takes_it_for_the_logistic_kernel_with_tol_only() -> None:
    """Where the exact sums would do 100x the work, auto takes the grid; never for leave-one-out,
    local fits or without tol."""
    g = get("logistic")
    big = {"n": 10**6, "m": 10**6, "d": 1, "tol": 1e-6, "span": 500.0}
    choice = backends.choose_within(g, **big)
    assert choice is not None and choice.name == "binned"
    assert backends.choose_within(g, **big, loo=True) is None
    assert backends.choose_within(g, **big, moments=1) is None
    assert backends.choose_within(g, **{**big, "tol": None}) is None
    assert backends.choose_within(g, **{**big, "span": 5e8}) is None  # the grid would not fit
    rng = np.random.default_rng(6)
    x = rng.uniform(0, 5, 20000)
    y = np.sin(x) + rng.normal(0, 0.2, x.size)
    from nadaraya._core.call import compute_partials, prepare

    call = prepare(x, x, y, kernel="logistic", bandwidth=0.01)
    _, picked = compute_partials(call, tol=1e-6)
    assert picked.name == "binned"
    # the same call leaving keys out, or with a local fit's moments, is not offered the grid
    _, loo = compute_partials(call, tol=1e-6, exclude=np.arange(x.size))
    _, local = compute_partials(call, tol=1e-6, moments=1)
    assert loo.name != "binned" and local.name != "binned"
    fast = nadaraya.pool(x[:3000], x, y, kernel="logistic", bandwidth=0.01, tol=1e-6)
    exact = dense(x[:3000], x, y[:, None], "logistic", 0.01)[:, 0]
    assert np.abs(fast - exact).max() <= 1e-6 * np.abs(y).max()


def test_auto_takes_the_2d_grid_for_the_logistic_kernel_where_it_pays() -> None:
    """In 2-D the grid pays at loose tolerances over a few bandwidths: auto takes it there (and
    the bound holds on the sampled queries); not at 1e-6, not for leave-one-out or partials to be
    merged, not for small problems."""
    rng = np.random.default_rng(16)
    x = rng.uniform(0, 5, (20000, 2))
    y = np.sin(x[:, 0]) * x[:, 1] + rng.normal(0, 0.2, 20000)
    h, g = np.array([0.5, 0.5]), get("logistic")
    choice = backends.choose_for_data(g, x, x, h, tol=1e-3)
    assert choice is not None and choice.name == "binned" and "2-D" in choice.reason
    assert backends.choose_for_data(g, x, x, h, tol=1e-6) is None
    assert backends.choose_for_data(g, x, x, h, tol=1e-3, loo=True) is None
    assert backends.choose_for_data(g, x, x, h, tol=1e-3, merged=True) is None
    assert backends.choose_for_data(g, x[:300], x[:300], h, tol=1e-3) is None
    fast = nadaraya.pool(x, x, y, kernel="logistic", bandwidth=h, tol=1e-3)
    exact = dense(x[:2000], x, y[:, None], "logistic", h)[:, 0]
    assert np.abs(fast[:2000] - exact).max() <= 1e-3 * np.abs(y).max()


@given(
    n=st.integers(1, 80),
    m=st.integers(1, 30),
    log_h=st.floats(-3.0, 1.0),
    log_tol=st.floats(-10.0, -2.0),
    seed=st.integers(0, 2**16),
    kernel=st.sampled_from(["logistic", "gaussian"]),
    weighted=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_random_problems_keep_the_bound(n, m, log_h, log_tol, seed, kernel, weighted):
    """Clustered keys with duplicates, queries near and far, weights with zeros: every
    prediction within tol * max|v| of the dense sums (grids capped at 2^16 points to stay
    quick: finer ones are computed exactly, which the cap only shifts)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(binned, "GRID_MAX", 2**16)
        _random_problem(n, m, log_h, log_tol, seed, kernel, weighted)


def _random_problem(n, m, log_h, log_tol, seed, kernel, weighted):
    rng = np.random.default_rng(seed)
    x = rng.choice(rng.uniform(-2, 2, 4), n) + rng.normal(0, 0.1, n) * rng.integers(0, 2, n)
    q = np.concatenate([x[: min(n, m)], rng.uniform(-4, 4, m)])
    v = rng.normal(size=(n, 2)) * 10.0 ** rng.integers(-3, 4)
    sw = rng.uniform(0, 2, n) * (rng.random(n) > 0.3) if weighted else None
    if sw is not None and not (sw > 0).any():
        sw[0] = 1.0
    check(q, x, v, kernel, 10.0**log_h, 10.0**log_tol, sw=sw)


# ---------------------------------------------------------------------------------------------
# two features: a product kernel, one bandwidth per feature


def check2(q, x, v, kernel, h, tol, sw=None):
    """binned.partials in 2-D against the dense product-kernel sums: every query within tol * max|v|."""
    part = binned.partials(q, x, v, kernel=get(kernel), bandwidth=np.asarray(h, float), tol=tol,
                           sample_weight=sw)
    err = np.abs(part.finalize() - dense(q, x, v, kernel, np.asarray(h, float), sw))
    scale = np.abs(v).max(axis=0)
    assert np.all(err <= tol * scale), float((err / scale).max() / tol)
    return part


def plane(rng, n):
    """Keys on [0, 1] x [0, 3] and two value columns of different sizes."""
    x = rng.uniform(0, 1, (n, 2)) * [1.0, 3.0]
    v = np.column_stack([2 * np.sin(5 * x[:, 0]) + x[:, 1] + rng.normal(0, 0.3, n),
                         1e-3 * rng.normal(size=n)])
    return x, v


@pytest.mark.parametrize("kernel", ["logistic", "gaussian"])
@pytest.mark.parametrize("scale", [1e-6, 0.03, 0.2, 1.0, 1e3])  # bandwidths in units of the keys' range
@pytest.mark.parametrize("tol", [1e-2, 1e-4, 1e-9])
def test_2d_every_prediction_is_within_tol(kernel: str, scale: float, tol: float, monkeypatch) -> None:
    monkeypatch.setattr(binned, "GRID_MAX", 2**19)
    rng = np.random.default_rng(int(-np.log10(scale) * 7 - np.log10(tol)) % 2**16)
    x, v = plane(rng, 600)
    h = scale * np.array([1.0, 3.0]) * [0.5, 2.0]  # one bandwidth per feature, not in the ratio of the ranges
    q = np.vstack([rng.uniform(-0.3, 1.3, (300, 2)) * [1.0, 3.0], x[:50], [[40.0, -7.0], [0.5, 1e4]]])
    check2(q, x, v, kernel, h, tol)


@pytest.mark.parametrize("kernel", ["logistic", "gaussian"])
@pytest.mark.parametrize("d", [1, 2])
def test_each_sum_within_its_bound_which_is_nearly_attained(kernel: str, d: int) -> None:
    """The derivation itself, before any prediction: each grid sum (weight, and values of both signs)
    is within its bound E of the exact sum on every query on the grid; and for one key, with the query
    anywhere in its cell, the error reaches over a third of E (so a bound loose by a factor, or the
    factor 1/4 or the 2-D sum over features dropped, would show here)."""
    rng = np.random.default_rng(20 + d)
    prof = get(kernel).log_profile
    worst = 0.0
    for trial in range(12):
        one = trial < 8
        x = rng.uniform(0, 1, (1 if one else 300, d))
        cols = np.column_stack([np.ones(x.shape[0]), rng.normal(size=x.shape[0]) * (3.0 if one else 1.0)])
        h = np.full(d, 0.3) * rng.uniform(1.0, 2.0, d)
        q = rng.uniform(-0.5, 1.5, (300, d))
        tol = 10.0 ** rng.uniform(-3.5, -2) if d == 2 else 10.0 ** rng.uniform(-8, -2)
        sums, err, inside = binned._grid_sums(q, x, cols, get(kernel), h, tol)
        exact = np.exp(sum(prof((q[:, None, k] - x[None, :, k]) / h[k]) for k in range(d))) @ cols
        ratio = (np.abs(sums - exact) / err)[inside]
        assert inside.mean() > 0.5 and np.all(ratio <= 1.0), float(ratio.max())
        if one:
            worst = max(worst, float(ratio.max()))
    assert worst > 0.35


def test_2d_grid_serves_most_queries_amid_the_keys() -> None:
    """Where the keys are dense the certificate holds for (nearly) every query, and these tests are not
    only exercising the exact fallback."""
    rng = np.random.default_rng(11)
    x, v = plane(rng, 4000)
    q = rng.uniform(0.1, 0.9, (500, 2)) * [1.0, 3.0]
    h = np.array([0.1, 0.4])
    assert binned.grid_points(q, x, h, 1e-3)[1]
    assert served(q, x, v, "logistic", h, 1e-3) > 0.99
    assert served(q, x, v, "gaussian", h, 1e-3) > 0.8  # its envelope is looser away from the centre
    check2(q, x, v, "logistic", h, 1e-3)


def test_2d_features_on_very_different_scales() -> None:
    """Per-feature bandwidths: the grid is in units of each feature's bandwidth, so a feature 1e6
    times wider with a bandwidth 1e6 times wider gives the same grid and the same predictions."""
    rng = np.random.default_rng(12)
    x, v = plane(rng, 1500)
    q = rng.uniform(0, 1, (200, 2)) * [1.0, 3.0]
    h = np.array([0.1, 0.3])
    base = check2(q, x, v, "logistic", h, 1e-3).finalize()
    stretch = np.array([1e-3, 1e3])
    wide = check2(q * stretch, x * stretch, v, "logistic", h * stretch, 1e-3).finalize()
    assert served(q * stretch, x * stretch, v, "logistic", h * stretch, 1e-3) > 0.9
    assert np.all(np.abs(wide - base) <= 2e-3 * np.abs(v).max(axis=0))


def test_2d_awkward_sizes_duplicates_weights_and_heavy_tails() -> None:
    rng = np.random.default_rng(13)
    k = get("logistic")
    one = np.array([[0.3, -0.2]])
    part = binned.partials(one, one, np.array([[2.5]]), kernel=k, bandwidth=np.array([0.1, 0.1]), tol=1e-6)
    assert part.finalize()[0, 0] == pytest.approx(2.5, abs=1e-6 * 2.5)
    # a constant feature (the grid is 3 points wide along it), keys repeated, queries on the keys
    x = np.column_stack([np.repeat(rng.uniform(0, 1, 150), 4), np.full(600, 2.0)])
    v = np.cos(4 * x[:, :1])
    check2(np.vstack([x[::7], [[0.5, 2.3], [0.5, 1.0]]]), x, v, "logistic", [0.05, 0.5], 1e-5)
    check2(x[:1], x, v, "gaussian", [0.05, 0.5], 1e-5)
    # clustered keys with weights (zeros among them), and keys from a Cauchy distribution
    x = np.vstack([rng.normal(0, 0.05, (400, 2)), rng.normal(1, 0.02, (400, 2)),
                   rng.standard_cauchy((200, 2))])
    v = np.column_stack([x[:, 0] ** 2 - x[:, 1], np.sign(x[:, 0])])
    sw = rng.uniform(0.1, 5.0, x.shape[0])
    sw[::9] = 0.0
    q = np.vstack([x[::4], rng.standard_cauchy((200, 2))])
    for h in ([0.01, 0.02], [0.3, 0.1]):
        check2(q, x, v, "logistic", h, 1e-4, sw=sw)
        check2(q, x, v, "gaussian", h, 1e-4, sw=sw)
    core = np.abs(x).max(axis=1) < 3  # without the Cauchy tails the grid is small: the bound serves
    assert served(x[core][::4], x[core], v[core], "logistic", np.array([1.0, 0.5]), 1e-3) > 0.9


def test_2d_float32_in_float32_out() -> None:
    rng = np.random.default_rng(14)
    x, v = plane(rng, 1500)
    x, v = x.astype(np.float32), v[:, :1].astype(np.float32)
    part = binned.partials(x, x, v, kernel=get("logistic"), bandwidth=np.array([0.1, 0.3], np.float32),
                           tol=1e-3)
    assert part.weight.dtype == np.float32
    exact = dense(x.astype(float), x.astype(float), v.astype(float), "logistic", np.array([0.1, 0.3]))
    assert np.abs(part.finalize() - exact).max() <= 1e-3 * np.abs(v).max() + 1e-6


def test_2d_grid_points_and_its_cap(monkeypatch) -> None:
    """The grid's size is (its extent in bandwidths / the spacing + 3) per feature; a grid over the cap
    (GRID_MAX / 3 in 2-D) is not built and every query is then exact; queries far from the keys do
    not widen it beyond REACH bandwidths."""
    x = np.array([[0.0, 0.0], [1.0, 2.0]])
    h = np.array([0.1, 0.5])
    a = binned.grid_spacing(1.0, 0.0, 1e-4, "logistic", d=2)
    points, built = binned.grid_points(x, x, h, 1e-4)
    assert points == pytest.approx((10 / a + 3) * (4 / a + 3))
    assert built
    far = np.array([[-1e9, 1e9]])
    assert binned.grid_points(np.vstack([x, far]), x, h, 1e-4)[0] == pytest.approx(
        ((10 + binned.REACH) / a + 3) * ((4 + binned.REACH) / a + 3))
    monkeypatch.setattr(binned, "GRID_MAX", int(points * 3) - 1)
    assert not binned.grid_points(x, x, h, 1e-4)[1]
    v = np.array([[1.0], [3.0]])
    exact = binned.partials(x, x, v, kernel=get("logistic"), bandwidth=h, tol=1e-4)
    assert np.abs(exact.finalize() - dense(x, x, v, "logistic", h)).max() <= 1e-14
    # the spacing: sqrt(2) finer in 2-D than in 1-D (the bound sums over the features)
    spacing = [binned.grid_spacing(1.0, 0.0, 1e-6, "gaussian", d=d) for d in (1, 2)]
    assert spacing[1] == pytest.approx(spacing[0] / np.sqrt(2), rel=1e-2)


@given(
    n=st.integers(1, 60),
    m=st.integers(1, 20),
    log_h=st.tuples(st.floats(-2.0, 1.0), st.floats(-2.0, 1.0)),
    log_tol=st.floats(-10.0, -2.0),
    seed=st.integers(0, 2**16),
    kernel=st.sampled_from(["logistic", "gaussian"]),
    weighted=st.booleans(),
)
@settings(max_examples=50, deadline=None)
def test_2d_random_problems_keep_the_bound(n, m, log_h, log_tol, seed, kernel, weighted):
    """Clustered keys with duplicates, queries near and far, weights with zeros, per-feature
    bandwidths: every prediction within tol * max|v| (grids capped at 2^15 points to stay quick)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(binned, "GRID_MAX", 2**15)
        rng = np.random.default_rng(seed)
        centres = rng.uniform(-2, 2, (3, 2))
        x = centres[rng.integers(0, 3, n)] + rng.normal(0, 0.1, (n, 2)) * rng.integers(0, 2, (n, 1))
        q = np.vstack([x[: min(n, m)], rng.uniform(-4, 4, (m, 2))])
        v = rng.normal(size=(n, 2)) * 10.0 ** rng.integers(-3, 4)
        sw = rng.uniform(0, 2, n) * (rng.random(n) > 0.3) if weighted else None
        if sw is not None and not (sw > 0).any():
            sw[0] = 1.0
        check2(q, x, v, kernel, 10.0 ** np.array(log_h), 10.0**log_tol, sw=sw)
