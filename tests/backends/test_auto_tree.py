"""``auto`` weighs a compact kernel's windows in 2-3 features from the data: the k-d tree visits
their pairs one by one, so wide windows go to the fused loop over all pairs."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya import backends
from nadaraya.kernels import get as get_kernel


@pytest.mark.parametrize("d", [2, 3])
def test_wide_windows_go_to_the_fused_loop_and_narrow_ones_stay_on_the_tree(d: int) -> None:
    k = get_kernel("epanechnikov")
    n = 200_000
    x = np.random.default_rng(d).uniform(0.0, 1.0, (n, d))
    assert backends.choose(k, n=n, m=n, d=d).name == "windowed"  # the sizes alone
    wide = backends.choose_for_data(k, x, x, np.full(d, 0.2))
    assert wide is not None and wide.name == "fused" and "k-d tree" in wide.reason
    assert backends.choose_for_data(k, x, x, np.full(d, 1e-3)) is None  # a few keys per window


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
