"""The fallbacks and options at the edges, each against a plain formula written here.

``empty="nearest"`` (distance in ``x / h``, per feature; zero-weight keys never nearest; ties
share by sample weight), the log-domain kernels' far-query limit, ``empty="mean"`` with sample
weights, :func:`nadaraya.attention_weights` and :func:`nadaraya.loo_pool` with each ``empty``
policy, on every backend that supports the case (Dask through Dask arrays on the synchronous
scheduler).
"""

from __future__ import annotations

import warnings
from importlib.util import find_spec

import numpy as np
import pytest

import nadaraya
from nadaraya import backends
from nadaraya.kernels import REGISTRY

BACKENDS = backends.available()
COMPACT = [k for k, v in REGISTRY.items() if v.compact]
LOG_DOMAIN = [k for k, v in REGISTRY.items() if v.log_domain and k != "constant"]
POLICIES = ("nan", "nearest", "mean", "raise")


# -- the plain formula ------------------------------------------------------------------------


def plain_pool(q, k, v, kernel, h, sw=None, empty="nan", loo=False):
    """Nadaraya-Watson with dense (m, n) weights and the ``empty`` policy spelled out.

    Log-domain kernels: log weights, each row shifted by its maximum (the limit far from every
    key). Empty windows: NaN; the sample-weighted mean of the values of the keys nearest in
    sum_j ((q_j - k_j) / h_j)^2 among those of positive weight (not the point itself for
    leave-one-out), ties included; or the sample-weighted mean of all values (but the point's).
    """
    q, k, v = (np.atleast_2d(np.asarray(a, float).T).T for a in (q, k, v))
    h = np.broadcast_to(np.asarray(h, float), (k.shape[1],))
    n = k.shape[0]
    sw = np.ones(n) if sw is None else np.asarray(sw, float)
    K = REGISTRY[kernel]
    u = (q[:, None, :] - k[None, :, :]) / h
    usable = np.broadcast_to(sw > 0, (q.shape[0], n)).copy()
    if loo:
        np.fill_diagonal(usable, False)
    if K.log_domain:
        with np.errstate(divide="ignore"):
            logw = K.log_profile(u).sum(axis=2) + np.log(sw)
        logw[~usable] = -np.inf
        top = logw.max(axis=1, keepdims=True)
        w = np.where(np.isfinite(top), np.exp(logw - top), 0.0)
    else:
        w = K.profile(u).prod(axis=2) * sw
        w[~usable] = 0.0
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (w @ v) / total[:, None]
    for i in np.nonzero(total == 0)[0]:
        if empty == "raise":
            raise AssertionError("the plain formula met an empty window with empty='raise'")
        if empty == "nan" or not usable[i].any():
            out[i] = np.nan
            continue
        if empty == "nearest":
            dist = np.where(usable[i], (u[i] ** 2).sum(axis=1), np.inf)
            pick = dist == dist.min()
        else:
            pick = usable[i]
        out[i] = sw[pick] @ v[pick] / sw[pick].sum()
    return out


def plain_weights(q, k, kernel, h, sw=None, empty="nan"):
    """The attention weights: one row per query, the weights of :func:`plain_pool` normalised;
    an empty row is NaN, shared by the nearest keys in proportion to their sample weights, or
    the normalised sample weights."""
    k2 = np.atleast_2d(np.asarray(k, float).T).T
    n = k2.shape[0]
    return plain_pool(q, k, np.eye(n), kernel, h, sw=sw, empty=empty)


# -- running a backend ---------------------------------------------------------------------------


def _supports(backend: str, kernel: str, d: int) -> bool:
    module = backends.get(backend)
    return not hasattr(module, "supports") or module.supports(REGISTRY[kernel], d)


def run(fn, backend, *arrays, sample_weight=None, **kw):
    """``fn(*arrays, backend=..., **kw)`` as a NumPy array; for "dask", on Dask arrays of two
    row chunks each, computed on the synchronous scheduler."""
    if backend in backends.WITHIN_TOL:  # they need a tol; these cases hold them to float64 rounding
        kw.setdefault("tol", 1e-10)
    if backend != "dask":
        return fn(*arrays, sample_weight=sample_weight, backend=backend, **kw)
    import dask
    import dask.array as da

    def lazy(a):
        a = np.asarray(a, float)
        return da.from_array(a, chunks=(max(1, -(-a.shape[0] // 2)), *a.shape[1:]))

    sw = None if sample_weight is None else lazy(sample_weight)
    with dask.config.set(scheduler="synchronous"):
        return np.asarray(fn(*map(lazy, arrays), sample_weight=sw, backend="auto", **kw).compute())


def run_quiet(fn, backend, *arrays, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        return run(fn, backend, *arrays, **kw)


def _cases(kernels, d=None):
    return [
        pytest.param(b, kern, id=f"{b}-{kern}")
        for b in BACKENDS
        for kern in kernels
        if d is None or _supports(b, kern, d)
    ]


# -- empty="nearest": x / h per feature, zero weights, ties ------------------------------------

# Two keys where the nearest in raw x and in x / h disagree: raw x says key 0 (distance^2 64.01
# against 121), x / h says key 1 (100.64 against 1.21); neither is inside the query's window.
TWO_KEYS = np.array([[0.0, 0.0], [3.0, 0.1]])
TWO_VALUES = np.array([1.0, 2.0])
TWO_H = np.array([10.0, 0.01])
TWO_QUERY = np.array([[-8.0, 0.1]])


@pytest.mark.parametrize("backend, kernel", _cases(COMPACT, d=2))
def test_nearest_is_measured_in_x_over_h(backend, kernel):
    want = plain_pool(TWO_QUERY, TWO_KEYS, TWO_VALUES, kernel, TWO_H, empty="nearest")[:, 0]
    assert want.tolist() == [2.0]
    got = run_quiet(nadaraya.pool, backend, TWO_QUERY, TWO_KEYS, TWO_VALUES, kernel=kernel, bandwidth=TWO_H,
                    empty="nearest")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend, kernel", _cases(LOG_DOMAIN, d=2))
def test_far_query_limit_is_measured_in_x_over_h(backend, kernel):
    """A query far from both keys: the Gaussian's weights tend to one-hot at the key nearest
    in x / h (here key 1, while raw x says key 0); the Laplacian's and logistic's to the
    plain log-domain weights (ratio exp(-9.7) at this distance)."""
    far = np.array([[-10_000.0, 1.0], [-1e6, 100.0]])
    want = plain_pool(far, TWO_KEYS, TWO_VALUES, kernel, TWO_H)[:, 0]
    if kernel == "gaussian":
        assert want.tolist() == [2.0, 2.0]
    got = run(nadaraya.pool, backend, far, TWO_KEYS, TWO_VALUES, kernel=kernel, bandwidth=TWO_H)
    # log weights of magnitude up to 5e9 carry rounding of a few 1e-7 absolute: 1e-6 relative
    # still tells a one-hot weight from a ratio of exp(-9.7) or the wrong key
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("backend, kernel", _cases(COMPACT, d=2))
def test_nearest_skips_zero_weight_keys(backend, kernel):
    keys = np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 0.0], [1.0, 0.3]])
    values = np.array([10.0, 20.0, 30.0, 40.0])
    sw = np.array([1.0, 0.0, 1.0, 0.0])  # keys 1 and 3 are nearest, but weigh nothing
    q = np.array([[1.9, 0.0], [1.0, 0.25], [3.1, 0.0]])
    h = np.array([0.5, 0.1])
    want = plain_pool(q, keys, values, kernel, h, sw=sw, empty="nearest")[:, 0]
    assert want.tolist() == [10.0, 10.0, 30.0]
    got = run_quiet(nadaraya.pool, backend, q, keys, values, kernel=kernel, bandwidth=h, sample_weight=sw,
                    empty="nearest")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend, kernel", _cases(LOG_DOMAIN, d=1))
def test_far_query_skips_zero_weight_keys(backend, kernel):
    keys = np.array([0.0, 1.0, 5.0])
    values = np.array([10.0, 20.0, 30.0])
    sw = np.array([1.0, 0.0, 1.0])
    q = np.array([-4000.0, 1.0e4])
    want = plain_pool(q, keys, values, kernel, 0.01, sw=sw)[:, 0]
    assert want.tolist() == [10.0, 30.0]
    got = run(nadaraya.pool, backend, q, keys, values, kernel=kernel, bandwidth=0.01, sample_weight=sw)
    np.testing.assert_allclose(got, want, rtol=1e-9)


@pytest.mark.parametrize("backend, kernel", _cases(COMPACT, d=1))
def test_nearest_ties_share_by_sample_weight(backend, kernel):
    """Keys at -1 and +1, a query at 0 outside both windows: both are nearest, and the
    prediction is their sample-weighted mean (the limit of the Gaussian far from both)."""
    keys = np.array([-1.0, 1.0, 9.0])
    values = np.array([1.0, 3.0, 100.0])
    sw = np.array([1.0, 3.0, 2.0])
    want = plain_pool([0.0], keys, values, kernel, 0.5, sw=sw, empty="nearest")[:, 0]
    assert want.tolist() == [2.5]
    got = run_quiet(nadaraya.pool, backend, [0.0], keys, values, kernel=kernel, bandwidth=0.5,
                    sample_weight=sw, empty="nearest")
    np.testing.assert_allclose(got, want, rtol=1e-15)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if _supports(b, "gaussian", 1)])
def test_gaussian_far_ties_share_by_sample_weight(backend):
    keys = np.array([-1000.0, 1000.0])
    got = run(nadaraya.pool, backend, [0.0], keys, [1.0, 3.0], kernel="gaussian", bandwidth=1.0,
              sample_weight=[1.0, 3.0])
    # log weights of -5e5 carry rounding of about 1e-10: the result to 1e-9, not 1e-12
    np.testing.assert_allclose(got, [2.5], rtol=1e-9)


# -- empty="mean" with sample weights ---------------------------------------------------------


@pytest.mark.parametrize("backend, kernel", _cases(COMPACT, d=2))
def test_mean_fallback_is_the_sample_weighted_mean(backend, kernel):
    rng = np.random.default_rng(3)
    keys = rng.uniform(0, 1, (30, 2))
    values = rng.normal(size=(30, 2))
    sw = rng.uniform(0.1, 3.0, 30)
    sw[:5] = 0.0
    q = np.vstack([[5.0, 5.0], [-3.0, 0.5], keys[7]])  # two empty windows, one not
    h = np.array([0.2, 0.3])
    want = plain_pool(q, keys, values, kernel, h, sw=sw, empty="mean")
    np.testing.assert_allclose(want[0], sw @ values / sw.sum(), rtol=1e-14)
    got = run_quiet(nadaraya.pool, backend, q, keys, values, kernel=kernel, bandwidth=h, sample_weight=sw,
                    empty="mean")
    np.testing.assert_allclose(got, want, rtol=1e-12)


# -- every policy: pool and loo_pool ------------------------------------------------------------


def _isolated():
    """2-D keys, h = (0.5, 0.2): a cluster (0, 1, 2); pairs with no other key in their windows
    (3 and 4, 1.75 apart in feature 1 / h; 5 and 6, 3 apart in feature 0 / h); a zero-weight
    key (7) as near to 5 as 6 is not, and alone itself."""
    keys = np.array([[0.0, 0.0], [0.1, 0.05], [0.2, 0.0], [3.0, 1.0], [3.0, 1.35], [6.0, 0.0],
                     [7.5, 0.0], [5.0, 0.0]])
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    sw = np.array([1.0, 2.0, 1.0, 1.0, 1.0, 2.0, 1.0, 0.0])
    return keys, values, sw, np.array([0.5, 0.2])


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("backend, kernel", _cases(["epanechnikov", "triangular", "boxcar"], d=2))
def test_loo_pool_with_each_policy(backend, kernel, policy):
    keys, values, sw, h = _isolated()
    empty_rows = plain_pool(keys, keys, values, kernel, h, sw=sw, empty="nan", loo=True)[:, 0]
    assert np.isnan(empty_rows).tolist() == [False] * 3 + [True] * 5
    if policy == "raise":
        with pytest.raises(ValueError, match="empty"):
            run(nadaraya.loo_pool, backend, keys, values, kernel=kernel, bandwidth=h, sample_weight=sw,
                empty=policy)
        return
    want = plain_pool(keys, keys, values, kernel, h, sw=sw, empty=policy, loo=True)[:, 0]
    if policy == "nearest":  # 3 and 4 each other's nearest; 5's is 6 (7 is nearer but weighs nothing)
        np.testing.assert_array_equal(want[3:7], [5.0, 4.0, 7.0, 6.0])
    if policy == "nan" and backend != "dask":  # Dask's lazy result does not warn (documented)
        with pytest.warns(nadaraya.EmptyWindowWarning):
            got = run(nadaraya.loo_pool, backend, keys, values, kernel=kernel, bandwidth=h, sample_weight=sw,
                      empty=policy)
    else:
        got = run_quiet(nadaraya.loo_pool, backend, keys, values, kernel=kernel, bandwidth=h,
                        sample_weight=sw, empty=policy)
    np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("backend, kernel", _cases(["epanechnikov", "tricube"], d=2))
def test_pool_with_each_policy(backend, kernel, policy):
    keys, values, sw, h = _isolated()
    q = np.vstack([keys + np.array([0.05, 0.01]), TWO_QUERY, [[1.5, 0.5], [5.0, 0.0], [20.0, -3.0]]])
    if policy == "raise":
        with pytest.raises(ValueError, match="empty"):
            run(nadaraya.pool, backend, q, keys, values, kernel=kernel, bandwidth=h, sample_weight=sw,
                empty=policy)
        return
    want = plain_pool(q, keys, values, kernel, h, sw=sw, empty=policy)[:, 0]
    assert np.isnan(plain_pool(q, keys, values, kernel, h, sw=sw)).sum() >= 4
    got = run_quiet(nadaraya.pool, backend, q, keys, values, kernel=kernel, bandwidth=h, sample_weight=sw,
                    empty=policy)
    np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


# -- attention_weights ---------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", sorted(REGISTRY))
def test_attention_weights_with_sample_weights(kernel):
    rng = np.random.default_rng(11)
    keys = rng.uniform(0, 2, (25, 2))
    q = rng.uniform(0, 2, (9, 2))
    sw = rng.uniform(0.2, 2.0, 25)
    sw[::6] = 0.0
    h = np.array([0.9, 1.3])
    got = nadaraya.attention_weights(q, keys, kernel=kernel, bandwidth=h, sample_weight=sw)
    np.testing.assert_allclose(got, plain_weights(q, keys, kernel, h, sw=sw), rtol=1e-12, atol=1e-15)
    assert (got[:, sw == 0] == 0).all()
    # and they are what pool uses
    values = rng.normal(size=25)
    np.testing.assert_allclose(got @ values, nadaraya.pool(q, keys, values, kernel=kernel, bandwidth=h,
                                                           sample_weight=sw), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("kernel", ["epanechnikov", "boxcar", "cosine"])
def test_attention_weights_with_each_policy_and_sample_weights(kernel, policy):
    keys, values, sw, h = _isolated()
    # far to the left, a tie (between keys 5 and 6, at 6.75) and a query nearest to the
    # zero-weight key 7, all with empty windows; one with neighbours
    q = np.array([[-8.0, 0.1], [6.75, 0.0], [5.1, 0.0], [0.1, 0.0]])
    if policy == "raise":
        with pytest.raises(ValueError, match="empty"):
            nadaraya.attention_weights(q, keys, kernel=kernel, bandwidth=h, sample_weight=sw, empty=policy)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        got = nadaraya.attention_weights(q, keys, kernel=kernel, bandwidth=h, sample_weight=sw, empty=policy)
        pooled = nadaraya.pool(q, keys, values, kernel=kernel, bandwidth=h, sample_weight=sw, empty=policy)
    want = plain_weights(q, keys, kernel, h, sw=sw, empty=policy)
    if policy == "mean":
        np.testing.assert_allclose(want[0], sw / sw.sum(), rtol=1e-15)
    if policy == "nearest":
        np.testing.assert_allclose(want[1, 5:7], [2 / 3, 1 / 3], rtol=1e-15)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15, equal_nan=True)
    # the weights are what pool uses, policy included
    np.testing.assert_allclose(got @ values, pooled, rtol=1e-12, equal_nan=True)


def test_attention_weights_nan_policy_warns_once_with_the_count():
    keys, _, sw, h = _isolated()
    q = np.array([[-8.0, 0.1], [6.75, 0.0], [0.1, 0.0]])
    with pytest.warns(nadaraya.EmptyWindowWarning, match="2 of 3") as record:
        nadaraya.attention_weights(q, keys, kernel="epanechnikov", bandwidth=h, sample_weight=sw)
    assert len(record) == 1


def test_dask_is_among_the_backends_when_installed():
    if find_spec("dask") is not None and find_spec("distributed") is not None:
        assert "dask" in BACKENDS
