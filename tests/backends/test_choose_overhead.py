"""``auto``'s own overhead: the size ranking kept per kernel and sizes, the sample weights' bands found
only where the 1-D estimate prices them, the estimates' fixed draws kept; none of it changes a choice.
The series in 2-3 features is weighed against the fused loop's moments of the one cost model."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nadaraya.backends._choose as chooser
import nadaraya.backends._taylor_nd as taylor_nd
import nadaraya.backends.truncated as truncated
from nadaraya import backends
from nadaraya._core.call import choose_backend, prepare
from nadaraya.backends._capabilities import FUSED_MOMENTS, cost
from nadaraya.kernels import get as get_kernel

N = 2000
KERNELS = ("gaussian", "epanechnikov", "tricube", "laplacian")


def _weights(kind: str, n: int) -> np.ndarray | None:
    rng = np.random.default_rng(7)
    if kind == "bench":  # bench_auto's: U(0.5, 2), one band
        return rng.uniform(0.5, 2.0, n)
    if kind == "wide":  # log-uniform over 1e-100 .. 1e100: several bands of the dense cells
        return np.exp(rng.uniform(-230.0, 230.0, n))
    return None


def _plain_choice(kernel: str, x: np.ndarray, h: np.ndarray, sw: np.ndarray | None, degree: int) -> str:
    """The choice written out without the shortcuts: the data-aware part on a copy of the queries
    (not the keys' own array), the bands of the weights always found, fresh draws; else the cost
    model's argmin over the sizes, ranked here."""
    k = get_kernel(kernel)
    chooser._draws.cache_clear()
    shares = truncated.cells_shares(sw)
    data = backends.choose_for_data(k, x.copy(), x, h, moments=degree, shares=shares)
    if data is not None:
        return str(data)
    d = x.shape[1]
    ranked = sorted((cost(name, k, n=N, m=N, d=d, degree=degree), name)
                    for name in chooser._BY_SIZE if name in backends.available())
    assert math.isfinite(ranked[0][0])
    return ranked[0][1]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("h", [0.15, 0.02])
def test_the_shortcuts_never_change_the_choice(kernel: str, d: int, h: float) -> None:
    """On bench_auto's grid at n = m = 2e3 (kernel x degree 0-2 x d 1-3 x leave-one-out x sample
    weights: none, bench_auto's, and spread over 1e-100 .. 1e100), at its bandwidth and a narrow
    one: ``auto`` (called twice: the second time from what it kept) picks the backend of the
    choice written out plainly, for the same reason where the data decide."""
    x = np.random.default_rng(d).uniform(0.0, 1.0, (N, d))
    y = np.sin(6 * x[:, 0])
    bw = np.full(d, h)
    for kind in ("none", "bench", "wide"):
        sw = _weights(kind, N)
        call = prepare(x, x, y, kernel=kernel, bandwidth=bw, sample_weight=sw)
        assert call.queries is call.keys  # the call on its own keys, as bench_auto makes it
        for degree in (0, 1, 2):
            plain = _plain_choice(kernel, call.keys, call.bandwidth, call.sample_weight, degree)
            for loo in (False, True):
                exclude = np.arange(N) if loo else None
                for _ in range(2):
                    got = choose_backend(call, exclude=exclude, moments=degree)
                    assert (str(got) if ":" in plain else got.name) == plain, (kind, degree, loo)


def test_the_size_ranking_is_kept_and_is_the_cost_models_argmin(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_by_size`` is the cost model's argmin for every kernel, d 1-4, degree 0-2 and a few sizes;
    asked again for the same kernel and sizes, it prices nothing."""
    chooser._by_size.cache_clear()
    for kernel in (*KERNELS, "logistic", "constant"):
        k = get_kernel(kernel)
        for n, m, d, degree in ((600, 600, 1, 0), (2000, 2000, 1, 2), (10**5, 10**5, 2, 1),
                                (10**5, 10, 4, 2)):
            ranked = sorted((cost(name, k, n=n, m=m, d=d, degree=degree), name)
                            for name in chooser._BY_SIZE if name in backends.available())
            assert backends.choose(k, n=n, m=m, d=d, moments=degree).name == ranked[0][1]
    lap = get_kernel("laplacian")
    first = backends.choose(lap, n=N, m=N, d=1)

    def refuse(*args: object, **kwargs: object) -> float:
        raise AssertionError("priced again")

    monkeypatch.setattr(chooser, "cost", refuse)
    assert backends.choose(lap, n=N, m=N, d=1) == first
    with pytest.raises(AssertionError, match="priced again"):
        backends.choose(lap, n=N + 1, m=N, d=1)


def test_the_kept_ranking_is_per_degree() -> None:
    """The same kernel and sizes at another degree are ranked again: the Laplacian's running sums
    serve degree 2 in 1-D but not 3, the k-d tree overtakes the fused loop from degree 3 in 3-D."""
    chooser._by_size.cache_clear()
    lap, tri = get_kernel("laplacian"), get_kernel("tricube")
    assert [backends.choose(lap, n=N, m=N, d=1, moments=r).name for r in (0, 3)] == ["laplace", "fused"]
    ranked = [backends.choose(tri, n=5000, m=5000, d=3, moments=r).name for r in (2, 3)]
    assert ranked == ["fused", "windowed"]


def test_the_weights_bands_are_found_only_where_priced(monkeypatch: pytest.MonkeyPatch) -> None:
    """A weighted call of the Laplacian, a compact kernel or the Gaussian in 2-D finds no bands of
    its weights (only the 1-D Gaussian's dense cells price them), and the 1-D Gaussian does."""
    found: list[int] = []
    real = truncated.cells_shares
    monkeypatch.setattr(truncated, "cells_shares", lambda sw: found.append(1) or real(sw))
    sw = _weights("wide", N)
    for kernel, d in (("laplacian", 1), ("epanechnikov", 1), ("tricube", 2), ("gaussian", 2)):
        x = np.random.default_rng(d).uniform(0.0, 1.0, (N, d))
        choose_backend(prepare(x, x, x[:, 0], kernel=kernel, bandwidth=np.full(d, 0.15), sample_weight=sw))
    assert not found
    x = np.random.default_rng(1).uniform(0.0, 1.0, (N, 1))
    choose_backend(prepare(x, x, x[:, 0], kernel="gaussian", bandwidth=0.15, sample_weight=sw))
    assert found == [1]


def test_the_kept_draws_are_a_fresh_generators() -> None:
    """The estimates' draws are those of a fresh ``default_rng(0)``, in turn, and read-only."""
    chooser._draws.cache_clear()
    for _ in range(2):
        a, b, c = chooser._draws((2000, 32), (2000, 512), (2000, 125))
        rng = np.random.default_rng(0)
        for got, size in ((a, 32), (b, 512), (c, 125)):
            assert np.array_equal(got, rng.integers(0, 2000, size))
            assert not got.flags.writeable


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_the_series_in_2_3_features_is_weighed_against_fused_moments(
        monkeypatch: pytest.MonkeyPatch, degree: int) -> None:
    """The series (2-3 features) is taken where its modelled cost is under half the fused loop's
    with the moments of ``FUSED_MOMENTS`` (the grid's priced out here): just under, it is; just
    over, not."""
    x = np.random.default_rng(0).uniform(0.0, 5.0, (3000, 2))
    h = np.array([1.0, 1.0])
    exact = 3000 * 3000 * chooser.EXACT_NS_PER_PAIR * FUSED_MOMENTS[degree]
    assert chooser._loop_moments(2, degree) == chooser._loop_moments(3, degree) == FUSED_MOMENTS[degree]
    for scale, taken in ((0.999, True), (1.001, False)):
        monkeypatch.setattr(taylor_nd, "estimate", lambda *a, s=scale: (s * exact / 2, 10, 1.0))
        got = chooser._choose_series(x, x, h, 1e-8, pairs=1e12, moments=degree)
        assert (got is not None and got.name == "taylor") is taken, scale
