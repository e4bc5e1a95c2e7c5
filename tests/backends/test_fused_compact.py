"""The fused backend's loop for compact kernels (keys in a tree of boxes, one generated pass a pair).

Against ``nadaraya.backends.reference.partials(..., moments=r)`` on every query, and against the
weights written out plainly here from the kernel's profile. Each sum (the weights', the
values', every moment entry) is compared entry by entry within ``RTOL`` times its natural size
``sum w |u|^j`` (times ``max |v|`` for the sums with values; ``u = k - q``, ``|u|`` the largest
coordinate): the two backends take the same exact differences and the same kernel factors, and
differ only in the order of the sums, a few times ``n eps`` (n <= 1100 here: 2.4e-13) of it.
float32 inputs are computed in float64 and rounded once: within 2^-24 (6e-8) of each sum's
natural size from the float64 sums of the same numbers, taken here as 1e-7, plus the float32
rounding of the shift (the weight's binary exponent, ``|shift| 2^-24`` relative in ``e^shift``).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from nadaraya.backends import _fused_compact, fused, reference
from nadaraya.kernels import REGISTRY, get

RTOL = 1e-12
#: every kernel of compact support the fused backend names
COMPACT = sorted(name for name in fused.KINDS if REGISTRY[name].compact)


@pytest.fixture(autouse=True)
def _wide_supports_take_the_tree(monkeypatch):
    """The supports here cover much of the keys' box (a few hundred keys each), where the fused
    backend would take its general loop: these tests check the tree's sums, so it takes them all
    (and from SORT_FROM queries, whatever the number of keys: QUERIES_PER_LEVEL has its own test)."""
    monkeypatch.setattr(_fused_compact, "MAX_COVER", 1.0)
    monkeypatch.setattr(_fused_compact, "QUERIES_PER_LEVEL", 0.0)


def _data(seed, n, m, d, p, zeros=True, dtype=np.float64):
    """Keys in the unit cube, queries a little beyond it (some weigh nothing), sample weights
    with zeros, a left-out key per query or none, one bandwidth a feature."""
    rng = np.random.default_rng(seed)
    keys = rng.uniform(size=(n, d))
    queries = rng.uniform(-0.3, 1.3, size=(m, d))
    queries[: m // 20] += 2.0  # beyond every key's support
    values = rng.normal(size=(n, p))
    sw = rng.uniform(0.5, 2.0, size=n)
    if zeros:
        sw[rng.uniform(size=n) < 0.2] = 0.0
    h = rng.uniform(0.15, 0.35, size=d)
    exclude = rng.integers(-1, n, size=m)
    return (*(a.astype(dtype) for a in (queries, keys, values, sw, h)), exclude)


def _natural(queries, keys, values, kernel, h, sw, exclude, degree):
    """Per sum of a degree's partials (weight, values, each moment): its natural size (m,)."""
    q, k, v, h = (np.asarray(a, dtype=np.float64) for a in (queries, keys, values, h))
    z = (q[:, None, :] - k[None, :, :]) / h
    w = np.prod(get(kernel).profile(z), axis=2) * np.asarray(sw, dtype=np.float64)[None, :]
    if exclude is not None:
        rows = np.nonzero(exclude >= 0)[0]
        w[rows, exclude[rows]] = 0.0
    norm = np.abs(k[None, :, :] - q[:, None, :]).max(axis=2)
    vmax = np.abs(v).max(initial=0.0)
    orders = [(j, False) for j in range(1, 2 * degree + 1)] + [(j, True) for j in range(1, degree + 1)]
    sizes = [w.sum(axis=1), w.sum(axis=1) * vmax]
    sizes += [(w * norm**j).sum(axis=1) * (vmax if with_v else 1.0) for j, with_v in orders]
    return w, sizes


def _check(got, want, sizes, rtol):
    """Every sum of ``got`` within ``rtol`` of its natural size of ``want``'s, on every query."""
    if got.weight.dtype == np.float64:
        assert np.all(got.shift == 0.0) and np.all(want.shift == 0.0)  # compact weights: no shift
    # float32 partials carry the weight's binary exponent in the shift
    up, up_want = (np.exp(p.shift.astype(np.float64)) for p in (got, want))
    pairs = [(got.weight, want.weight), (got.value, want.value), *zip(got.moments, want.moments, strict=True)]
    for (a, b), size in zip(pairs, sizes, strict=True):
        assert a.shape == b.shape
        tail = (slice(None),) + (None,) * (a.ndim - 1)
        err = np.abs(a.astype(np.float64) * up[tail] - b.astype(np.float64) * up_want[tail])
        bound = (np.asarray(rtol) * np.ones(len(size)) * size)[tail]
        assert np.all(err <= bound + 1e-300), float(np.max(err / (size[tail] + 1e-300)))


def _both(q, k, v, kernel, h, sw, ex, degree):
    args = dict(kernel=get(kernel), bandwidth=h, sample_weight=sw, exclude=ex, moments=degree)
    return fused.partials(q, k, v, **args), reference.partials(q, k, v, **args)


@pytest.mark.parametrize("kernel", COMPACT)
@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("degree", [0, 1, 2])
def test_every_compact_kernel_matches_the_reference(kernel, d, degree):
    """1100 keys (17 leaves of 64 and a part one), 80 queries (the tree's leaves), 3 outputs
    (the further columns' loop), sample weights with zeros, a random left-out key per query."""
    q, k, v, sw, h, ex = _data(100 * d + 10 * degree + COMPACT.index(kernel), 1100, 80, d, 3)
    assert _fused_compact.serves(False, d, degree, len(q))
    got, want = _both(q, k, v, kernel, h, sw, ex, degree)
    w, sizes = _natural(q, k, v, kernel, h, sw, ex, degree)
    _check(got, want, sizes, RTOL)
    assert np.any(w.sum(axis=1) == 0) and np.any(w.sum(axis=1) > 0)  # far queries and near ones
    # the plain weights written out here, too
    np.testing.assert_allclose(got.weight, w.sum(axis=1), rtol=RTOL * 10, atol=1e-300)


@pytest.mark.parametrize(("kernel", "d", "degree"), [("epanechnikov", 2, 2), ("tricube", 3, 1),
                                                     ("biweight", 3, 2), ("triangular", 1, 1)])
def test_leave_one_out_one_output(kernel, d, degree):
    """Queries are the keys, each leaving itself out (no sample weights, one output)."""
    _, k, v, _, h, _ = _data(7 + d, 900, 1, d, 1, zeros=False)
    ex = np.arange(900)
    got, want = _both(k, k, v[:, :1], kernel, h, None, ex, degree)
    _check(got, want, _natural(k, k, v[:, :1], kernel, h, np.ones(900), ex, degree)[1], RTOL)
    kept = fused.partials(k, k, v[:, :1], kernel=get(kernel), bandwidth=h, moments=degree)
    assert np.all(kept.weight > got.weight)  # each query's own key weighed in the plain sums only


@pytest.mark.parametrize(("kernel", "d", "degree"),
                         [("epanechnikov", 3, 2), ("cosine", 2, 1), ("parzen", 3, 0)])
def test_float32(kernel, d, degree):
    """float32 inputs: the result float32, within its rounding of the float64 sums."""
    q, k, v, sw, h, ex = _data(3 + d, 800, 70, d, 2, dtype=np.float32)
    got = _both(q, k, v, kernel, h, sw, ex, degree)[0]
    want = _both(*(a.astype(np.float64) for a in (q, k, v)), kernel, h.astype(np.float64),
                 sw.astype(np.float64), ex, degree)[1]  # the float64 sums of the same numbers
    assert got.weight.dtype == np.float32 and all(mo.dtype == np.float32 for mo in got.moments)
    _check(got, want, _natural(q, k, v, kernel, h, sw, ex, degree)[1], 1e-7 * (1.0 + np.abs(got.shift)))


@pytest.mark.parametrize(("n", "m"), [(1, 64), (3, 70), (65, 64), (64, 200), (0, 64), (2049, 5)])
def test_small_and_empty(n, m):
    """One key; a leaf exactly full; a last leaf of one key; no key at all (every sum zero); fewer
    queries than SORT_FROM (the general loop)."""
    q, k, v, sw, h, ex = _data(n + m, max(n, 1), m, 2, 2)
    k, v, sw = k[:n], v[:n], sw[:n]
    ex = np.where(ex < n, ex, -1)
    got, want = _both(q, k, v, "epanechnikov", h * 3, sw, ex, 2)
    _check(got, want, _natural(q, k, v, "epanechnikov", h * 3, sw, ex, 2)[1], RTOL)
    if n == 0:
        assert np.all(got.weight == 0) and all(np.all(mo == 0) for mo in got.moments)


@pytest.mark.parametrize("degree", [1, 2])
def test_keys_on_the_support_boundary_weigh(degree):
    """Keys at exactly ``|u| = 1`` (a grid of eighths, h = 1/4, queries on the grid): the boxcar
    kernel weighs them 1/2, so a node whose box touches the support must not be skipped (nor,
    at degree 2, the keys of a leaf cut at the support in its sorted feature)."""
    g = np.arange(0.0, 4.0, 0.125)
    k = np.stack(np.meshgrid(g, g), axis=-1).reshape(-1, 2)
    q = k[::7].copy()
    v = np.sin(k[:, :1]) + k[:, 1:]
    h = np.array([0.25, 0.25])
    got, want = _both(q, k, v, "boxcar", h, None, None, degree)
    sizes = _natural(q, k, v, "boxcar", h, np.ones(len(k)), None, degree)[1]
    _check(got, want, sizes, RTOL)
    # 5 x 5 keys in each inner query's closed box, 16 of them on its edge
    inner = np.all((q >= 0.25) & (q <= 3.625 - 0.25), axis=1)
    assert np.all(got.weight[inner] == 0.25 * 25)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_the_tree(d):
    """The keys' order is a permutation; each node holds its children's keys and its box theirs;
    leaves hold at most ``leaf`` keys, and every left child a multiple of it."""
    keys = np.random.default_rng(d).normal(size=(1000, d))
    perm, nodes, lo, hi = _fused_compact.leaf_order(keys, np.full(d, 3.0), 64)
    assert np.array_equal(np.sort(perm), np.arange(1000))
    assert nodes[0, 0] == 0 and nodes[0, 1] == 1000
    ordered = keys[perm]
    for node, (a, b, left, right) in enumerate(nodes):
        assert np.array_equal(lo[:, node], ordered[a:b].min(axis=0))
        assert np.array_equal(hi[:, node], ordered[a:b].max(axis=0))
        if left < 0:  # a leaf: its keys ascend in its widest feature
            assert 0 < b - a <= 64
            assert right == np.argmax(np.ptp(ordered[a:b] * 3.0, axis=0))
            assert np.all(np.diff(ordered[a:b, right]) >= 0)
        else:
            assert nodes[left, 0] == a and nodes[left, 1] == nodes[right, 0] and nodes[right, 1] == b
            assert (nodes[left, 1] - a) % 64 == 0
            f = np.argmax(np.ptp(ordered[a:b], axis=0))  # split at the median of the widest feature
            assert ordered[a:nodes[left, 1], f].max() <= ordered[nodes[left, 1]:b, f].min()


def test_served_calls():
    """The compact loop serves degree 0 to 2 up to MAX_FEATURES (3) features, from SORT_FROM queries,
    where a support covers at most MAX_COVER of the keys' box; the others (and log-domain kernels)
    keep the general loop, whose results agree too."""
    serves = lambda *a: _fused_compact.serves(*a, 70)  # noqa: E731
    assert serves(False, 3, 2) and not serves(False, 4, 0)
    assert not serves(True, 2, 1) and not _fused_compact.serves(False, 2, 1, 63)
    assert _fused_compact.covers(np.array([[0.0, 10.0], [0.0, 1.0]]), np.array([1.0, 0.5])) == 0.2
    assert _fused_compact.covers(np.empty((2, 0)), np.ones(2)) == 1.0
    for d, degree in ((4, 1), (4, 2), (8, 1)):
        q, k, v, sw, h, ex = _data(11 + d, 600, 70, d, 2)
        got, want = _both(q, k, v, "tricube", h * 3, sw, ex, degree)
        _check(got, want, _natural(q, k, v, "tricube", h * 3, sw, ex, degree)[1], RTOL)


def test_the_tree_waits_for_queries_that_pay_for_its_build(monkeypatch):
    """The tree is built per call (about n log n): with few queries among many keys, and with no
    value columns (the generated loops carry the first), the general loop takes the call and agrees."""
    monkeypatch.setattr(_fused_compact, "QUERIES_PER_LEVEL", 80.0)
    assert _fused_compact.fewest_queries(10**6) > 1000 and _fused_compact.fewest_queries(100) == 64
    assert not _fused_compact.serves(False, 2, 1, 500, n=10**6)
    assert _fused_compact.serves(False, 2, 1, 500, n=2000)
    assert not _fused_compact.serves(False, 2, 1, 500, n=2000, p=0)
    ran = []
    real = _fused_compact.run
    monkeypatch.setattr(_fused_compact, "run", lambda *a, **kw: ran.append(1) or real(*a, **kw))
    q, k, v, sw, h, ex = _data(5, 1100, 80, 2, 2)
    got, want = _both(q, k, v, "epanechnikov", h, sw, ex, 1)
    _check(got, want, _natural(q, k, v, "epanechnikov", h, sw, ex, 1)[1], RTOL)
    assert not ran  # 80 queries among 1100 keys: fewer than 80 per level of the tree
    q, k, v, sw, h, ex = _data(6, 1100, 400, 2, 0)
    got, want = _both(q, k, v, "epanechnikov", h, sw, ex, 1)
    assert not ran and got.value.shape == (400, 0)  # no value columns: the general loop
    for a, b in zip(got.moments[:2], want.moments[:2], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12 * float(np.abs(b).max()))


def test_generated_source_splits_degree_two_from_three_features():
    """From three features the sums of order 3 and 4 take a second loop over the stored weights."""
    two, three = _fused_compact.compact_source(2 * 16 + 2), _fused_compact.compact_source(2 * 16 + 3)
    assert two.count("for j in range(nb)") == 2 and three.count("for j in range(nb)") == 3
    assert "mom[i, 0] += -s_0" in three  # odd orders negated once (e = q - k)


def _outlying(seed, n, d):
    """Keys in the unit cube but 1 % far out (on either side, in some features), sample weights
    with zeros, one output."""
    rng = np.random.default_rng(seed)
    keys = rng.uniform(size=(n, d))
    far = rng.choice(n, size=n // 100, replace=False)
    keys[far] += rng.choice([-1.0, 1.0], size=(far.size, d)) * rng.uniform(5.0, 80.0, size=(far.size, d)) \
        * (rng.uniform(size=(far.size, d)) < 0.6)
    values = rng.normal(size=(n, 2))
    sw = rng.uniform(0.5, 2.0, size=n)
    sw[rng.uniform(size=n) < 0.1] = 0.0
    return keys, values, sw, rng.uniform(0.15, 0.3, size=d)


def _general(monkeypatch, q, k, v, kernel, h, sw, ex, degree):
    """The general fused loop's partials (the tree refused by its cover test)."""
    with monkeypatch.context() as patch:
        patch.setattr(_fused_compact, "MAX_COVER", -1.0)
        return fused.partials(q, k, v, kernel=get(kernel), bandwidth=h, sample_weight=sw, exclude=ex,
                              moments=degree)


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("degree", [0, 1, 2])
def test_outliers_leave_one_out_and_weights_match_the_general_loop(monkeypatch, d, degree):
    """Queries are the keys, 1 % of them far out, each leaving itself out (and some queries
    a key index the keys do not have, which leaves none out): the tree's sums are the general
    loop's and the reference's, on every query and every sum."""
    k, v, sw, h = _outlying(40 + 3 * d + degree, 1500, d)
    ex = np.arange(1500)
    ex[::7] = 1500 + np.arange(ex[::7].size)  # beyond the keys: nothing left out
    ex[3::11] = -5
    ran = []
    real = _fused_compact.run
    monkeypatch.setattr(_fused_compact, "run", lambda *a, **kw: ran.append(1) or real(*a, **kw))
    got, want = _both(k, k, v, "epanechnikov", h, sw, ex, degree)
    assert ran  # the tree took the call
    general = _general(monkeypatch, k, k, v, "epanechnikov", h, sw, ex, degree)
    assert len(ran) == 1
    kept = np.where((ex >= 0) & (ex < 1500), ex, -1)
    w, sizes = _natural(k, k, v, "epanechnikov", h, sw, kept, degree)
    _check(got, want, sizes, RTOL)
    _check(got, general, sizes, RTOL)
    assert np.any(w[np.arange(1500), np.arange(1500)][ex < 0] > 0)  # unmasked own terms weigh


def test_exclude_beyond_the_keys_leaves_none_out(monkeypatch):
    """An exclude index outside ``0 .. n-1`` leaves no key out, in the tree as in the general loop
    and the reference (it raised IndexError in the tree)."""
    q, k, v, sw, h, _ = _data(9, 700, 90, 2, 1)
    ex = np.resize(np.array([700, 10**9, -2, -1]), 90)
    for degree in (0, 2):
        got, want = _both(q, k, v, "biweight", h, sw, ex, degree)
        plain = _both(q, k, v, "biweight", h, sw, None, degree)[0]
        sizes = _natural(q, k, v, "biweight", h, sw, None, degree)[1]
        _check(got, want, sizes, RTOL)
        _check(got, plain, sizes, RTOL)
        _check(got, _general(monkeypatch, q, k, v, "biweight", h, sw, ex, degree), sizes, RTOL)


def test_the_cover_test_ignores_outliers(monkeypatch):
    """A few far keys do not shrink the share a support covers: a support over most of the keys'
    bulk keeps the general loop (where the tree, visiting most leaves, took twice its time)."""
    monkeypatch.setattr(_fused_compact, "MAX_COVER", 0.05)
    k, v, _, h = _outlying(5, 3000, 3)
    bulk = np.all((k >= 0) & (k <= 1), axis=1)
    share = _fused_compact.covers(np.ascontiguousarray(k.T), 1 / h)
    assert share == pytest.approx(_fused_compact.covers(np.ascontiguousarray(k[bulk].T), 1 / h), rel=0.05)
    assert share > 0.05 and np.prod(2 * h / np.ptp(k, axis=0)) < 0.05  # the bounding box's would be < 0.05
    ran = []
    monkeypatch.setattr(_fused_compact, "run", lambda *a, **kw: ran.append(1))
    fused.partials(k[:200], k, v, kernel=get("epanechnikov"), bandwidth=h, moments=1)
    assert not ran


@pytest.mark.parametrize("d", [2, 3])
def test_degree_two_gathers_a_query_s_leaves_in_buffers_it_may_fill(monkeypatch, d):
    """At degree 2 each query's leaves are copied into one buffer; with a buffer of 64 keys it
    fills and is summed many times a query (and a left-out key may be the last of one)."""
    monkeypatch.setattr(_fused_compact, "GATHERED", 64)
    monkeypatch.setattr(_fused_compact, "_TASKS", {})  # compiled anew, with that buffer
    k, v, sw, h = _outlying(60 + d, 1200, d)
    h = h * 2.5
    ex = np.arange(1200)
    got, want = _both(k, k, v, "tricube", h, sw, ex, 2)
    w, sizes = _natural(k, k, v, "tricube", h, sw, ex, 2)
    assert np.median(np.count_nonzero(w, axis=1)) > 4 * 64  # several buffers a query
    _check(got, want, sizes, RTOL)
