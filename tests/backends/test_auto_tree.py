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


def test_sample_weights_keep_the_gaussian_off_the_dense_cells_where_windows_are_wide() -> None:
    """The dense cells take no sample weights: a weighted 1-D Gaussian call is weighed by its
    windows, which at h = 0.15 on [0, 1] hold every key (the fused loop then), while the unweighted
    call rides the cells."""
    k = get_kernel("gaussian")
    x = np.random.default_rng(0).uniform(0.0, 1.0, (10_000, 1))
    plain = backends.choose_for_data(k, x, x, np.array([0.15]))
    assert plain is not None and plain.name == "truncated"
    assert backends.choose_for_data(k, x, x, np.array([0.15]), weighted=True) is None
