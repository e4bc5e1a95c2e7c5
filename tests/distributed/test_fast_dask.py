"""The distributed path on the fast sums: Dask tasks choose as one machine does, merged within the bound."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from nadaraya import backends
from nadaraya.distributed import backend as dask_backend

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The backends the Dask tasks ran (the synchronous scheduler runs them here)."""
    seen: list[str] = []
    real = backends.compute

    def record(name, *args, **kw):  # type: ignore[no-untyped-def]
        seen.append(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(backends, "compute", record)
    with dask.config.set(scheduler="synchronous"):
        yield seen


def data(n: int, d: int = 1, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 5, (n, d))
    y = 2 * np.sin(x).sum(axis=1) + x.sum(axis=1) + rng.normal(0, 0.5, n)
    return x, y, rng.uniform(-0.5, 5.5, (n // 2, d))


def test_dask_tasks_take_the_taylor_series_within_tol_and_keep_its_bound(names: list[str]) -> None:
    x, y, q = data(8000)
    exact = nadaraya.pool(q, x, y, bandwidth=0.002, backend="reference")
    with dask_backend.options(chunks=2000):
        got = nadaraya.pool(q, x, y, bandwidth=0.002, tol=1e-10, backend="dask")
    assert "taylor" in names
    assert np.all(np.abs(got - exact) <= 1e-10 * np.abs(y).max())


def test_lazy_dask_input_takes_the_fast_sums_within_tol(names: list[str]) -> None:
    x, y, q = data(8000, seed=1)
    exact = nadaraya.pool(q, x, y, bandwidth=0.002, backend="reference")
    lazy = nadaraya.pool(q, da.from_array(x, chunks=(2000, 1)), y, bandwidth=0.002, tol=1e-10)
    got = lazy.compute()
    assert "taylor" in names
    assert np.all(np.abs(got - exact) <= 1e-10 * np.abs(y).max())
    names.clear()
    loo = nadaraya.loo_pool(da.from_array(x, chunks=(2000, 1)), y, bandwidth=0.002, tol=1e-10).compute()
    assert "taylor" in names  # tol reaches the leave-one-out tasks too
    loo_exact = nadaraya.loo_pool(x, y, bandwidth=0.002, backend="reference")
    assert np.all(np.abs(loo - loo_exact) <= 1e-10 * np.abs(y).max())


def test_lazy_dask_input_runs_the_backend_named_in_every_task(names: list[str]) -> None:
    x, y, q = data(3000, seed=2)
    lazy_x = da.from_array(x, chunks=(1000, 1))
    got = nadaraya.pool(q, lazy_x, y, bandwidth=0.3, backend="reference").compute()
    loo = nadaraya.loo_pool(lazy_x, y, bandwidth=0.3, backend="reference").compute()
    assert names and set(names) == {"reference"}  # not what auto would take (fused or truncated)
    np.testing.assert_allclose(got, nadaraya.pool(q, x, y, bandwidth=0.3), rtol=1e-12)
    np.testing.assert_allclose(loo, nadaraya.loo_pool(x, y, bandwidth=0.3), rtol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_dask_tasks_take_the_exact_truncated_sums_without_tol(names: list[str], d: int) -> None:
    x, y, q = data(6000, d=d, seed=d)
    h = np.array([0.004, 0.02, 0.03])[:d]
    exact = nadaraya.pool(q, x, y, bandwidth=h, backend="reference")
    with dask_backend.options(chunks=2000):
        got = nadaraya.pool(q, x, y, bandwidth=h, backend="dask")
    assert "truncated" in names and "taylor" not in names
    np.testing.assert_allclose(got, exact, rtol=1e-12, atol=1e-12)


def test_choose_for_data_is_what_pool_takes() -> None:
    from nadaraya._core.call import compute_partials, prepare
    from nadaraya.kernels import get

    x, y, _ = data(3000, d=2)
    for h, tol in ((0.01, None), (3.0, None), (0.01, 1e-8)):
        call = prepare(x, x, y, kernel="gaussian", bandwidth=h)
        _, choice = compute_partials(call, tol=tol)
        expect = backends.choose_for_data(get("gaussian"), call.queries, call.keys, call.bandwidth, tol=tol)
        plain = backends.choose(get("gaussian"), n=3000, m=3000, d=2)
        assert choice.name == (expect or plain).name


def test_merged_partials_never_take_the_binned_certificate(
    names: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The binned backend certifies each prediction of its own call, not each sum: Dask chunks
    and the categories of mixed data, whose partials are merged, take an exact method instead
    (its modelled cost is made tiny here, so that only that rule keeps it out)."""
    monkeypatch.setitem(backends.BINNED_NS, "grid", 1e-3)
    monkeypatch.setitem(backends.BINNED_NS, "point", 1e-3)
    rng = np.random.default_rng(8)
    x = rng.uniform(0, 5, 8000)
    y = np.sin(x)
    with dask_backend.options(chunks=2000):
        got = nadaraya.pool(x[:2000], x, y, kernel="logistic", bandwidth=0.2, tol=1e-6, backend="dask")
    assert "binned" not in names and names
    names.clear()
    one = nadaraya.pool(x[:2000], x, y, kernel="logistic", bandwidth=0.2, tol=1e-6)
    assert names == ["binned"]
    exact = nadaraya.pool(x[:2000], x, y, kernel="logistic", bandwidth=0.2, backend="reference")
    assert np.abs(got - exact).max() <= 1e-12 and np.abs(one - exact).max() <= 1e-6
    names.clear()
    X = np.column_stack([x, rng.integers(0, 3, x.size)])
    nadaraya.pool(X[:2000], X, y, kernel="logistic", bandwidth=[0.2, 0.3], var_types="cu", tol=1e-6)
    assert "binned" not in names and names


def test_an_unknown_engine_is_refused_at_the_call_not_at_compute() -> None:
    x = np.linspace(0.0, 1.0, 20)
    with pytest.raises(ValueError, match=r"backend='nope' is not known"):
        nadaraya.pool(x, da.from_array(x, chunks=10), x, backend="nope")
    with pytest.raises(ValueError, match=r"backend='nope' is not known"):
        nadaraya.loo_pool(da.from_array(x, chunks=10), x, backend="nope")


def test_a_chunk_is_priced_with_its_sample_weights(monkeypatch):
    """auto prices a Dask chunk as one process prices the call: with its sample weights (the 1-D
    Gaussian's bands of keys by weight change which exact backend is cheapest)."""
    seen = []
    choose = backends.choose_for_data

    def spy(*args, **kw):
        seen.append(kw.get("sample_weight"))
        return choose(*args, **kw)

    monkeypatch.setattr(backends, "choose_for_data", spy)
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, (300, 1))
    sw = np.exp(rng.uniform(-80, 80, 300))
    got = dask_backend.block(x, x, x, sw, None, kernel="gaussian", bandwidth=np.array([0.05]), engine="auto")
    assert len(seen) == 1 and seen[0] is not None and np.array_equal(seen[0], sw)
    ref = backends.compute("reference", x, x, x, kernel=nadaraya.kernels.get("gaussian"),
                           bandwidth=np.array([0.05]), sample_weight=sw)
    np.testing.assert_allclose(got.finalize(), ref.finalize(), rtol=1e-12)
