"""``auto`` weighs a compact kernel's windows in 2-3 features from the data: the k-d tree visits
their pairs one by one, so wide windows go to the fused loop over all pairs, and where the fused
backend's tree of key boxes serves it is priced by the pairs near each query."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya import backends
from nadaraya.backends import _fused_compact
from nadaraya.kernels import get as get_kernel


@pytest.mark.parametrize("d", [2, 3])
def test_wide_windows_go_to_the_fused_loop_and_narrow_ones_stay_on_the_tree(d: int) -> None:
    k = get_kernel("epanechnikov")
    n = 200_000
    x = np.random.default_rng(d).uniform(0.0, 1.0, (n, d))
    assert backends.choose(k, n=n, m=n, d=d).name == "windowed"  # the sizes alone
    wide = backends.choose_for_data(k, x, x, np.full(d, 0.2))
    assert wide is not None and wide.name == "fused" and "k-d tree" in wide.reason
    few = x[: _fused_compact.SORT_FROM - 1]  # the fused loop over all pairs: a few keys per window win
    assert backends.choose_for_data(k, few, x, np.full(d, 1e-3)) is None


@pytest.mark.parametrize("d", [2, 3])
def test_the_fused_tree_of_key_boxes_is_priced_by_the_pairs_near_each_query(d: int) -> None:
    """Where ``_fused_compact`` takes the call (supports over at most ``MAX_COVER`` of the keys' box,
    ``SORT_FROM`` queries or more) the fused loop costs its pairs near each query and its walk
    (measured one thread, m = n / 10: 2-D n = 5e4, h = 0.01 and 0.08: 11 and 47 ms against the k-d
    tree's 66 ms and 2.4 s; 3-D n = 2e4, h = 0.03 and 0.15: 9 and 20 ms against 55 and 453 ms). Made
    dear enough per pair, the k-d tree takes it back: the rule holds on both sides of its crossover."""
    from nadaraya.backends import _capabilities as cap

    k = get_kernel("epanechnikov")
    n = 200_000
    x = np.random.default_rng(d).uniform(0.0, 1.0, (n, d))
    q = x[: n // 10]
    assert backends.choose(k, n=n, m=q.shape[0], d=d).name == "windowed"  # the sizes alone
    for h in (0.005, 0.05):
        assert _fused_compact.covers(np.ascontiguousarray(x.T), np.full(d, 1 / h)) <= _fused_compact.MAX_COVER
        got = backends.choose_for_data(k, q, x, np.full(d, h))
        assert got is not None and got.name == "fused" and "tree of key boxes" in got.reason
    dear = dict(cap.FUSED_COMPACT_NS, pair=1e4, walk=1e5)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cap, "FUSED_COMPACT_NS", dear)
        assert backends.choose_for_data(k, q, x, np.full(d, 0.005)) is None  # the k-d tree (sizes)


def test_where_the_sizes_pick_the_fused_loop_the_data_are_not_sampled() -> None:
    k = get_kernel("tricube")
    x = np.random.default_rng(0).uniform(0.0, 1.0, (3000, 2))
    assert backends.choose(k, n=3000, m=3000, d=2).name == "fused"
    assert backends.choose_for_data(k, x, x, np.full(2, 1e-3)) is None


def test_weights_over_many_decades_keep_the_gaussian_on_the_dense_cells_where_windows_are_wide() -> None:
    """At h = 0.15 on [0, 1] the windows hold every key, and the dense cells serve: unweighted, and
    with sample weights over 1e-100 .. 1e100 too, in bands (``truncated.cells_shares``: two of four
    taken, each priced at its widened reach; measured at n = 1e4, one thread: 0.008 s against the
    fused loop's 0.16 s). With the windows alone (no cells) the fused loop would be chosen."""
    from nadaraya.backends import truncated

    k = get_kernel("gaussian")
    x = np.random.default_rng(0).uniform(0.0, 1.0, (10_000, 1))
    plain = backends.choose_for_data(k, x, x, np.array([0.15]))
    assert plain is not None and plain.name == "truncated"
    shares = truncated.cells_shares(np.exp(np.random.default_rng(1).uniform(-230.0, 230.0, x.shape[0])))
    assert len(shares) == 2
    wide = backends.choose_for_data(k, x, x, np.array([0.15]), shares=shares)
    assert wide is not None and wide.name == "truncated"
    windows = truncated.pairs_1d(x, x, 0.15)[0]
    assert backends.choose_window(k, n=10_000, m=10_000, d=1, moments=0, pairs=windows) is None
