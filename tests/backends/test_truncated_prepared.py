"""The truncated backend's leave-one-out passes on keys prepared once (``prepare_loo``), as a
bandwidth search runs them: the same partials, bit for bit, as the unprepared call, and the
same sums as the reference backend, each query's own term masked."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya.backends import reference, truncated
from nadaraya.backends._truncated_sums import nearest
from nadaraya.bandwidth._objective import _Objective
from nadaraya.kernels import get

GAUSS = get("gaussian")


def _both(x: np.ndarray, v: np.ndarray, hs: list[float]) -> None:
    keys = x[:, None]
    ex = np.arange(x.size)
    prep = truncated.prepare_loo(keys, v)
    for h in hs:
        bw = np.array([h])
        plain = truncated.partials(keys, keys, v, kernel=GAUSS, bandwidth=bw, exclude=ex)
        fast = truncated.partials(keys, keys, v, kernel=GAUSS, bandwidth=bw, exclude=ex, _prepared=prep)
        for a, b in [(plain.shift, fast.shift), (plain.weight, fast.weight), (plain.value, fast.value)]:
            np.testing.assert_array_equal(a, b, err_msg=f"h={h}")


@pytest.mark.parametrize("n", [1, 2, 3, 40, 3000])
def test_same_partials_random(n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.uniform(0, 5, n)
    _both(x, rng.normal(size=(n, 2)), [1e-4, 0.003, 0.05, 0.7, 30.0])


def test_same_partials_sorted_large_duplicates_far() -> None:
    # above SORT_QUERIES_ABOVE keys, sorted (the queries' own order is kept), with duplicates
    rng = np.random.default_rng(1)
    x = np.sort(np.round(rng.uniform(0, 5, 40_000), 3))
    _both(x, rng.normal(size=(x.size, 1)), [0.0005, 0.02, 8.0])
    # unsorted keys far from 0 with a small bandwidth, and a bandwidth whose u^2 overflows
    far = 1e6 + rng.uniform(0, 1e-2, 500)
    _both(far, rng.normal(size=(500, 1)), [1e-5, 1e-3])
    _both(rng.uniform(0, 1, 50), rng.normal(size=(50, 1)), [1e-200])


def test_nearest_is_the_nearest_other_key() -> None:
    rng = np.random.default_rng(2)
    ks = np.sort(np.round(rng.uniform(0, 1, 300), 2))
    _, near = nearest(ks, ks.copy(), np.arange(ks.size))
    d = np.abs(ks[:, None] - ks[None, :])
    np.fill_diagonal(d, np.inf)
    np.testing.assert_array_equal(np.abs(ks - ks[near]), d.min(axis=1))


def test_prepared_sums_match_reference_leaving_one_out() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, 2500)
    v = rng.normal(size=(x.size, 1))
    keys, ex = x[:, None], np.arange(x.size)
    prep = truncated.prepare_loo(keys, v)
    for h in [0.002, 0.1, 5.0]:
        bw = np.array([h])
        got = truncated.partials(keys, keys, v, kernel=GAUSS, bandwidth=bw, exclude=ex, _prepared=prep)
        ref = reference.partials(keys, keys, v, kernel=GAUSS, bandwidth=bw, exclude=ex)
        np.testing.assert_allclose(got.finalize(), ref.finalize(), rtol=1e-12, atol=1e-13)
        # written out plainly: each point's own term left out
        w = np.exp(-0.5 * ((x[:, None] - x[None, :]) / h) ** 2)
        np.fill_diagonal(w, 0.0)
        np.testing.assert_allclose(got.finalize()[:, 0], (w @ v[:, 0]) / w.sum(axis=1), rtol=1e-10)


def test_search_objective_scores_as_before() -> None:
    # where the cells pay, the objective's passes run on prepared keys: the same scores as the
    # primitive's leave-one-out pass through ``auto``
    from nadaraya._core.call import Call, compute_partials

    rng = np.random.default_rng(4)
    x = rng.uniform(0, 5, 6000)[:, None]
    y = (np.sin(x[:, 0]) + rng.normal(0, 0.3, x.shape[0]))[:, None]
    obj = _Objective(x, y, None, GAUSS, "cv", "auto")
    assert obj._cells_pay
    for h in [0.003, 0.08, 3.0]:
        bw = np.array([h])
        call = Call(obj.X, obj.X, obj.Y, False, GAUSS, bw, None)
        parts, choice = compute_partials(call, exclude=obj.exclude)
        assert choice.name == "truncated"
        assert obj.at(bw) == obj.from_partials(parts)
    assert obj._prepared is not None and obj.n_passes == 3


@pytest.mark.parametrize("offset", [0.0, -3.0, 1e6])
def test_one_cell_centred_on_the_data_against_reference(offset: float) -> None:
    # bandwidths where every key and query fits in one cell: the cell is centred on the data and
    # its series takes fewer terms; every query within 1e-12 of the reference, with and without
    # leave-one-out, queries other than the keys included
    from nadaraya.backends import _truncated_cells as cells

    rng = np.random.default_rng(5)
    x = offset + rng.uniform(0, 1, 3000)
    q = offset + rng.uniform(-0.05, 1.05, 700)
    v = rng.normal(size=(x.size, 2))
    assert cells._half(abs(offset) + 1, 3.0, 1.0) < 0.2 < cells._half(abs(offset) + 1, 3.0)
    for h in [0.7, 3.0, 50.0]:
        bw = np.array([h])
        for qq, ex in [(x[:, None], np.arange(x.size)), (q[:, None], None)]:
            got = truncated.partials(qq, x[:, None], v, kernel=GAUSS, bandwidth=bw, exclude=ex)
            ref = reference.partials(qq, x[:, None], v, kernel=GAUSS, bandwidth=bw, exclude=ex)
            np.testing.assert_allclose(got.finalize(), ref.finalize(), rtol=1e-12, atol=0)
            lw = np.log(got.weight) + got.shift
            np.testing.assert_allclose(lw, np.log(ref.weight) + ref.shift, rtol=1e-12, atol=1e-12)
