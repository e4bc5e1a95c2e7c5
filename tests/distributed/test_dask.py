"""The Dask backend on a real distributed.LocalCluster (2 worker processes): exactness against the
single-machine path, NumPy- and Zarr-backed inputs, bit-identical reruns, the merge tree, lost
workers and failing tasks."""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings

import numpy as np
import pytest

import nadaraya
from nadaraya.kernels import REGISTRY
from nadaraya.partials import Partials, merge, merge_all

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
nd = pytest.importorskip("nadaraya.distributed.backend")
dpool = pytest.importorskip("nadaraya.distributed.pool")  # the lazy pool moved out of the backend
drules = pytest.importorskip("nadaraya.distributed.rules")  # the Dask rules of thumb too

pytestmark = pytest.mark.cluster

RTOL = 1e-12
KERNELS = sorted(REGISTRY)


@pytest.fixture(scope="module")
def client():
    """Two worker processes of one thread each, started once for the module."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    ) as cluster, distributed.Client(cluster) as c:
        yield c


def _problem(seed, n=310, m=170, d=2, p=2):
    rng = np.random.default_rng(seed)
    keys = rng.uniform(-2, 2, size=(n, d))
    # values away from zero, so that relative errors measure the sums, not a cancellation
    values = np.column_stack([rng.uniform(1, 3, n), rng.uniform(-5, -2, n)])[:, :p]
    queries = rng.uniform(-2.2, 2.2, size=(m, d))
    sw = rng.integers(1, 4, size=n).astype(float)
    return queries, keys, values, sw


def _single(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        return fn(*args, **kwargs)


def _close(got, want, rtol=RTOL):
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)


# ------------------------------------------------------------------ agreement with one machine


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_kernel_matches_single_machine(client, kernel):
    q, k, v, sw = _problem(1)
    h = np.array([0.35, 0.6])  # per feature; small enough that compact kernels leave some empty
    got = nadaraya.pool(
        da.from_array(q, chunks=(45, 2)),
        da.from_array(k, chunks=(70, 2)),
        da.from_array(v, chunks=(70, 2)),
        kernel=kernel,
        bandwidth=h,
        sample_weight=da.from_array(sw, chunks=70),
    )
    assert isinstance(got, da.Array)
    assert got.chunks[0] == (45, 45, 45, 35)
    want = _single(nadaraya.pool, q, k, v, kernel=kernel, bandwidth=h, sample_weight=sw)
    _close(got.compute(), want)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "laplacian", "tricube"])
def test_leave_one_out_matches_single_machine(client, kernel):
    _, k, v, sw = _problem(2, n=260)
    h = [0.5, 0.4]
    got = nadaraya.loo_pool(
        da.from_array(k, chunks=(60, 2)), da.from_array(v, chunks=(60, 2)), kernel=kernel, bandwidth=h,
        sample_weight=da.from_array(sw, chunks=60),
    )
    want = _single(nadaraya.loo_pool, k, v, kernel=kernel, bandwidth=h, sample_weight=sw)
    _close(got.compute(), want)
    # and each point's own term really is left out
    full = _single(nadaraya.pool, k, k, v, kernel=kernel, bandwidth=h, sample_weight=sw)
    assert not np.allclose(got.compute()[:, 0], full[:, 0], equal_nan=True)


def test_one_d_values_and_mixed_numpy_queries(client):
    q, k, v, _ = _problem(3, d=1)
    got = nadaraya.pool(q[:, 0], da.from_array(k[:, 0], chunks=50), da.from_array(v[:, 0], chunks=50),
                        bandwidth=0.2)
    assert got.shape == (q.shape[0],)
    _close(got.compute(), nadaraya.pool(q[:, 0], k[:, 0], v[:, 0], bandwidth=0.2))


@pytest.mark.parametrize("empty", ["nearest", "mean"])
@pytest.mark.parametrize("loo", [False, True])
def test_empty_window_policies_match_single_machine(client, empty, loo):
    q, k, v, sw = _problem(4, n=200, d=1)
    k[::7] += 6.0  # isolated keys: empty windows for nearby queries and for themselves (LOO)
    q[::5] = 9.0
    args = dict(kernel="epanechnikov", bandwidth=0.05, sample_weight=sw, empty=empty)
    dk, dv, dsw = da.from_array(k, chunks=(45, 1)), da.from_array(v, chunks=(45, 2)), da.from_array(sw, 45)
    if loo:
        got = nadaraya.loo_pool(dk, dv, **{**args, "sample_weight": dsw})
        want = _single(nadaraya.loo_pool, k, v, **args)
    else:
        got = nadaraya.pool(da.from_array(q, chunks=(40, 1)), dk, dv, **{**args, "sample_weight": dsw})
        want = _single(nadaraya.pool, q, k, v, **args)
    got = got.compute()
    assert not np.isnan(want).any()
    _close(got, want)


def test_empty_raise_raises_when_computed(client):
    q, k, v, _ = _problem(5, d=1)
    out = nadaraya.pool(da.from_array(q + 50.0, chunks=(40, 1)), da.from_array(k, chunks=(50, 1)), v,
                        kernel="boxcar", bandwidth=0.1, empty="raise")
    with pytest.raises(ValueError, match="no key with positive weight"):
        out.compute()


def test_zarr_backed_inputs(client, tmp_path):
    zarr = pytest.importorskip("zarr")
    q, k, v, sw = _problem(6, n=400, m=150, d=2, p=2)
    stores = {}
    for name, arr, chunks in (("keys", k, (90, 2)), ("values", v, (90, 2)), ("queries", q, (64, 2)),
                              ("sw", sw, (90,))):
        z = zarr.create_array(store=str(tmp_path / f"{name}.zarr"), shape=arr.shape, chunks=chunks,
                              dtype="f8")
        z[...] = arr
        stores[name] = da.from_zarr(str(tmp_path / f"{name}.zarr"))
    for kernel in ("gaussian", "biweight"):
        got = nadaraya.pool(stores["queries"], stores["keys"], stores["values"], kernel=kernel,
                            bandwidth=[0.4, 0.7], sample_weight=stores["sw"])
        want = _single(nadaraya.pool, q, k, v, kernel=kernel, bandwidth=[0.4, 0.7], sample_weight=sw)
        _close(got.compute(), want)
    got = nadaraya.loo_pool(stores["keys"], stores["values"], bandwidth=[0.4, 0.7],
                            sample_weight=stores["sw"])
    _close(got.compute(), nadaraya.loo_pool(k, v, bandwidth=[0.4, 0.7], sample_weight=sw))


def test_backend_dask_for_numpy_input(client):
    q, k, v, sw = _problem(7)
    with nd.options(chunks=64, split_every=3):
        got = nadaraya.pool(q, k, v, bandwidth=0.3, sample_weight=sw, backend="dask")
        loo = nadaraya.loo_pool(k, v, bandwidth=0.3, sample_weight=sw, backend="dask")
    assert isinstance(got, np.ndarray)
    _close(got, nadaraya.pool(q, k, v, bandwidth=0.3, sample_weight=sw))
    _close(loo, nadaraya.loo_pool(k, v, bandwidth=0.3, sample_weight=sw))


def test_float32_stays_float32(client):
    q, k, v, _ = _problem(8)
    got = nadaraya.pool(da.from_array(q.astype(np.float32), chunks=(50, 2)),
                        da.from_array(k.astype(np.float32), chunks=(80, 2)),
                        da.from_array(v.astype(np.float32), chunks=(80, 2)), bandwidth=0.4)
    assert got.dtype == np.float32
    want = nadaraya.pool(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), bandwidth=0.4)
    np.testing.assert_allclose(got.compute(), want, rtol=1e-5)


# ------------------------------------------------------------------ reproducibility and the merge tree


def test_repeat_runs_are_bit_identical(client):
    q, k, v, sw = _problem(9, n=600, m=300)
    args = (da.from_array(q, chunks=(37, 2)), da.from_array(k, chunks=(41, 2)),
            da.from_array(v, chunks=(41, 2)))
    runs = [nadaraya.pool(*args, bandwidth=0.3, sample_weight=sw).compute() for _ in range(3)]
    assert np.array_equal(runs[0], runs[1]) and np.array_equal(runs[0], runs[2])
    # a different tree shape is a different rounding, but the same sums
    other = dpool.pool(*args, bandwidth=0.3, sample_weight=sw, split_every=2).compute()
    _close(other, runs[0], rtol=1e-14)


def _random_partials(rng, count, m=50, p=2):
    parts = []
    for _ in range(count):
        shift = rng.uniform(-40, 10, m)
        shift[rng.random(m) < 0.1] = -np.inf  # queries this block did not reach
        weight = np.where(np.isfinite(shift), rng.uniform(0.5, 30, m), 0.0)
        value = weight[:, None] * rng.uniform(1, 2, (m, p))
        parts.append(Partials(shift, weight, value))
    return parts


def _random_tree(parts, rng):
    """Merge in a random binary tree (random split points, random recursion)."""
    if len(parts) == 1:
        return parts[0]
    cut = int(rng.integers(1, len(parts)))
    return merge(_random_tree(parts[:cut], rng), _random_tree(parts[cut:], rng))


@pytest.mark.parametrize("seed", range(5))
def test_any_merge_tree_equals_the_sequential_merge(seed):
    rng = np.random.default_rng(seed)
    parts = _random_partials(rng, int(rng.integers(2, 40)))
    want = merge_all(parts)
    trees = [_random_tree(parts, rng) for _ in range(4)]
    trees += [nd.tree_merge(parts, lambda *ps: merge_all(ps), s) for s in (2, 3, 5, 8)]
    for got in trees:
        np.testing.assert_array_equal(got.shift, want.shift)  # a maximum: exact in any order
        _close(got.weight, want.weight, rtol=1e-15)
        _close(got.value, want.value, rtol=1e-15)
        _close(got.finalize(), want.finalize(), rtol=1e-15)


def test_tree_merge_shape_is_fixed():
    shape = nd.tree_merge(list(range(7)), lambda *xs: tuple(xs), 3)
    assert shape == ((0, 1, 2), (3, 4, 5), 6)
    with pytest.raises(ValueError, match="at least one"):
        nd.tree_merge([], merge, 2)


# ------------------------------------------------------------------ failures


def _slow_problem():
    rng = np.random.default_rng(10)
    n = 6000
    k = rng.uniform(0, 10, n)
    v = np.sin(k) + 2.0
    return k, v


@pytest.mark.slow
def test_a_lost_worker_is_recomputed_and_the_result_is_unchanged(client):
    k, v = _slow_problem()
    dk, dv = da.from_array(k, chunks=200), da.from_array(v, chunks=200)  # 30 x 30 blocks: ~1000 tasks
    clean = nadaraya.pool(dk, dk, dv, bandwidth=0.05, backend="reference").compute()
    _close(clean, nadaraya.pool(k, k, v, bandwidth=0.05))
    # the same graph again, and one worker process killed (SIGKILL) once results start to arrive
    pids = client.run(os.getpid)
    victim = sorted(pids.values())[0]
    fut = client.compute(nadaraya.pool(dk, dk, dv, bandwidth=0.05, backend="reference"))
    state = {}

    def kill() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
            ts.state == "memory" for ts in client.cluster.scheduler.tasks.values()
        ):
            time.sleep(0.05)
        time.sleep(0.3)
        state["done_before_kill"] = fut.done()
        os.kill(victim, signal.SIGKILL)

    timer = threading.Thread(target=kill)
    timer.start()
    got = fut.result(timeout=120)
    timer.join()
    assert state["done_before_kill"] is False, "the worker was killed after the computation had finished"
    assert victim not in client.run(os.getpid).values()
    assert np.array_equal(got, clean)  # recomputed tasks give the same bits


def test_a_failing_task_raises_and_is_never_skipped(client):
    q, k, v, _ = _problem(11, d=1)
    dk = da.from_array(k, chunks=(50, 1))

    def fail_third(block, block_info=None):
        if block_info[0]["chunk-location"][0] == 2:
            raise RuntimeError("shard 2 is unreadable")
        return block

    broken = dk.map_blocks(fail_third, dtype=dk.dtype)
    with pytest.raises(RuntimeError, match="shard 2 is unreadable"):
        nadaraya.pool(q, broken, v, bandwidth=0.3).compute()
    bad = k.copy()
    bad[123, 0] = np.nan
    with pytest.raises(ValueError, match="keys contains NaN"):
        nadaraya.pool(q, da.from_array(bad, chunks=(50, 1)), v, bandwidth=0.3).compute()


def test_bad_input_names_the_argument(client):
    k = da.ones((10, 2), chunks=(5, 2))
    with pytest.raises(ValueError, match="values has 9 rows, but keys has 10"):
        nadaraya.pool(k, k, np.ones(9))
    with pytest.raises(ValueError, match="queries has 3 features"):
        nadaraya.pool(da.ones((4, 3)), k, np.ones(10))
    with pytest.raises(ValueError, match="keys must be a 1-D or 2-D"):
        nadaraya.pool(k, da.ones((10, 2, 2)), np.ones(10))
    with pytest.raises(ValueError, match="bandwidth must be positive"):
        nadaraya.pool(k, k, np.ones(10), bandwidth=[1.0, -1.0])
    with pytest.raises(ValueError, match="sample_weight must have shape"):
        nadaraya.pool(k, k, np.ones(10), sample_weight=da.ones(3))
    with pytest.raises(ValueError, match="split_every"), nd.options(split_every=1):
        pass
    with pytest.raises(ValueError, match="engine='dask'"), nd.options(engine="dask"):
        pass


# ------------------------------------------------------------------ bandwidths and the estimator


@pytest.mark.parametrize("weighted", [False, True])
def test_rule_of_thumb_on_dask_equals_numpy(client, weighted):
    from nadaraya.bandwidth import rule_of_thumb

    rng = np.random.default_rng(12)
    x = np.column_stack([rng.normal(size=3001), rng.exponential(size=3001), rng.integers(0, 5, 3001)])
    sw = rng.integers(0, 4, size=3001).astype(float) if weighted else None
    dx = da.from_array(x, chunks=(700, 3))
    dsw = None if sw is None else da.from_array(sw, chunks=700)
    for method, kernel in (("scott", "gaussian"), ("silverman", "epanechnikov")):
        got = drules.rule_of_thumb(dx, method, kernel=kernel, sample_weight=dsw)
        np.testing.assert_allclose(got, rule_of_thumb(x, method, kernel=kernel, sample_weight=sw), rtol=1e-12)


def test_exact_quartiles_after_several_narrowing_passes(client):
    rng = np.random.default_rng(13)
    x = np.round(rng.normal(size=(5000, 2)), 2)  # many ties
    w = rng.integers(0, 3, 5000).astype(float)
    got = drules._weighted_quantiles(da.from_array(x, chunks=(900, 2)), da.from_array(w, chunks=900),
                                 (0.25, 0.75), float(w.sum()), (x.min(axis=0), x.max(axis=0)),
                                 limit=20, bins=8)
    want = [np.quantile(x, qq, axis=0, weights=w, method="inverted_cdf") for qq in (0.25, 0.75)]
    np.testing.assert_array_equal(got, want)


def test_estimator_on_dask_is_lazy_and_matches_numpy(client):
    q, k, v, sw = _problem(14, n=500, m=123)
    dX, dy = da.from_array(k, chunks=(120, 2)), da.from_array(v, chunks=(120, 2))
    model = nadaraya.NadarayaWatson(bandwidth="scott").fit(dX, dy, sample_weight=da.from_array(sw, 120))
    assert isinstance(model.X_fit_, da.Array) and model.backend_ == "dask"
    plain = nadaraya.NadarayaWatson(bandwidth="scott").fit(k, v, sample_weight=sw)
    np.testing.assert_allclose(model.bandwidth_, plain.bandwidth_, rtol=1e-12)
    pred = model.predict(da.from_array(q, chunks=(50, 2)))
    assert isinstance(pred, da.Array)
    _close(pred.compute(), plain.predict(q))
    # a NumPy model predicting Dask queries streams a Dask array too
    _close(plain.predict(da.from_array(q, chunks=(50, 2))).compute(), plain.predict(q))
    with pytest.raises(ValueError, match="fitted with 2 features"):
        model.predict(np.ones((3, 5)))


def test_cross_validated_bandwidth_on_dask_data(client):
    rng = np.random.default_rng(15)
    k = rng.uniform(0, 5, size=(300, 1))
    v = 3.0 + np.sin(2 * k) + rng.normal(0, 0.2, size=(300, 1))
    model = nadaraya.NadarayaWatson(bandwidth="cv").fit(da.from_array(k, chunks=(70, 1)),
                                                       da.from_array(v[:, 0], chunks=70))
    plain = nadaraya.NadarayaWatson(bandwidth="cv").fit(k, v[:, 0])
    assert 0.01 < plain.bandwidth_[0] < 1.0
    np.testing.assert_allclose(model.bandwidth_, plain.bandwidth_, rtol=1e-12)
    assert isinstance(model.X_fit_, da.Array)
    # the criterion it minimised is the one the Dask leave-one-out sums give
    loo = nadaraya.loo_pool(model.X_fit_, model.y_fit_, bandwidth=model.bandwidth_).compute()
    _close(loo, nadaraya.loo_pool(k, v[:, 0], bandwidth=plain.bandwidth_))
