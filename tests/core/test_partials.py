"""The partial-sums type: merges are exact, associative and safe with empty partials."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from nadaraya.backends import reference
from nadaraya.kernels import get
from nadaraya.partials import Partials, concat, empty, merge, merge_all


def _split_partials(kernel, seed=0, parts=4):
    rng = np.random.default_rng(seed)
    n, m = 200, 30
    keys = rng.uniform(0, 10, (n, 1))
    values = rng.normal(size=(n, 2))
    queries = rng.uniform(0, 10, (m, 1))
    k, h = get(kernel), np.array([0.3])
    whole = reference.partials(queries, keys, values, kernel=k, bandwidth=h)
    cuts = np.sort(rng.choice(np.arange(1, n), parts - 1, replace=False))
    pieces = [reference.partials(queries, kk, vv, kernel=k, bandwidth=h)
              for kk, vv in zip(np.split(keys, cuts), np.split(values, cuts))]
    return whole, pieces


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "laplacian"])
def test_additivity_halves_merge_to_the_whole(kernel):
    whole, pieces = _split_partials(kernel)
    merged = merge_all(pieces)
    np.testing.assert_allclose(merged.finalize(), whole.finalize(), rtol=1e-13)


def test_merge_is_associative_and_commutative():
    _, (a, b, c, d) = _split_partials("gaussian", seed=1)
    left = merge(merge(merge(a, b), c), d)
    tree = merge(merge(a, b), merge(c, d))
    swapped = merge(merge(d, c), merge(b, a))
    # relative to the size of the results (single entries can cancel to near zero)
    scale = np.abs(left.finalize()).max()
    for other in (tree, swapped):
        assert np.abs(other.finalize() - left.finalize()).max() <= 1e-15 * scale
        np.testing.assert_allclose(other.weight * np.exp(other.shift), left.weight * np.exp(left.shift),
                                   rtol=1e-15)


def test_merge_with_empty_is_identity_and_empty_with_empty_is_empty():
    _, (a, *_) = _split_partials("gaussian")
    e = empty(a.weight.shape[0], a.value.shape[1])
    np.testing.assert_array_equal(merge(a, e).finalize(), a.finalize())
    np.testing.assert_array_equal(merge(e, a).finalize(), a.finalize())
    ee = merge(e, e)
    assert ee.empty.all() and not np.isnan(ee.weight).any() and np.isneginf(ee.shift).all()


def test_merge_rescales_far_apart_shifts_without_overflow():
    a = Partials(np.array([0.0]), np.array([1.0]), np.array([[1.0]]))
    b = Partials(np.array([-2000.0]), np.array([1.0]), np.array([[5.0]]))
    assert merge(a, b).finalize()[0, 0] == 1.0
    assert merge(b, a).finalize()[0, 0] == 1.0


def test_concat_and_select():
    _, (a, b, *_) = _split_partials("gaussian")
    both = concat([a, b])
    np.testing.assert_array_equal(both[a.weight.shape[0]:].finalize(), b.finalize())


def test_merge_all_needs_one():
    with pytest.raises(ValueError, match="at least one"):
        merge_all([])


def test_blocks_smaller_than_the_data_give_the_same_answer():
    rng = np.random.default_rng(2)
    x, y = rng.uniform(0, 1, 3000), rng.normal(size=3000)
    full = nadaraya.pool(x[:500], x, y, bandwidth=0.05)
    with nadaraya.config_context(working_memory=1):
        assert reference.block_sizes(500, 3000, 8) != (500, 3000)
        small = nadaraya.pool(x[:500], x, y, bandwidth=0.05)
    np.testing.assert_allclose(small, full, rtol=1e-13)
