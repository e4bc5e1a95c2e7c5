"""The truncated backend's rows in query order: the dense cells write them there directly, the
other queries' rows are scattered after them, and every row equals the one of an unsorted visit."""

from __future__ import annotations

import numpy as np
import pytest
from test_truncated import _compare, _run

from nadaraya.backends import _truncated_cells as cells
from nadaraya.backends import truncated


def _fields(p):  # type: ignore[no-untyped-def]
    return (p.shift, p.weight, p.value, *p.moments)


def _both(monkeypatch: pytest.MonkeyPatch, *args, **kw):  # type: ignore[no-untyped-def]
    """The partials with the queries visited in bucket order, then in their own order, and the
    share of queries the cells served in the first."""
    shares: list[float] = []
    real = cells.sums

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        done = real(*a, **k)
        shares.append(float(done.mean()) if done.size else 0.0)
        return done

    monkeypatch.setattr(truncated._cells, "sums", spy)
    monkeypatch.setattr(truncated, "SORT_QUERIES_ABOVE", 8)
    sorted_visit = _run("truncated", *args, **kw)
    monkeypatch.setattr(truncated, "SORT_QUERIES_ABOVE", 10**12)
    plain = _run("truncated", *args, **kw)
    return sorted_visit, plain, shares[0]


def _case(n: int, m: int, p: int, seed: int, dtype=np.float64):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    k = rng.uniform(0.0, 5.0, n)
    k[: n // 10] = k[n // 10: n // 5]  # duplicates
    q = rng.uniform(-0.5, 5.5, m)
    q[:4] = (-1e4, 7.0, 1e6, 2.5)  # far queries: not served by the cells
    v = rng.normal(size=(n, p)) + k[:, None]
    return q[:, None].astype(dtype), k[:, None].astype(dtype), v.astype(dtype)


@pytest.mark.parametrize(("moments", "p"), [(0, 1), (1, 1), (1, 3), (2, 2)])
def test_rows_in_query_order_match_an_unsorted_visit_and_the_reference(
    monkeypatch: pytest.MonkeyPatch, moments: int, p: int
) -> None:
    q, k, v = _case(6000, 2500, p, seed=moments * 7 + p)
    exclude = np.random.default_rng(moments).integers(-1, 6000, 2500)
    exclude[::3] = np.arange(0, 2500, 3)  # often a key near the query's own cell
    for h, ex in ((0.05, None), (0.05, exclude), (0.3, exclude)):
        got, plain, share = _both(monkeypatch, q, k, v, h, None, ex, moments=moments)
        assert 0.0 < share < 1.0  # cells' rows and the others' both
        for a, b in zip(_fields(got), _fields(plain), strict=True):
            np.testing.assert_array_equal(a, b)
        if moments == 0:
            want = _run("reference", q, k, v, h, None, ex)
            _compare(got, want, _run("reference", q, k, np.abs(v), h, None, ex), float(np.abs(v).max()))
        else:
            want = _run("reference", q, k, v, h, None, ex, moments=moments)
            ok = ~want.empty
            np.testing.assert_array_equal(got.empty, want.empty)
            # the sums under one common shift, each to 1e-11 of its size (|moments| <= the
            # reference's of |.|: the keys are within 5 + 1e6 of a query, h^j scales them)
            scale = np.exp(got.shift[ok] - want.shift[ok])
            for a, b in zip(_fields(got)[1:], _fields(want)[1:], strict=True):
                s = scale.reshape((-1,) + (1,) * (a.ndim - 1))
                size = np.abs(b[ok]).max(axis=0, keepdims=True) + np.abs(b[ok])
                assert np.all(np.abs(a[ok] * s - b[ok]) <= 1e-11 * size + 1e-300)


def test_no_cell_served_rows_come_back_in_query_order(monkeypatch: pytest.MonkeyPatch) -> None:
    q, k, v = _case(400, 300, 2, seed=5)
    got, plain, share = _both(monkeypatch, q, k, v, 1e-4, None, None, moments=1)
    assert share == 0.0
    for a, b in zip(_fields(got), _fields(plain), strict=True):
        np.testing.assert_array_equal(a, b)


def test_float32_and_single_query(monkeypatch: pytest.MonkeyPatch) -> None:
    q, k, v = _case(6000, 2500, 1, seed=9, dtype=np.float32)
    got, plain, share = _both(monkeypatch, q, k, v, 0.1, None, None, moments=1)
    assert share > 0.5
    assert got.weight.dtype == np.float32
    for a, b in zip(_fields(got), _fields(plain), strict=True):
        np.testing.assert_array_equal(a, b)
    one, one_plain, _ = _both(monkeypatch, q[5:6], k, v, 0.1, None, None, moments=2)
    for a, b in zip(_fields(one), _fields(one_plain), strict=True):
        np.testing.assert_array_equal(a, b)
