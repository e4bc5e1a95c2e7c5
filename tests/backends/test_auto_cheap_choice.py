"""``auto`` chooses cheaply where the call is small, and the same backend as the full estimate:
no estimate where it cannot pay for itself, no count where every key lies in every window, fewer
sampled queries (and a coarse count first) in a small call in 2-3 features."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nadaraya.backends._choose as chooser
import nadaraya.backends.truncated as truncated
from nadaraya import backends
from nadaraya.backends._capabilities import cost
from nadaraya.kernels import get as get_kernel

GAUSS = get_kernel("gaussian")
#: the bands of sample weights log-uniform over 1e-100 .. 1e100 (``truncated.cells_shares``)
WIDE = truncated.cells_shares(np.exp(np.random.default_rng(0).uniform(-230.0, 230.0, 2000)))


def _full_estimate_choice(x: np.ndarray, h: np.ndarray, *, moments: int = 0,
                          weighted: bool = False) -> str:
    """The choice from the full sampled estimate (what ``auto`` did before the shortcuts), else
    the cost model's argmin over the sizes."""
    m, n, d = x.shape[0], x.shape[0], x.shape[1]
    if d == 1:
        windows, with_cells = truncated.pairs_1d(x, x, h)
        with_cells = with_cells if moments <= truncated.MAX_DEGREE else windows
        pairs = truncated.priced(windows, with_cells, WIDE if weighted else ((1.0, 1.0),))
        cells = pairs < 0.9 * windows
    else:
        pairs, cells = truncated.pairs(x, x, h), False
    window = backends.choose_window(GAUSS, n=n, m=m, d=d, moments=moments, pairs=pairs, cells=cells)
    return window.name if window is not None else backends.choose(GAUSS, n=n, m=m, d=d, moments=moments).name


def _no_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> float:
        raise AssertionError("the sampled estimate was taken")

    monkeypatch.setattr(truncated, "pairs", refuse)
    monkeypatch.setattr(truncated, "pairs_1d", refuse)


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("h", [0.15, 0.02, 0.002])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("moments", [0, 2])
def test_the_cheap_choice_is_the_full_estimates_choice(d: int, h: float, weighted: bool,
                                                       moments: int) -> None:
    """On the bench's data (U(0, 1)^d, n = m = 2e3) at wide, middle and narrow bandwidths, with and
    without weights and moments: the same backend as the full sampled estimate's ranking."""
    x = np.random.default_rng(d).uniform(0.0, 1.0, (2000, d))
    bw = np.full(d, h)
    shares = WIDE if weighted else ((1.0, 1.0),)  # weighted: sample weights over 1e-100 .. 1e100, in bands
    got = backends.choose_for_data(GAUSS, x, x, bw, moments=moments, shares=shares)
    sizes = backends.choose(GAUSS, n=2000, m=2000, d=d, moments=moments)
    got_name = got.name if got is not None else sizes.name
    assert got_name == _full_estimate_choice(x, bw, moments=moments, weighted=weighted)


def test_where_the_estimate_cannot_pay_for_itself_it_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call just over SMALL_PAIRS: the fused loop's modelled cost, less the truncated sums' sort,
    is under the estimate's own: the sizes decide (the cost model's argmin), without sampling."""
    n = 600
    assert n * n >= backends.SMALL_PAIRS
    for d in (1, 2):
        assert not chooser.worth_estimating(GAUSS, n=n, m=n, d=d)
        exact = cost("fused", GAUSS, n=n, m=n, d=d)
        assert chooser.estimate_ns(n, n, d) >= exact - 2 * n * chooser.TRUNCATED_NS["point"]
    assert chooser.worth_estimating(GAUSS, n=600, m=600, d=3)  # the loop's pairs cost sqrt(3) times more
    assert chooser.worth_estimating(GAUSS, n=2000, m=2000, d=1)
    assert chooser.worth_estimating(GAUSS, n=10**5, m=10**5, d=3)
    _no_estimate(monkeypatch)
    x = np.random.default_rng(0).uniform(0.0, 1.0, (n, 1))
    assert backends.choose_for_data(GAUSS, x, x, np.array([0.001])) is None
    assert backends.choose(GAUSS, n=n, m=n, d=1).name == "fused"


@pytest.mark.parametrize("d", [1, 2, 3])
def test_all_near_means_every_pair_within_the_radius(d: int) -> None:
    """Where :func:`all_near` says so, every (query, key) pair lies within sqrt(2 L) bandwidths
    (brute force), and the estimates it replaces count all m n pairs; far from it, it says no."""
    rng = np.random.default_rng(d)
    for h, shift in ((0.4, 0.0), (0.15, 0.0), (0.05, 0.0), (1e-3, 1e6)):
        q = shift + rng.uniform(0.0, 1.0, (300, d))
        k = shift + rng.uniform(0.0, 1.0, (700, d))
        bw = np.full(d, h)
        near = chooser.all_near(q, k, bw)
        far = np.sqrt((((q[:, None, :] - k[None, :, :]) / bw) ** 2).sum(axis=2)).max()
        if near:
            assert far <= math.sqrt(2.0 * truncated.log_ratio(700))
            count = truncated.pairs_1d(q, k, bw)[0] if d == 1 else truncated.pairs(q, k, bw)
            assert count == 300 * 700
        if far > 2 * math.sqrt(2.0 * truncated.log_ratio(700)) * math.sqrt(d):
            assert not near
    assert chooser.all_near(np.ones((3, 1)), np.ones((1, 1)), np.array([1e-9]))  # one point
    assert not chooser.all_near(np.zeros((1, 2)), np.array([[0.0, 1.0]]), np.array([1.0, 1e-3]))


@pytest.mark.parametrize("m", [300, 2000, 9000])
def test_the_cells_count_without_windows_is_pairs_1ds(m: int) -> None:
    """In 1-D where every window holds every key, the dense cells' count is the one
    ``truncated.pairs_1d`` gives (the same sampled queries), duplicates and keys far from 0 too."""
    rng = np.random.default_rng(m)
    q = 1e6 + np.round(rng.uniform(0.0, 1.0, (m, 1)), 3)  # duplicates
    k = 1e6 + rng.uniform(0.0, 1.0, (1500, 1))
    h = np.array([0.2])
    assert chooser.all_near(q, k, h)
    assert chooser._cells_pairs(q, k, h) == pytest.approx(truncated.pairs_1d(q, k, h)[1], rel=1e-12)


def test_large_calls_sample_as_before_and_small_ones_fewer_queries() -> None:
    """From m = 8192 on, the 2-3 feature estimate is ``truncated.pairs`` itself (512 sampled
    queries); below, a sixteenth of the queries (at least 64), scaled to all m."""
    assert [chooser.sample_queries(m) for m in (100, 2000, 8191, 8192, 10**6)] == [64, 125, 511, 512, 512]
    rng = np.random.default_rng(5)
    big = rng.uniform(0.0, 1.0, (9000, 2))
    h = np.array([0.01, 0.01])
    assert chooser._sampled_pairs(big, big, h) == truncated.pairs(big, big, h)
    small = big[:2000]
    full = truncated.pairs(small, small, h)
    assert 0.7 * full < chooser._sampled_pairs(small, small, h) < 1.3 * full  # narrow: no coarse count


def test_a_coarse_count_stands_only_far_over_where_truncated_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """3-D, n = m = 2e3, h = 0.15 on U(0, 1)^3: the windows hold nearly all pairs (not all: the
    box's diagonal is longer than the radius); the coarse count decides without the k-d tree, and
    the full estimate agrees that the truncated sums do not pay."""
    x = np.random.default_rng(3).uniform(0.0, 1.0, (2000, 3))
    h = np.full(3, 0.15)
    assert not chooser.all_near(x, x, h)
    full = truncated.pairs(x, x, h)
    assert backends.choose_window(GAUSS, n=2000, m=2000, d=3, moments=0, pairs=full) is None
    _no_estimate(monkeypatch)
    coarse = chooser._sampled_pairs(x, x, h)
    assert coarse > chooser.COARSE_MARGIN * 1e6
    assert backends.choose_for_data(GAUSS, x, x, h) is None
    assert backends.choose_for_data(GAUSS, x, x, h, shares=WIDE) is None


@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("loo", [False, True])
def test_the_laplacian_goes_to_laplace_at_the_bench_sizes(degree: int, loo: bool) -> None:
    """The Laplacian in 1-D at n = m = 2e3 (and 1e4, from the sizes): ``laplace``, with no data
    estimate, and its sums are the fused loop's."""
    from nadaraya._core.call import compute_partials, prepare

    lap = get_kernel("laplacian")
    for n in (2000, 10_000):
        assert backends.choose(lap, n=n, m=n, d=1, moments=degree, loo=loo).name == "laplace"
    x = np.random.default_rng(degree).uniform(0.0, 1.0, (2000, 1))
    assert backends.choose_for_data(lap, x, x, np.array([0.15]), moments=degree, loo=loo) is None
    call = prepare(x, x, np.sin(6 * x[:, 0]), kernel="laplacian", bandwidth=0.15)
    exclude = np.arange(2000) if loo else None
    parts, choice = compute_partials(call, exclude=exclude, moments=degree)
    assert choice.name == "laplace"
    ref, _ = compute_partials(call, exclude=exclude, moments=degree, backend="fused")
    np.testing.assert_allclose(parts.finalize(), ref.finalize(), rtol=1e-10)
