"""Local polynomial fits and categorical regressors on Dask (issue 14): the distributed path gives the
in-memory ``nadaraya.pool`` / ``loo_pool`` results, and its partials carry the reference's moments.

Tolerances. Predictions are compared at ``rtol = 1e-12`` with ``atol = (1e-12 + 16 eps kappa) max |v|``
per query: a local polynomial fit is a linear combination of the values with weights of either sign,
so its rounding scales with the size of the values, not with the estimate (which may cancel towards
zero); and the solve amplifies the last-bit differences of two merge orders by the condition number
``kappa`` of the query's equilibrated local system (computed here from the in-memory reference; about
1 to 1e3 inside the data, up to 1e7 at the edge of a compact kernel's support in degree 2). Moment
sums are compared as in ``test_local_backends``: each sum divided by the weight sum (so the split
between shift and weight does not matter), per entry at 1e-12 of the largest entry of that sum
(its natural size, ``sum w |u|^j / sum w``), and the log of the weight sum at 1e-12.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import nadaraya
from nadaraya import backends
from nadaraya.backends import reference
from nadaraya.kernels import get
from nadaraya.local import fit as _fit
from nadaraya.local import job as _job
from nadaraya.local import solve as _local
from nadaraya.local.job import SingularFitWarning

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
nd = pytest.importorskip("nadaraya.distributed.backend")
dfar = pytest.importorskip("nadaraya.distributed.far")

RTOL = 1e-12


@pytest.fixture(scope="module")
def client():
    """Two worker processes of one thread each (so every task and its partials are pickled)."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    ) as cluster, distributed.Client(cluster) as c:
        yield c


def _data(seed, n=310, m=70, d=2, categorical=""):
    """Keys, two value columns away from zero, queries partly outside the data, weights with zeros;
    the last ``len(categorical)`` columns hold categories (queries also see an unseen one)."""
    rng = np.random.default_rng(seed)
    dc = d - len(categorical)
    X = rng.uniform(-1, 1, size=(n, d))
    Q = rng.uniform(-1.2, 1.2, size=(m, d))
    for j in range(dc, d):
        X[:, j] = rng.integers(0, 3, n)
        Q[:, j] = rng.integers(0, 4, m)
    V = np.column_stack([5 + np.sin(3 * X[:, 0]) + X[:, -1], -8 + X.sum(axis=1) ** 2])
    sw = rng.uniform(0.5, 2.0, size=n)
    sw[rng.random(n) < 0.1] = 0.0
    return Q, X, V, sw


def _single(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        warnings.simplefilter("ignore", SingularFitWarning)
        return fn(*args, **kwargs)


def _conditions(queries, keys, values, *, kernel="gaussian", bandwidth, sample_weight=None, degree=0,
                var_types=None, categorical_kernel="classic", empty="nan"):
    """Per query, the condition number of the equilibrated local system the in-memory fit solved
    (of the degree it used; 1 for a degree-0 answer)."""
    job = _job.prepare(queries, keys, values, kernel=kernel, bandwidth=bandwidth, sample_weight=sample_weight,
                       degree=degree, var_types=var_types, categorical_kernel=categorical_kernel)
    exclude = np.arange(job.call.keys.shape[0]) if queries is None else None
    parts = _fit.partials(job, exclude, "reference")
    _, fit = _single(_fit.fitted, job, parts, "nan", exclude)
    kappa = np.ones(parts.weight.shape[0])
    rows = np.nonzero(fit.degree >= 1)[0]
    if rows.size:
        M, _ = _local._systems(parts[rows], job.degree, job.call.bandwidth)
        for i, r in enumerate(rows):
            size = len(_local.monomials(int(fit.degree[r]), job.cont.size))
            A = M[i, :size, :size]
            scale = 1.0 / np.sqrt(np.diag(A))
            kappa[r] = np.linalg.cond(A * scale[:, None] * scale[None, :])
    return kappa


def _close(got, want, values, kappa=None):
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    kappa = np.ones(want.shape[0]) if kappa is None else kappa
    atol = (RTOL + 16 * np.finfo(np.float64).eps * kappa) * np.abs(values).max()
    atol = atol.reshape((-1,) + (1,) * (want.ndim - 1))
    ok = ~np.isnan(want)
    bad = ok & ~(np.abs(got - want) <= RTOL * np.abs(want) + atol)
    assert not bad.any(), (np.nonzero(bad), got[bad], want[bad], np.broadcast_to(atol, want.shape)[bad])


def _check(got, fn, *args, **kwargs):
    """``got`` (a lazy Dask result) against the in-memory ``fn(*args, **kwargs)``."""
    want = _single(fn, *args, **kwargs)
    queries = args[0] if fn is nadaraya.pool else None
    rest = args[1:] if fn is nadaraya.pool else args
    _close(_single(got.compute), want, args[-1], _conditions(queries, *rest, **kwargs))
    return want


def _normalised(parts):
    """What the partials mean, independent of the shift: log sum w, and every sum over sum w."""
    ok = parts.weight > 0
    w = np.where(ok, parts.weight, 1.0).astype(np.float64)
    lse = np.where(ok, parts.shift.astype(np.float64) + np.log(w), -np.inf)
    per = [a.astype(np.float64) / w.reshape((-1,) + (1,) * (a.ndim - 1))
           for a in (parts.value, *parts.moments)]
    return ok, lse, per


def _same_partials(got, want, lse_offset=0.0):
    ok_g, lse_g, sums_g = _normalised(got)
    ok_w, lse_w, sums_w = _normalised(want)
    np.testing.assert_array_equal(ok_g, ok_w)
    np.testing.assert_allclose((lse_g + lse_offset)[ok_w], lse_w[ok_w], rtol=RTOL, atol=RTOL)
    assert len(sums_g) == len(sums_w)
    for a, b in zip(sums_g, sums_w):
        assert a.shape == b.shape
        scale = np.abs(b[ok_w]).max(initial=0.0) + 1e-300
        np.testing.assert_allclose(a[ok_w], b[ok_w], rtol=RTOL, atol=RTOL * scale)


# ------------------------------------------------------------------ continuous columns


@pytest.mark.cluster
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("degree", [1, 2])
def test_pool_and_loo_pool_equal_single_machine(client, kernel, d, degree):
    """Several key and query chunks (uneven), two outputs, sample weights with zeros; a compact
    kernel leaves some queries outside the data with an empty window (NaN both ways)."""
    Q, X, V, sw = _data(10 * d + degree, d=d)
    h = np.array([0.35, 0.5])[:d]
    args = dict(kernel=kernel, bandwidth=h, sample_weight=sw, degree=degree)
    dX, dV, dsw = da.from_array(X, chunks=(60, d)), da.from_array(V, chunks=(60, 2)), da.from_array(sw, 60)
    got = nadaraya.pool(da.from_array(Q, chunks=(17, d)), dX, dV, **{**args, "sample_weight": dsw})
    assert isinstance(got, da.Array) and got.chunks[0] == da.from_array(Q, chunks=(17, d)).chunks[0]
    _check(got, nadaraya.pool, Q, X, V, **args)
    _check(nadaraya.loo_pool(dX, dV, **{**args, "sample_weight": dsw}), nadaraya.loo_pool, X, V, **args)


@pytest.mark.cluster
@pytest.mark.parametrize("empty", ["nearest", "mean"])
@pytest.mark.parametrize("loo", [False, True])
def test_empty_windows_filled_as_on_one_machine(client, empty, loo):
    """Degree 1 with a compact kernel: isolated keys and far queries have empty windows, filled by
    the ``empty=`` policy; the other queries get their local fits."""
    Q, X, V, sw = _data(3, n=200, d=1)
    X[::9] += 5.0
    Q[::4] = 9.0
    args = dict(kernel="epanechnikov", bandwidth=0.1, sample_weight=sw, empty=empty, degree=1)
    dX, dV = da.from_array(X, chunks=(45, 1)), da.from_array(V, chunks=(45, 2))
    if loo:
        want = _check(nadaraya.loo_pool(dX, dV, **args), nadaraya.loo_pool, X, V, **args)
    else:
        want = _check(nadaraya.pool(da.from_array(Q, chunks=(30, 1)), dX, dV, **args), nadaraya.pool,
                      Q, X, V, **args)
    assert not np.isnan(want).any()


@pytest.mark.cluster
@pytest.mark.parametrize("degree", [1, 2])
def test_far_queries_equal_single_machine(client, degree):
    """Gaussian: a query far from every key (the Nadaraya-Watson far limit, as on one machine), one
    far from some key chunks only (their moments merge exactly with the near chunks'), and rows
    near the data."""
    Q, X, V, sw = _data(5, n=240, m=20, d=1)
    X = np.sort(X, axis=0)  # chunks by position: the last chunk (rows 200 to 239) is the rightmost
    # Q[1]: log weight -1020 at the last chunk's largest key, -1030 at a key of the chunk before
    # (far there, below FAR_LOG_WEIGHT = -1024), which still holds e^-10 of the weight
    top = X[:, 0].argmax()
    Q[0], Q[1], Q[2] = 40.0, X[top, 0] + 0.1 * 2040**0.5, -30.0
    X[199, 0] = X[top, 0] - 0.1 * (2060**0.5 - 2040**0.5)
    args = dict(kernel="gaussian", bandwidth=0.1, sample_weight=sw, degree=degree)
    got = nadaraya.pool(da.from_array(Q, chunks=(7, 1)), da.from_array(X, chunks=(50, 1)), V, **args)
    want = _check(got, nadaraya.pool, Q, X, V, **args)
    assert np.isfinite(want).all()


# ------------------------------------------------------------------ categorical columns


@pytest.mark.cluster
@pytest.mark.parametrize("var_types", ["cu", "co", "cuo"])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("degree", [0, 1, 2])
def test_mixed_data_equal_single_machine(client, var_types, kernel, degree):
    """Keys grouped by category tuple inside each task, the groups' factors merged exactly; a query
    category unseen in training; leave-one-out too; sample weights on Dask."""
    d = len(var_types)
    Q, X, V, sw = _data(7 + d + degree, d=d, categorical=var_types[1:])
    h = np.array([0.4, 0.3, 0.6])[:d]
    args = dict(kernel=kernel, bandwidth=h, sample_weight=sw, degree=degree, var_types=var_types)
    dX, dV, dsw = da.from_array(X, chunks=(70, d)), da.from_array(V, chunks=(70, 2)), da.from_array(sw, 70)
    got = nadaraya.pool(da.from_array(Q, chunks=(25, d)), dX, dV, **{**args, "sample_weight": dsw})
    _check(got, nadaraya.pool, Q, X, V, **args)
    _check(nadaraya.loo_pool(dX, dV, **{**args, "sample_weight": dsw}), nadaraya.loo_pool, X, V, **args)


@pytest.mark.cluster
@pytest.mark.parametrize("empty", ["nearest", "mean"])
@pytest.mark.parametrize("categorical_kernel", ["classic", "li-racine"])
def test_mixed_empty_windows_and_li_racine(client, empty, categorical_kernel):
    """A compact kernel on the continuous column with categories: ``"mean"`` keeps the categorical
    factors (per query), ``"nearest"`` the nearest key in the continuous column."""
    Q, X, V, _ = _data(11, n=150, m=40, d=2, categorical="u")
    X[::6, 0] += 4.0
    Q[::3, 0] = 7.0
    args = dict(kernel="epanechnikov", bandwidth=[0.15, 0.2], empty=empty, degree=1, var_types="cu",
                categorical_kernel=categorical_kernel)
    dX = da.from_array(X, chunks=(40, 2))
    _check(nadaraya.pool(da.from_array(Q, chunks=(15, 2)), dX, V, **args), nadaraya.pool, Q, X, V, **args)
    _check(nadaraya.loo_pool(dX, V, **args), nadaraya.loo_pool, X, V, **args)


def test_categorical_only_columns():
    """No continuous column: sums of sample weights per category group (degree ignored)."""
    rng = np.random.default_rng(2)
    X = rng.integers(0, 3, size=(90, 2)).astype(float)
    V = rng.normal(size=90) + 4
    Q = rng.integers(0, 4, size=(12, 2)).astype(float)
    args = dict(bandwidth=[0.2, 0.4], var_types="ou", degree=1)
    got = nadaraya.pool(da.from_array(Q, chunks=5), da.from_array(X, chunks=(25, 2)), V, **args)
    _close(got.compute(scheduler="sync"), nadaraya.pool(Q, X, V, **args), V)


@pytest.mark.cluster
def test_backend_dask_on_numpy_input_serves_local_and_mixed_fits(client):
    """``nadaraya.pool(..., backend="dask")`` on NumPy arrays: the in-memory local path with the
    Dask backend's moment partials (per category group) equals the reference backend's."""
    Q, X, V, sw = _data(1, d=2, categorical="u")
    args = dict(bandwidth=[0.4, 0.3], degree=1, var_types="cu", sample_weight=sw)
    with nd.options(chunks=50, split_every=2):
        got = _single(nadaraya.pool, Q, X, V, backend="dask", **args)
        loo = _single(nadaraya.loo_pool, X, V, backend="dask", **args)
    assert isinstance(got, np.ndarray)
    _close(got, _single(nadaraya.pool, Q, X, V, backend="reference", **args), V, _conditions(Q, X, V, **args))
    _close(loo, _single(nadaraya.loo_pool, X, V, backend="reference", **args), V,
           _conditions(None, X, V, **args))


def test_float32_stays_float32():
    """float32 Dask input gives a float32 result, close to the in-memory float32 fit (both round in
    float32: about kappa * 6e-8 relative, kappa ~ 10 here)."""
    Q, X, V, _ = _data(1, d=1)
    f = lambda a: a.astype(np.float32)  # noqa: E731
    got = nadaraya.pool(da.from_array(f(Q), chunks=(20, 1)), da.from_array(f(X), chunks=(60, 1)), f(V),
                        bandwidth=0.3, degree=1)
    assert got.dtype == np.float32
    out = _single(got.compute, scheduler="sync")
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, nadaraya.pool(f(Q), f(X), f(V), bandwidth=0.3, degree=1), rtol=1e-4)


def test_bad_local_arguments_are_refused_at_the_call():
    X = da.from_array(np.column_stack([np.linspace(0, 1, 20), np.arange(20) % 3]), chunks=(8, 2))
    y = np.arange(20.0)
    with pytest.raises(ValueError, match="degree must be an integer"):
        nadaraya.pool(X, X, y, bandwidth=[0.3, 0.2], degree=7)
    with pytest.raises(ValueError, match="var_types='cx'"):
        nadaraya.pool(X, X, y, bandwidth=[0.3, 0.2], var_types="cx")
    # three categories in training: an Aitchison-Aitken lambda lies in [0, 2/3]
    with pytest.raises(ValueError, match=r"bandwidth.*0\.9.*c = 3") as dask_err:
        nadaraya.loo_pool(X, y, bandwidth=[0.3, 0.9], var_types="cu")
    with pytest.raises(ValueError) as numpy_err:
        nadaraya.loo_pool(X.compute(), y, bandwidth=[0.3, 0.9], var_types="cu")
    assert str(dask_err.value) == str(numpy_err.value)
    with pytest.raises(ValueError, match="one entry per column"):
        nadaraya.pool(X, X, y, bandwidth=0.3, var_types="cu")


def test_singular_systems_warn_when_computed():
    """Degree 1 where a window holds one distinct key: degree 0 there, as on one machine, and a
    SingularFitWarning when the chunk is computed (threads: the warning reaches the caller)."""
    X = np.array([0.0, 0.0, 1.0, 1.1, 1.2, 1.3, 5.0])
    V = 2 * X + 1
    Q = np.array([0.0, 1.15, 5.0])
    args = dict(kernel="epanechnikov", bandwidth=0.3, degree=1)
    with pytest.warns(SingularFitWarning, match="2 of 3 queries in the chunk starting at row 0"):
        got = nadaraya.pool(Q, da.from_array(X, chunks=3), V, **args).compute(scheduler="sync")
    _close(got, _single(nadaraya.pool, Q, X, V, **args), V)


# ------------------------------------------------------------------ the partials carry moments


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("loo", [False, True])
def test_backend_dask_partials_carry_the_reference_moments(degree, loo):
    """``backends.compute("dask", ..., moments=r)`` on NumPy input: chunked, merged in a tree,
    every moment sum as the reference backend's (leave-one-out leaves the key out of them too)."""
    Q, X, V, sw = _data(21, n=130, m=45, d=2)
    kern, h = get("gaussian"), np.array([0.3, 0.45])
    queries, exclude = (X, np.arange(X.shape[0])) if loo else (Q, None)
    want = reference.partials(queries, X, V, kernel=kern, bandwidth=h, sample_weight=sw, exclude=exclude,
                              moments=degree)
    with nd.options(chunks=20, split_every=3):
        got = backends.compute("dask", queries, X, V, kernel=kern, bandwidth=h, sample_weight=sw,
                               exclude=exclude, moments=degree)
    assert [s.shape[1:] for s in got.moments] == reference.moment_shapes(degree, 2, 2)
    _same_partials(got, want)
    with nd.options(chunks=20):
        plain = backends.compute("dask", queries, X, V, kernel=kern, bandwidth=h, sample_weight=sw,
                                 exclude=exclude)
    assert plain.moments == ()


def test_backend_dask_moments_refuses_a_bad_degree():
    x = np.zeros((3, 1))
    with pytest.raises(ValueError, match="moments must be a non-negative int"):
        nd.partials(x, x, x, kernel=get("gaussian"), bandwidth=np.ones(1), moments=-1)


def test_empty_key_chunk_carries_zero_moments():
    q = np.zeros((4, 2))
    p = nd.block(q, np.zeros((0, 2)), np.zeros((0, 3)), None, None, kernel="gaussian",
                 bandwidth=np.ones(2), engine="reference", moments=2)
    assert [s.shape[1:] for s in p.moments] == reference.moment_shapes(2, 2, 3)
    assert all(not s.any() for s in p.moments) and np.isneginf(p.shift).all()


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("loo", [False, True])
def test_far_block_moments_equal_the_reference(degree, loo):
    """A chunk's far rows get partials relative to an anchor key: what they mean (the log weight
    sum once the anchor's absolute log weight is added back, every sum over the weight sum) is the
    reference backend's, moments included, for queries whose absolute log weights are still finite."""
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, size=(40, 2))
    V = np.column_stack([X[:, 0] + 3, X[:, 1] - 4])
    sw = rng.uniform(0.5, 2, size=40)
    h = np.array([0.1, 0.15])
    if loo:  # the first key, far from every other, is a far query once itself is left out
        X[0] = [6.0, 0.5]
        Q = X
    else:
        Q = np.array([[6.0, 0.5], [-4.0, 5.0], [0.5, 0.5]])
    exclude = np.arange(40) if loo else None
    parts, far = dfar.far_block(Q, X, V, sw, "diagonal" if loo else None, kernel="gaussian", bandwidth=h,
                                engine="reference", moments=degree)
    want = reference.partials(Q, X, V, kernel=get("gaussian"), bandwidth=h, sample_weight=sw,
                              exclude=exclude, moments=degree)
    assert far is not None and far.rows.sum() == (1 if loo else 2)
    offset = np.where(far.rows, far.anchor_log, 0.0)
    _same_partials(parts, want, lse_offset=offset)


def test_overflowed_far_rows_carry_their_nearest_keys_moments():
    """A bandwidth so small that every log weight overflows (the engine sees no weight at all): the
    far rows' partials are the nearest key's alone (every other key's relative weight underflows),
    so each moment over the weight is that key's ``u^(x)j`` and ``u^(x)j v`` with ``u = k - q``."""
    X = np.array([[0.0], [1e-5], [3e-5]])
    V = np.array([[1.0, -1.0], [2.0, 5.0], [4.0, 3.0]])
    Q = np.array([[1e-3], [-1e-3]])
    h = np.array([1e-160])
    plain = reference.partials(Q, X, V, kernel=get("gaussian"), bandwidth=h, moments=2)
    assert not (plain.weight > 0).any()  # what the engine gives: nothing
    parts, far = dfar.far_block(Q, X, V, None, None, kernel="gaussian", bandwidth=h, engine="reference",
                                moments=2)
    assert far is not None and far.rows.all()
    for row, key in ((0, 2), (1, 0)):
        u, v = X[key, 0] - Q[row, 0], V[key]
        want = [u, u**2, u**3, u**4, u * v, u**2 * v]
        got = [s[row].ravel() / parts.weight[row] for s in parts.moments]
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, np.ravel(b), rtol=RTOL)
