"""The dense cells' price in ``auto``'s estimate (``_truncated_cells.worth``): each pair of cells at
the terms the cells take for it (``pair_terms``, far pairs cut), against the passes' own terms
read by a spy, and the vectorised price against the compiled per-pair cost model."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nadaraya
from nadaraya.backends import _truncated_cells as cells
from nadaraya.backends._truncated_grid import log_ratio
from nadaraya.backends._truncated_sums import terms


def _grid(kind: str) -> tuple[np.ndarray, float]:
    rng = np.random.default_rng(3)
    if kind == "even":
        return np.linspace(0.0, 1.0, 8001), 5e-3
    if kind == "uniform":
        return np.sort(rng.uniform(0.0, 5.0, 6000)), 0.01
    if kind == "small":
        return np.linspace(-1.0, 1.0, 1500), 0.02
    # far from 0 with a small h: the cells' rounding margin adds to half a cell (and to the terms)
    return 1e6 + np.linspace(0.0, 2e-6, 4001), 1e-8


@pytest.mark.parametrize("kind", ["even", "uniform", "small", "far"])
def test_priced_terms_are_the_cells_terms(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What worth prices per pair of cells equals the terms the cells' pass takes for each offset,
    and a query cell's priced total equals the sum of its pairs' terms in the interior (no more
    anywhere: cells at the ends have fewer pairs)."""
    x, h = _grid(kind)
    seen: list[tuple] = []
    real = cells.run_ranges

    def spy(task, args, *rest, **kw):  # type: ignore[no-untyped-def]
        if task is cells._cells:
            seen.append(args)
        return real(task, args, *rest, **kw)

    monkeypatch.setattr(cells, "run_ranges", spy)
    nadaraya.pool(x, x, np.sin(7 * x), bandwidth=h, backend="truncated")
    assert seen, "the cells did not run"
    kid, qid, nts = seen[0][2], seen[0][11], seen[0][16]
    priced = cells.priced_terms(max(abs(x[0]), abs(x[-1])), h, log_ratio(x.size))
    assert priced is not None
    want: dict[int, float] = {}
    for o, nt in enumerate(nts.tolist()):
        want[nt] = want.get(nt, 0.0) + (1.0 if o == 0 else 2.0)
    assert dict(priced) == want
    if kind == "far":  # the margin counts: more terms than half a cell alone would take
        assert nts[0] > terms((cells.RHO / 2) ** 2)
    total = sum(nt * count for nt, count in priced)
    reach = nts.size - 1
    per_cell = []
    for q in qid:
        off = np.abs(kid - q)
        per_cell.append(int(nts[off[off <= reach]].sum()))
    assert max(per_cell) == total
    assert all(t <= total for t in per_cell)
    # far pairs cut: the price is under every pair at the full count
    assert total < (2 * reach + 1) * nts[0]


def test_no_cells_no_price() -> None:
    """Where the rounding margin passes a cell's width, sums makes no cells: worth prices none."""
    assert cells.priced_terms(1e9, 1e-9, 50.0) is None
    x = 1e9 + np.linspace(0.0, 1e-5, 3000)
    got = cells.worth(x[:3], x, x, 1e-9, np.full(3, 100.0), 50.0)
    assert np.all(np.isinf(got))


@pytest.mark.parametrize("n,h", [(8000, 2e-3), (3000, 0.05), (8000, 0.02)])
def test_worth_against_the_per_pair_cost_model(n: int, h: float) -> None:
    """worth's vectorised price equals, sample by sample, the sum over the query cell's pairs
    (offsets -reach .. reach) of the compiled per-pair model ``_costs`` (one value column,
    degree 0), each pair at its own terms (at most 8192 queries: worth counts them all)."""
    rng = np.random.default_rng(5)
    x = np.sort(rng.uniform(0.0, 1.0, n))
    big_l = log_ratio(n)
    sampled = x[rng.integers(0, n, 40)]
    rad = math.sqrt(2.0 * big_l) * h
    window = (np.searchsorted(x, sampled + rad, "right") - np.searchsorted(x, sampled - rad)).astype(float)
    got = cells.worth(sampled, x, x, h, window, big_l)
    priced = cells.priced_terms(1.0, h, big_l)
    share = cells.RHO * h / (2.0 * rad)
    near = np.searchsorted(x, sampled + rad, "right") - np.searchsorted(x, sampled - rad)
    pair = cells._PAIR[0] + cells._PAIR[1]
    for i in range(sampled.size):
        kb, qb = window[i] * share, max(near[i] * share, 1e-9)
        cost = 0.0
        for nt, count in priced:
            keyed, series = cells._costs(qb, kb, 0, 1, nt, 0)
            cost += count * min(keyed, series)
        want = cost / qb / pair if cost / qb < window[i] * pair + cells._CALL else math.inf
        assert got[i] == pytest.approx(want, rel=1e-12)
