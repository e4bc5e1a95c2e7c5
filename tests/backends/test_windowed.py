"""The windowed backend (compact kernels without visiting far keys) against the reference."""

from __future__ import annotations

import time

import numpy as np
import pytest

import nadaraya
import nadaraya.backends._windowed_common as _windowed_common
from nadaraya import backends
from nadaraya.backends import reference, windowed
from nadaraya.kernels import REGISTRY, get

COMPACT = [name for name, k in REGISTRY.items() if k.compact]


def _both(queries, keys, values, kernel, h, sample_weight=None, exclude=None):
    kw = dict(kernel=get(kernel), bandwidth=np.asarray(h, dtype=float), sample_weight=sample_weight,
              exclude=exclude)
    return reference.partials(queries, keys, values, **kw), windowed.partials(queries, keys, values, **kw)


def _assert_close(ref, got, rtol):
    np.testing.assert_array_equal(got.shift, 0.0)
    np.testing.assert_array_equal(ref.empty, got.empty)
    scale = np.abs(ref.weight).max()
    np.testing.assert_allclose(got.weight, ref.weight, rtol=rtol, atol=rtol * scale)
    np.testing.assert_allclose(got.value, ref.value, rtol=rtol, atol=rtol * np.abs(ref.value).max())
    fr, fg = ref.finalize(), got.finalize()
    ok = ~ref.empty
    if ok.any():
        np.testing.assert_allclose(fg[ok], fr[ok], rtol=rtol, atol=rtol * np.abs(fr[ok]).max())


def _data(rng, n, m, d, p, lo=0.0, hi=5.0):
    keys = rng.uniform(lo, hi, (n, d))
    values = np.sin(keys.sum(axis=1))[:, None] + rng.normal(0, 0.3, (n, p)) + 2.0
    queries = rng.uniform(lo - 0.3, hi + 0.3, (m, d))
    return queries, keys, np.ascontiguousarray(values)


@pytest.mark.parametrize("kernel", COMPACT)
@pytest.mark.parametrize("d", [1, 2, 3])
def test_matches_reference_float64(kernel, d):
    rng = np.random.default_rng(d)
    n = 400
    queries, keys, values = _data(rng, n, 150, d, 2)
    h = np.linspace(0.5, 0.9, d)  # per-feature bandwidths; ~50 keys per 1-D window
    sw = rng.uniform(0.2, 3.0, n)
    ref, got = _both(queries, keys, values, kernel, h, sample_weight=sw)
    _assert_close(ref, got, 1e-12)
    # leave-one-out on the training points
    ref, got = _both(keys, keys, values, kernel, h, sample_weight=sw, exclude=np.arange(n))
    _assert_close(ref, got, 1e-12)


@pytest.mark.parametrize("kernel", COMPACT)
@pytest.mark.parametrize("d", [1, 2])
def test_float32_within_twice_the_reference_error(kernel, d):
    """The flash-attention rule: float32 error at most twice the float32 reference's."""
    rng = np.random.default_rng(7)
    queries, keys, values = _data(rng, 300, 100, d, 1)
    h = np.full(d, 0.6)
    exact = reference.partials(queries, keys, values, kernel=get(kernel), bandwidth=h).finalize()
    q32, k32, v32 = (a.astype(np.float32) for a in (queries, keys, values))
    ref32, got32 = _both(q32, k32, v32, kernel, h)
    assert got32.weight.dtype == np.float32 and got32.value.dtype == np.float32
    np.testing.assert_array_equal(ref32.empty, got32.empty)
    ok = ~ref32.empty
    err_ref = np.abs(ref32.finalize()[ok] - exact[ok]).max()
    err_got = np.abs(got32.finalize()[ok] - exact[ok]).max()
    assert err_got <= 2 * err_ref + 1e-7 * np.abs(exact[ok]).max()


@pytest.mark.parametrize("kernel", COMPACT)
def test_prefix_moments_exact_without_direct_sums(kernel, monkeypatch):
    """Force every window through the prefix-moment route (no pair-by-pair sums)."""
    monkeypatch.setattr(windowed, "DIRECT_MAX_KEYS", 0)
    rng = np.random.default_rng(3)
    n = 2000
    queries, keys, values = _data(rng, n, 300, 1, 3)
    sw = rng.integers(1, 4, n).astype(float)
    for h in (0.01, 0.3, 7.0):  # ~8 keys, ~240 keys, every key in every window
        ref, got = _both(queries, keys, values, kernel, [h], sample_weight=sw)
        _assert_close(ref, got, 1e-12)
    ref, got = _both(keys, keys, values, kernel, [0.3], exclude=np.arange(n))
    _assert_close(ref, got, 1e-12)


@pytest.mark.parametrize("kernel", COMPACT)
def test_keys_far_from_origin(kernel, monkeypatch):
    """Keys near 1e6 with h = 1e-3: raw prefix sums of x^r would cancel to nothing."""
    monkeypatch.setattr(windowed, "DIRECT_MAX_KEYS", 0)
    rng = np.random.default_rng(5)
    n = 20000
    keys = 1e6 + rng.uniform(0.0, 0.5, (n, 1))  # ~80 keys per window
    values = np.ascontiguousarray(np.cos(3e3 * keys) + 1.5)
    queries = 1e6 + rng.uniform(-0.002, 0.502, (400, 1))
    ref, got = _both(queries, keys, values, kernel, [1e-3])
    _assert_close(ref, got, 1e-9)
    sub = np.ascontiguousarray(keys[:400])
    ref, got = _both(sub, keys, values, kernel, [1e-3], exclude=np.arange(400))
    _assert_close(ref, got, 1e-9)


@pytest.mark.parametrize("kernel", COMPACT)
def test_window_edges_exactly_at_one(kernel, monkeypatch):
    """Keys at exactly |u| = 1 (a binary grid): boxcar counts them, like the reference."""
    keys = np.arange(0.0, 8.0, 0.125)[:, None]  # exact in binary; h = 0.5 is 4 grid steps
    values = np.ascontiguousarray((keys % 1.0) * 3.0 + 1.0)
    queries = np.ascontiguousarray(keys[::3] + 0.0)
    for direct in (0, 10**6):
        monkeypatch.setattr(windowed, "DIRECT_MAX_KEYS", direct)
        ref, got = _both(queries, keys, values, kernel, [0.5])
        _assert_close(ref, got, 1e-13)
    if kernel == "boxcar":  # 4 keys each side plus the query itself: 9 keys of weight 1/2
        inside = np.abs(queries - keys.T) <= 0.5
        np.testing.assert_allclose(got.weight, 0.5 * inside.sum(axis=1))
        assert set(inside.sum(axis=1).tolist()) >= {9}


def test_plain_formula_epanechnikov():
    rng = np.random.default_rng(11)
    x = rng.uniform(0, 3, 500)
    y = np.sin(x) + rng.normal(0, 0.1, 500)
    q = rng.uniform(0, 3, 60)
    h = 0.4
    u = (q[:, None] - x[None, :]) / h
    w = np.where(np.abs(u) <= 1, 0.75 * (1 - u**2), 0.0)
    expected = (w @ y) / w.sum(axis=1)
    got = windowed.partials(q[:, None], x[:, None], y[:, None], kernel=get("epanechnikov"),
                            bandwidth=np.array([h]))
    np.testing.assert_allclose(got.finalize()[:, 0], expected, rtol=1e-12)


@pytest.mark.parametrize("kernel", ["boxcar", "triangular", "tricube", "cosine", "parzen"])
def test_duplicates_loo_and_tiny_sizes(kernel, monkeypatch):
    rng = np.random.default_rng(2)
    base = rng.uniform(0, 1, 40)
    keys = np.repeat(base, 25)[:, None]  # every location 25 times
    values = np.ascontiguousarray(rng.normal(size=(keys.shape[0], 2)))
    for direct in (0, _windowed_common.DIRECT_MAX_KEYS):
        monkeypatch.setattr(windowed, "DIRECT_MAX_KEYS", direct)
        ref, got = _both(keys, keys, values, kernel, [0.05], exclude=np.arange(keys.shape[0]))
        _assert_close(ref, got, 1e-12)
    one = np.array([[0.5]])
    for q in ([[0.5]], [[0.9]], [[2.0]]):  # n = 1: inside, at the edge region, outside
        ref, got = _both(np.array(q), one, np.array([[3.0]]), kernel, [0.5])
        _assert_close(ref, got, 1e-14)
    ref, got = _both(one, one, np.array([[3.0]]), kernel, [0.5], exclude=np.array([0]))
    assert got.empty.all() and ref.empty.all()


def test_empty_windows_have_zero_weight():
    keys = np.array([[0.0], [10.0]])
    got = windowed.partials(np.array([[5.0], [0.1]]), keys, np.ones((2, 1)), kernel=get("epanechnikov"),
                            bandwidth=np.array([1.0]))
    assert got.weight.tolist()[0] == 0.0 and got.weight[1] > 0


def test_unsorted_keys_and_queries_give_the_sorted_result():
    rng = np.random.default_rng(4)
    queries, keys, values = _data(rng, 3000, 500, 1, 2)
    sw = rng.uniform(0.5, 2.0, 3000)
    order = np.argsort(keys[:, 0])
    k = get("biweight")
    h = np.array([0.2])
    a = windowed.partials(queries, keys, values, kernel=k, bandwidth=h, sample_weight=sw)
    b = windowed.partials(queries, keys[order], values[order], kernel=k, bandwidth=h, sample_weight=sw[order])
    np.testing.assert_allclose(a.value, b.value, rtol=1e-13)
    # leave-one-out indices refer to the caller's order of the keys
    ex = rng.permutation(3000)[:500]
    ref, got = _both(queries, keys, values, "biweight", h, exclude=ex)
    _assert_close(ref, got, 1e-12)


@pytest.mark.parametrize("d", [1, 3])
def test_small_working_memory_chunks(d, monkeypatch):
    """Many chunks of tables (1-D) and many blocks of neighbour pairs (d > 1): same sums."""
    monkeypatch.setattr(windowed, "_TABLE_BYTES", 20_000)
    rng = np.random.default_rng(6)
    queries, keys, values = _data(rng, 3000, 700, d, 2)
    with nadaraya.config_context(working_memory=1):
        ref, got = _both(queries, keys, values, "triweight", np.full(d, 0.4 if d == 1 else 1.0),
                         exclude=rng.integers(-1, 3000, 700))
    _assert_close(ref, got, 1e-12)


def test_every_compact_kernel_has_a_route():
    for name in COMPACT:
        assert windowed.route(get(name)) is not None, name
    assert windowed.route(get("gaussian")) is None


def test_rejects_kernels_without_compact_support():
    assert not windowed.supports(get("laplacian"), 1)
    x = np.zeros((3, 1))
    with pytest.raises(ValueError, match="'gaussian'"):
        backends.compute("windowed", x, x, x, kernel=get("gaussian"), bandwidth=np.ones(1))


def test_cost_does_not_grow_with_the_window():
    """O((n + m) log n) whatever the bandwidth: a window of every key costs no more than
    a narrow one (a coarse 10x guard, the machine is shared)."""
    rng = np.random.default_rng(8)
    queries, keys, values = _data(rng, 40000, 40000, 1, 1)
    k = get("epanechnikov")
    windowed.partials(queries[:10], keys, values, kernel=k, bandwidth=np.array([0.1]))  # compile
    times = {}
    for h in (0.01, 100.0):  # ~160 keys per window, then all 40000
        t = time.perf_counter()
        windowed.partials(queries, keys, values, kernel=k, bandwidth=np.array([h]))
        times[h] = time.perf_counter() - t
    assert times[100.0] < 10 * times[0.01] + 0.05


@pytest.mark.parametrize("kernel", ["epanechnikov", "boxcar"])
def test_sweep_crowded_and_outlying_queries(kernel):
    """The sweep sorts each bucket's queries: repeated queries (crowded sub-cells, a merge
    sort), queries far outside the keys and queries in one bucket in reverse order."""
    rng = np.random.default_rng(9)
    keys = rng.uniform(0, 2, (3000, 1))
    values = np.ascontiguousarray(np.cos(keys) + 1.0)
    queries = np.concatenate([
        np.repeat(rng.uniform(0, 2, 5), 100),  # 100 copies each
        [-50.0, -0.05, 2.05, 1e3],  # outside the keys, two within a bandwidth of them
        np.linspace(1.1, 1.0, 300),  # one bucket, reversed
    ])[:, None]
    sw = rng.uniform(0.5, 2.0, 3000)
    ref, got = _both(queries, keys, values, kernel, [0.1], sample_weight=sw)
    _assert_close(ref, got, 1e-12)
