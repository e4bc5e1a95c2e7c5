"""The dense cells' ``worth`` counts each sample's nearby queries without sorting them all: the same values.

``worth`` (``nadaraya.backends._truncated_cells``) skips the sort where every sampled query's window
holds every query, and otherwise sorts by buckets; the chooser's ``backend="auto"`` reads its values,
so they must equal, bit for bit, those of the plain formula below (every query sorted with numpy,
its 8192 sampled from ``default_rng(1)`` above that many, each sample's count by ``searchsorted``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import nadaraya.backends._truncated_cells as cells
from nadaraya.backends.truncated import log_ratio


def plain_worth(sampled, queries, keys, h, window, big_l):  # type: ignore[no-untyped-def]
    """The formula written out: sort the (sampled) queries, count those within the radius of each sample."""
    n, m = keys.size, queries.size
    k0, k1 = (float(keys.min()), float(keys.max())) if n else (0.0, 0.0)
    if m == 0 or not (n > 0 and n * cells.RHO * h >= cells.SPARSE * (k1 - k0)):
        return np.full(sampled.size, np.inf)
    radius = math.sqrt(2.0 * big_l) * h
    picked = queries if m <= 8192 else queries[np.random.default_rng(1).integers(0, m, 8192)]
    qs = np.sort(picked)
    priced = cells.priced_terms(max(abs(k0), abs(k1), abs(float(qs[0])), abs(float(qs[-1]))), h, big_l)
    if priced is None:
        return np.full(sampled.size, np.inf)
    near = np.searchsorted(qs, sampled + radius, side="right") - np.searchsorted(qs, sampled - radius)
    share = cells.RHO * h / (2.0 * radius)
    kb, qb = window * share, np.maximum(near * (m / qs.size) * share, 1e-9)
    pair = 1.05 + 0.1  # the cost model's _PAIR, _CALL, _FIXED and _POINT
    keyed = qb * (kb * pair + 30.0)
    fixed, per_term = 150.0 + 2 * 50.0 + (kb + qb) * 3.5, (kb + qb) * (0.12 * 2)
    out = sum(count * np.minimum(keyed, fixed + per_term * nt) for nt, count in priced) / qb
    return np.where(out < window * pair + 30.0, out / pair, np.inf)


def _data(kind: str, m: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "uniform":
        return rng.uniform(0.0, 1.0, m)
    if kind == "sorted":
        return np.sort(rng.uniform(0.0, 1.0, m))
    if kind == "clustered":  # most queries at a few points: buckets overflow, numpy sorts
        return np.where(rng.uniform(size=m) < 0.9, rng.integers(0, 3, m) * 0.25, rng.uniform(0, 1, m))
    if kind == "far":  # far from the origin: the centres' rounding prices more terms
        return 1e6 + rng.uniform(0.0, 1.0, m)
    return np.full(m, 0.5)  # all equal


@pytest.mark.parametrize("kind", ["uniform", "sorted", "clustered", "far", "equal"])
@pytest.mark.parametrize("m", [1, 40, 2000, 8192, 8193, 10_000, 30_000])
def test_worth_equals_the_plain_formula(kind: str, m: int) -> None:
    rng = np.random.default_rng(m)
    queries = _data(kind, m, rng)
    for n in (2000, 30_000):
        keys = queries if n == m else _data(kind, n, rng)
        big_l = log_ratio(n)
        for h in (0.5, 0.15, 0.05, 0.01, 0.001, 1e-5):
            for size in (0, 1, 512):
                sampled = queries[rng.integers(0, m, size)]
                windows = (np.full(size, float(n)), rng.uniform(1.0, n, size))
                for window in windows:
                    got = cells.worth(sampled, queries, keys, h, window, big_l)
                    want = plain_worth(sampled, queries, keys, h, window, big_l)
                    assert got.shape == want.shape == (size,)
                    assert np.array_equal(got, want), (kind, m, n, h, size)


def test_worth_on_queries_other_than_the_keys() -> None:
    """Queries wider than the keys, and narrower; samples from one side only, whose windows reach
    the near end of the queries and, at some bandwidths, not the far one."""
    rng = np.random.default_rng(5)
    keys = rng.uniform(0.0, 1.0, 4000)
    for queries in (rng.uniform(-3.0, 4.0, 3000), rng.uniform(0.4, 0.6, 12_000), keys):
        lo, hi = float(queries.min()), float(queries.max())
        for h in np.geomspace(0.005, 0.5, 25):
            left, right = queries[queries < lo + 0.3 * (hi - lo)], queries[queries > hi - 0.3 * (hi - lo)]
            for side in (queries, left, right):
                sampled = side[rng.integers(0, side.size, 512)]
                window = np.full(512, 4000.0)
                got = cells.worth(sampled, queries, keys, h, window, log_ratio(4000))
                assert np.array_equal(got, plain_worth(sampled, queries, keys, h, window, log_ratio(4000)))


def test_some_cells_are_worth_it() -> None:
    """The grid above is not all ``inf``: the counts it compares are read."""
    x = np.random.default_rng(0).uniform(0.0, 1.0, 10_000)
    for h in (0.15, 0.01):
        got = cells.worth(x[:512], x, x, h, np.full(512, 1e4), log_ratio(10_000))
        assert np.isfinite(got).all()
