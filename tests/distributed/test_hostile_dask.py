"""Hostile input on the Dask path (issue 12, item 8): every bad argument refused as on one
machine, naming it; empty chunks, far queries and extreme weights give the NumPy answer.

Runs on the synchronous scheduler (no cluster): what is tested here is the graph and its
tasks, which behave the same on any scheduler.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import nadaraya

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
nd = pytest.importorskip("nadaraya.distributed.backend")
dpool = pytest.importorskip("nadaraya.distributed.pool")  # the lazy pool moved out of the backend
drules = pytest.importorskip("nadaraya.distributed.rules")  # the Dask rules of thumb too

RTOL = 1e-12


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        return fn(*args, **kwargs)


def _close(got, want, rtol=RTOL):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)


def _data(seed=0, n=23, m=11, d=2):
    rng = np.random.default_rng(seed)
    k = rng.uniform(-1, 1, size=(n, d))
    v = rng.uniform(1, 3, size=n)  # away from zero: relative errors measure the sums
    q = rng.uniform(-1.2, 1.2, size=(m, d))
    sw = rng.uniform(0.5, 2.0, size=n)
    return q, k, v, sw


def _with_empty_chunk(a, at):
    """A Dask array of ``a`` whose row chunks include an empty one after row ``at``."""
    rows = (at, 0, a.shape[0] - at)
    return da.from_array(a, chunks=(rows, *a.shape[1:]))


# ------------------------------------------------------------------ 1. weights zero everywhere

ZERO = "sample_weight is zero everywhere"


@pytest.mark.parametrize("loo", [False, True])
def test_dask_weights_zero_everywhere_raise_when_computed(loo):
    q, k, v, _ = _data()
    dk, dv = da.from_array(k, chunks=(7, 2)), da.from_array(v, chunks=7)
    sw = da.zeros(k.shape[0], chunks=5)
    with pytest.raises(ValueError, match=ZERO):  # the NumPy path, for the same message
        nadaraya.pool(q, k, v, sample_weight=np.zeros(k.shape[0]))
    out = nadaraya.loo_pool(dk, dv, sample_weight=sw) if loo else nadaraya.pool(q, dk, dv, sample_weight=sw)
    with pytest.raises(ValueError, match=ZERO):
        out.compute()


def test_numpy_weights_zero_everywhere_raise_at_the_call():
    q, k, v, _ = _data()
    dk = da.from_array(k, chunks=(7, 2))
    with pytest.raises(ValueError, match=ZERO):
        nadaraya.pool(q, dk, v, sample_weight=np.zeros(k.shape[0]))  # no compute needed
    with pytest.raises(ValueError, match=ZERO):
        nadaraya.loo_pool(dk, v, sample_weight=[0.0] * k.shape[0])


def test_estimator_with_dask_weights_zero_everywhere():
    _, k, v, _ = _data()
    dk, dv, sw = da.from_array(k, chunks=(7, 2)), da.from_array(v, chunks=7), da.zeros(len(v), chunks=7)
    with pytest.raises(ValueError, match=ZERO):  # a rule of thumb computes the weights' sum at fit
        nadaraya.NadarayaWatson(bandwidth="scott").fit(dk, dv, sample_weight=sw)
    model = nadaraya.NadarayaWatson(bandwidth=0.5).fit(dk, dv, sample_weight=sw)
    with pytest.raises(ValueError, match=ZERO):
        model.predict(dk).compute()


def test_some_positive_weight_is_enough():
    q, k, v, _ = _data()
    sw = np.zeros(len(v))
    sw[17] = 3.0  # in the third chunk only: the other chunks' partials are empty
    got = nadaraya.pool(q, da.from_array(k, chunks=(7, 2)), v, sample_weight=da.from_array(sw, chunks=7))
    _close(got.compute(), np.full(len(q), v[17]))


# ------------------------------------------------------------------ 2. empty chunks


@pytest.mark.parametrize("where", ["keys", "values", "queries", "sample_weight", "all"])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_empty_chunks_anywhere_give_the_numpy_result(where, kernel):
    q, k, v, sw = _data(1)
    args = {"queries": q, "keys": k, "values": v, "sample_weight": sw}
    for name in args if where == "all" else [where]:
        args[name] = _with_empty_chunk(args[name], at={"queries": 4}.get(name, 9))
    got = nadaraya.pool(args["queries"], args["keys"], args["values"], kernel=kernel, bandwidth=0.6,
                        sample_weight=args["sample_weight"])
    want = _quiet(nadaraya.pool, q, k, v, kernel=kernel, bandwidth=0.6, sample_weight=sw)
    _close(_quiet(got.compute), want)


@pytest.mark.parametrize("empty", ["nan", "nearest", "mean"])
@pytest.mark.parametrize("loo", [False, True])
def test_empty_chunks_with_every_empty_policy(empty, loo):
    q, k, v, sw = _data(2)
    dk, dv, dsw = _with_empty_chunk(k, 8), _with_empty_chunk(v, 8), _with_empty_chunk(sw, 8)
    kw = {"kernel": "epanechnikov", "bandwidth": 0.15, "empty": empty}
    if loo:
        got = _quiet(nadaraya.loo_pool, dk, dv, sample_weight=dsw, **kw)
        want = _quiet(nadaraya.loo_pool, k, v, sample_weight=sw, **kw)
    else:
        got = _quiet(nadaraya.pool, _with_empty_chunk(q, 3), dk, dv, sample_weight=dsw, **kw)
        want = _quiet(nadaraya.pool, q, k, v, sample_weight=sw, **kw)
    _close(_quiet(got.compute), want)


@pytest.mark.parametrize("bandwidth", ["scott", "silverman", "cv"])
def test_estimator_fits_dask_data_with_an_empty_chunk(bandwidth):
    _, k, v, sw = _data(3, n=40)
    dX, dy, dsw = _with_empty_chunk(k, 15), _with_empty_chunk(v, 15), _with_empty_chunk(sw, 15)
    model = nadaraya.NadarayaWatson(bandwidth=bandwidth).fit(dX, dy, sample_weight=dsw)
    plain = nadaraya.NadarayaWatson(bandwidth=bandwidth).fit(k, v, sample_weight=sw)
    np.testing.assert_allclose(model.bandwidth_, plain.bandwidth_, rtol=1e-12)
    _close(model.predict(_with_empty_chunk(k, 5)).compute(), plain.predict(k))


def test_filtered_dask_array_with_empty_chunks():
    # boolean selection leaves a chunk empty; the caller computes the chunk sizes
    x = da.from_array(np.arange(12.0), chunks=4)
    kept = x[(x < 3) | (x > 7)].compute_chunk_sizes()
    assert 0 in kept.chunks[0]
    xs = kept.compute()
    _close(nadaraya.pool(kept, kept, 2 * kept, bandwidth=1.5).compute(),
           nadaraya.pool(xs, xs, 2 * xs, bandwidth=1.5))
    np.testing.assert_allclose(drules.rule_of_thumb(kept), nadaraya.bandwidth.rule_of_thumb(xs), rtol=1e-12)


# ------------------------------------------------------------------ 3. complex, dates, durations

NOT_REAL = {
    "complex": np.array([1.0, 2.0, 3.0, 4.0]) + 1j,
    "datetime": np.arange(4).astype("datetime64[s]"),
    "timedelta": np.arange(4).astype("timedelta64[s]"),
}


@pytest.mark.parametrize("kind", sorted(NOT_REAL))
@pytest.mark.parametrize("name", ["keys", "values", "queries", "sample_weight"])
def test_dask_input_that_is_not_real_is_refused_naming_it(kind, name):
    args = {"queries": np.arange(4.0), "keys": np.arange(4.0), "values": np.arange(4.0) + 1,
            "sample_weight": np.ones(4)}
    bad = NOT_REAL[kind]
    with pytest.raises(ValueError) as plain:  # what the NumPy path says
        nadaraya.pool(**{**args, name: bad})
    args[name] = da.from_array(bad, chunks=2)
    with pytest.raises(ValueError) as lazy:  # refused at the call: the dtype is known
        nadaraya.pool(**{k: v for k, v in args.items()})
    message = str(lazy.value)
    assert type(lazy.value) is type(plain.value)
    assert message.startswith(f"{name} must be real numbers; got")
    assert str(plain.value).startswith(f"{name} must be real numbers; got")
    assert str(bad.dtype) in message and "allowed" in message.lower()


def test_object_dask_array_holding_complex_is_refused_when_computed():
    k = da.from_array(np.array([0.0, 1.0, 2.0 + 1j, 3.0], dtype=object), chunks=2)
    out = nadaraya.pool(np.arange(4.0), k, np.arange(4.0))
    with pytest.raises(ValueError, match="keys must be real numbers"):
        out.compute()


def test_text_dask_array_is_refused_naming_it():
    with pytest.raises(ValueError, match=re.escape("queries must be real numbers; got dtype <U1")):
        nadaraya.pool(da.from_array(np.array(list("abcd")), chunks=2), np.arange(4.0), np.arange(4.0))


# ------------------------------------------------------------------ 4. same errors as NumPy


def _errors(plain_call, dask_call):
    with pytest.raises((ValueError, TypeError)) as plain:
        plain_call()
    with pytest.raises((ValueError, TypeError)) as lazy:
        out = dask_call()
        out.compute()
    return plain.value, lazy.value


def _shape(message):
    """The part of a message before its details: "keys contains NaN or inf", ..."""
    return re.split(r" \(|; got", message)[0]


def _bad(name, value, row=9):
    q, k, v, sw = _data(4)
    args = {"queries": q, "keys": k, "values": v, "sample_weight": sw}
    a = args[name].copy()
    if a.ndim == 2:
        a[row, 1] = value
    else:
        a[row] = value
    args[name] = a
    return args


@pytest.mark.parametrize(
    ("name", "value"),
    [("keys", np.nan), ("keys", -np.inf), ("queries", np.nan), ("values", np.inf), ("values", np.nan),
     ("sample_weight", np.nan), ("sample_weight", np.inf), ("sample_weight", -1.0)],
)
def test_bad_values_raise_as_numpy_does_naming_the_argument_and_row(name, value):
    args = _bad(name, value)
    lazy = {k: da.from_array(a, chunks=(7, *a.shape[1:])) for k, a in args.items()}
    plain, got = _errors(lambda: nadaraya.pool(**args, bandwidth=0.5),
                         lambda: nadaraya.pool(**lazy, bandwidth=0.5))
    assert type(got) is type(plain)
    assert _shape(str(got)) == _shape(str(plain))
    assert str(got).startswith(name)
    assert "row 9" in str(got)  # the row in the whole array, not in its chunk (rows 7 to 13)


@pytest.mark.parametrize(("name", "value"), [("keys", np.nan), ("values", np.inf), ("sample_weight", -2.0)])
def test_bad_numpy_arguments_beside_dask_keys_raise_at_the_call_as_numpy_does(name, value):
    args = _bad(name, value)
    plain = args.copy()
    if name != "keys":
        args["keys"] = da.from_array(args["keys"], chunks=(7, 2))
    else:
        args["queries"] = da.from_array(args["queries"], chunks=(7, 2))
    with pytest.raises(ValueError) as want:
        nadaraya.pool(**plain)
    with pytest.raises(ValueError) as got:  # NumPy arguments are checked at once, by the same code
        nadaraya.pool(**args)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"values": np.ones(22)}, "values has 22 rows, but keys has 23; they must match"),
        ({"sample_weight": np.ones(24)}, "sample_weight must have shape (23,); got shape (24,)"),
        ({"queries": np.ones((3, 3))}, "queries has 3 features, but the keys have 2"),
    ],
)
def test_mismatched_lengths_raise_as_numpy_does(change, message):
    q, k, v, sw = _data()
    args = {"queries": q, "keys": k, "values": v, "sample_weight": sw, **change}
    with pytest.raises(ValueError, match=re.escape(message)):
        nadaraya.pool(**args)
    lazy = {name: da.from_array(a, chunks=(5, *np.shape(a)[1:])) for name, a in args.items()}
    with pytest.raises(ValueError, match=re.escape(message)):
        nadaraya.pool(**lazy)


def test_unknown_chunk_sizes_are_refused_naming_the_argument():
    x = da.from_array(np.arange(10.0), chunks=5)
    values = x[x > 2]  # unknown chunk sizes
    with pytest.raises(ValueError, match="values has unknown chunk sizes"):
        nadaraya.pool(x, x, values)


# ------------------------------------------------------------------ 5. far queries


def _reference(*args, **kwargs):
    want = _quiet(nadaraya.pool, *args, backend="reference", **kwargs)
    if np.isnan(want).any():
        pytest.xfail("the NumPy reference still returns NaN for far queries (issue 12 item 4, "
                     "fixed in nadaraya.pooling by another change)")
    return want


@pytest.mark.parametrize(
    ("query", "bandwidth", "nearest"),
    # keys 0 and 1 with values 1 and 2; halfway both keys are equally near
    [(1e200, 1.0, 2.0), (-1e300, 1.0, 1.0), (0.3, 1e-160, 1.0), (0.7, 1e-160, 2.0), (0.5, 1e-160, 1.5)],
)
@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "logistic"])
def test_a_query_far_from_every_shard_gets_the_limit(query, bandwidth, nearest, kernel):
    keys, values = np.array([0.0, 1.0]), np.array([1.0, 2.0])
    got = nadaraya.pool(da.from_array(np.array([query])), da.from_array(keys, chunks=1),
                        da.from_array(values, chunks=1), kernel=kernel, bandwidth=bandwidth).compute()
    want = _reference([query], keys, values, kernel=kernel, bandwidth=bandwidth)
    assert np.isfinite(got).all()
    if kernel == "gaussian":  # its weights tend to one-hot at the nearest key (the Laplacian's do not)
        assert got[0] == nearest
    _close(got, want)


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "logistic"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_far_queries_merge_exactly_across_shards(kernel, dtype):
    rng = np.random.default_rng(5)
    k = rng.uniform(-1, 1, size=(40, 2))
    v = rng.uniform(1, 3, size=(40, 2))
    sw = rng.uniform(0.5, 2, size=40)
    # far queries (some overflowing, some merely far) and ordinary ones, in one chunk
    q = np.vstack([rng.uniform(-1, 1, size=(4, 2)) * [[1e3], [1e5], [1e17], [3e19]],
                   rng.uniform(-1, 1, size=(3, 2))])
    k, v, sw, q = (a.astype(dtype) for a in (k, v, sw, q))
    h = np.array([0.05, 0.2])
    got = dpool.pool(da.from_array(q, chunks=(7, 2)), da.from_array(k, chunks=(6, 2)),
                        da.from_array(v, chunks=(6, 2)), kernel=kernel, bandwidth=h,
                        sample_weight=da.from_array(sw, chunks=6), split_every=3).compute()
    want = _reference(q, k, v, kernel=kernel, bandwidth=h, sample_weight=sw)
    assert got.dtype == dtype and np.isfinite(got).all()
    _close(got, want, rtol=RTOL if dtype == np.float64 else 1e-5)


def test_far_leave_one_out_matches_numpy():
    # two clusters 1e200 apart: each point's other keys are far from it only across the gap
    k = np.concatenate([np.linspace(0, 1, 5), 1e200 + np.linspace(0, 4e184, 5)])
    v = np.arange(10.0) + 1.0
    got = nadaraya.loo_pool(da.from_array(k, chunks=2), da.from_array(v, chunks=2), bandwidth=1e-3)
    want = _quiet(nadaraya.loo_pool, k, v, bandwidth=1e-3)
    if np.isnan(want).any():
        pytest.xfail("the NumPy path still returns NaN for far queries (issue 12 item 4)")
    _close(got.compute(), want)


# ------------------------------------------------------------------ 6. hostile but valid


def _agree(q, k, v, chunks, **kw):
    dq = da.from_array(q, chunks=(chunks, *q.shape[1:]))
    dk = da.from_array(k, chunks=(chunks, *k.shape[1:]))
    dv = da.from_array(v, chunks=(chunks, *v.shape[1:]))
    sw = kw.pop("sample_weight", None)
    dsw = None if sw is None else da.from_array(sw, chunks=chunks)
    split_every = kw.pop("split_every", None)
    got = _quiet(dpool.pool, dq, dk, dv, sample_weight=dsw, split_every=split_every, **kw).compute()
    _close(got, _quiet(nadaraya.pool, q, k, v, sample_weight=sw, backend="reference", **kw))
    loo = _quiet(dpool.pool, None, dk, dv, sample_weight=dsw, split_every=split_every, **kw).compute()
    _close(loo, _quiet(nadaraya.loo_pool, k, v, sample_weight=sw, backend="reference", **kw))


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "laplacian", "tricube"])
def test_size_one_chunks(kernel):
    q, k, v, sw = _data(6, n=9, m=5)
    _agree(q, k, v, 1, kernel=kernel, bandwidth=0.7, sample_weight=sw, split_every=2)


def test_one_key():
    q = np.array([[-3.0], [0.0], [2.0]])
    got = nadaraya.pool(da.from_array(q, chunks=(1, 1)), da.from_array(np.array([[0.5]])),
                        da.from_array(np.array([4.0])), bandwidth=0.1).compute()
    _close(got, nadaraya.pool(q, [[0.5]], [4.0], bandwidth=0.1, backend="reference"))
    np.testing.assert_array_equal(got, [4.0, 4.0, 4.0])


@pytest.mark.parametrize("kernel", ["gaussian", "boxcar"])
def test_duplicate_keys(kernel):
    rng = np.random.default_rng(7)
    k = np.repeat(rng.uniform(0, 1, size=(6, 1)), 4, axis=0)  # every key four times, across chunks
    v = rng.uniform(1, 3, size=24)
    _agree(k[::5] + 0.01, k, v, 5, kernel=kernel, bandwidth=0.2, sample_weight=rng.uniform(0.1, 1, 24))


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_sample_weights_from_1e_minus_300_to_1e300(kernel):
    rng = np.random.default_rng(8)
    k = rng.uniform(0, 1, size=(30, 1))
    v = rng.uniform(1, 3, size=30)
    sw = 10.0 ** rng.uniform(-300, 300, size=30)
    sw[[0, 1]] = 1e-300, 1e300
    _agree(k[::3] + 0.005, k, v, 7, kernel=kernel, bandwidth=0.4, sample_weight=sw)


def _exact_far_limit(q, keys, values, h, exclude=None):
    """The Gaussian's limit far away, written plainly: the mean value of the keys nearest to
    ``q`` in exact rational arithmetic (other keys' weights vanish beside theirs)."""
    from fractions import Fraction

    dist = [sum(((Fraction(float(a)) - Fraction(float(b))) / Fraction(float(h))) ** 2 for a, b in zip(q, k))
            for k in keys]
    if exclude is not None:
        dist[exclude] = None
    best = min(x for x in dist if x is not None)
    return float(np.mean([v for v, x in zip(values, dist) if x == best]))


def test_far_query_where_floats_cannot_tell_the_keys_apart():
    # (q - k) / h overflows, and in coordinates scaled to fit every key is at the same distance
    rng = np.random.default_rng(9)
    keys, values = rng.uniform(-1, 1, size=(25, 1)), rng.uniform(1, 3, size=25)
    q, h = np.array([[-8.8e299]]), 5e-161
    got = dpool.pool(da.from_array(q), da.from_array(keys, chunks=(7, 1)), da.from_array(values, chunks=7),
                  bandwidth=h, split_every=2).compute()
    np.testing.assert_array_equal(got, [_exact_far_limit(q[0], keys, values, h)])


def test_far_leave_one_out_beside_the_empty_diagonal_shard():
    # one key per chunk: each point's own chunk holds nothing else; its far partials from the
    # other chunks must not be lost when merged with that empty one
    k = np.array([[0.3109, -0.0373], [0.4949, -0.9873], [0.2638, 0.5590]])
    v = np.array([2.7, 2.1, 2.0])
    h = 1.1e-160
    got = dpool.pool(None, da.from_array(k, chunks=(1, 2)), da.from_array(v, chunks=1), bandwidth=h).compute()
    want = [_exact_far_limit(k[i], k, v, h, exclude=i) for i in range(3)]
    np.testing.assert_array_equal(got, want)
