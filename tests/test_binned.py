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
def test_every_prediction_is_within_tol(kernel: str, h: float, tol: float) -> None:
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
    """The share of the queries that the grid's bound certifies."""
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
    with pytest.raises(ValueError, match=r"backend='binned'.*'epanechnikov'"):
        binned.partials(x, x, x, kernel=get("epanechnikov"), bandwidth=np.ones(1))
    with pytest.raises(ValueError, match=r"backend='binned'.*1 or 2 features.*d=3"):
        binned.partials(np.c_[x, x, x], np.c_[x, x, x], x, kernel=k, bandwidth=np.ones(3))
    with pytest.raises(ValueError, match="no moments"):
        binned.partials(np.c_[x, x], np.c_[x, x], x, kernel=k, bandwidth=np.ones(2), moments=1)
    with pytest.raises(ValueError, match="no leave-one-out"):
        binned.partials(np.c_[x, x], np.c_[x, x], x, kernel=k, bandwidth=np.ones(2), exclude=np.arange(50))
    with pytest.raises(ValueError, match="no leave-one-out"):
        binned.partials(x, x, x, kernel=k, bandwidth=np.ones(1), exclude=np.arange(50))
    with pytest.raises(ValueError, match="no moments"):
        binned.partials(x, x, x, kernel=k, bandwidth=np.ones(1), moments=1)
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
    from nadaraya.pooling import compute_partials, prepare

    _, picked = compute_partials(prepare(x, x, y, kernel="logistic", bandwidth=0.01), tol=1e-6)
    assert picked.name == "binned"
    fast = nadaraya.pool(x[:3000], x, y, kernel="logistic", bandwidth=0.01, tol=1e-6)
    exact = dense(x[:3000], x, y[:, None], "logistic", 0.01)[:, 0]
    assert np.abs(fast - exact).max() <= 1e-6 * np.abs(y).max()


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
