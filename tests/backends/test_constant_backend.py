"""The constant backend (average pooling in O(n + m)) against brute force, the reference backend
and a plainly written least squares; auto's choice of it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import nadaraya
from nadaraya import backends
from nadaraya.backends import constant
from nadaraya.kernels import get as get_kernel

K = get_kernel("constant")


def _unshifted(parts: backends.Partials) -> list[np.ndarray]:
    """The sums themselves (weight, values, moments), in float64, the shift undone."""
    scale = np.exp(np.asarray(parts.shift, dtype=np.float64))
    out = [parts.weight, parts.value, *parts.moments]
    return [np.asarray(a, dtype=np.float64) * scale.reshape((-1,) + (1,) * (np.ndim(a) - 1)) for a in out]


def _brute(q, keys, v, sw, exclude, degree):
    """The sums written out: ``sum_k s_k u^(x)j`` and ``sum_k s_k u^(x)j v_k`` (``u = k - q``),
    one query at a time, and per query the scale that bounds each entry's terms
    (``sum_k s_k max|u|^j``, times ``max|v|`` for the value moments)."""
    m, d = q.shape
    p = v.shape[1]
    sums, scales = [], []
    shapes = [(j, False) for j in range(2 * degree + 1)] + [(j, True) for j in range(degree + 1)]
    for j, with_v in shapes:
        tail = (d,) * j + ((p,) if with_v else ())
        got, bound = np.zeros((m, *tail)), np.zeros(m)
        for i in range(m):
            s = sw.copy()
            if exclude is not None and exclude[i] >= 0:
                s[exclude[i]] = 0.0
            u = keys - q[i]
            for idx in itertools.product(range(d), repeat=j):
                term = s * np.prod(u[:, list(idx)], axis=1)
                got[(i, *idx)] = term @ v if with_v else term.sum()
            bound[i] = s @ np.abs(u).max(axis=1) ** j * (np.abs(v).max() if with_v else 1.0)
        sums.append(got)
        scales.append(bound)
    # the order of the partials: weight, value, weight moments j = 1 .. 2r, value moments 1 .. r
    order = [0, 2 * degree + 1, *range(1, 2 * degree + 1), *range(2 * degree + 2, len(shapes))]
    return [sums[t] for t in order], [scales[t] for t in order]


def _problem(n: int, d: int, seed: int, far: float = 0.0, spread: float = 1.0):
    rng = np.random.default_rng(seed)
    keys = far + spread * rng.uniform(-1.0, 1.0, (n, d))
    if n > 4:
        keys[3] = keys[1]  # duplicates
    q = np.vstack([keys, far + spread * rng.uniform(-3.0, 3.0, (5, d))])
    v = rng.normal(size=(n, 2)) + keys[:, :1] - far
    sw = rng.uniform(0.1, 2.0, n)
    sw[::5] = 0.0
    sw[-1] = 1.0
    return q, keys, v, sw


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("degree", [0, 1, 2, 3])
@pytest.mark.parametrize("far", [0.0, 1e6])
def test_sums_match_brute_force_for_every_query(d: int, degree: int, far: float) -> None:
    """Every entry of every sum within 1e-12 of its terms' scale, per query, with sample weights,
    duplicate keys, leave-one-out for the keys' own queries (and none for five others), keys a
    million away from 0 with a spread of 1e-3."""
    if d == 3 and degree == 3:
        degree = 2  # the brute force's 729 tensor entries per query take seconds
    q, keys, v, sw = _problem(23, d, seed=10 * d + degree, far=far, spread=1e-3 if far else 1.0)
    exclude = np.concatenate([np.arange(23), -np.ones(5, dtype=np.int64)])
    for ex in (None, exclude):
        got = _unshifted(backends.compute("constant", q, keys, v, kernel=K, bandwidth=np.ones(d),
                                          sample_weight=sw, exclude=ex, moments=degree))
        want, scales = _brute(q, keys, v, sw, ex, degree)
        assert len(got) == len(want)
        for a, b, s in zip(got, want, scales, strict=True):
            assert a.shape == b.shape
            err = np.abs(a - b).reshape(a.shape[0], -1).max(axis=1)
            assert np.all(err <= 1e-12 * s), (ex is not None, a.shape, float(np.max(err / s)))


@pytest.mark.parametrize("d", [1, 2])
def test_matches_the_reference_backend_float32_and_float64(d: int) -> None:
    q, keys, v, sw = _problem(60, d, seed=d)
    kw = dict(kernel=K, bandwidth=np.ones(d), sample_weight=sw, exclude=np.arange(q.shape[0]) - 5)
    for degree in (0, 1, 2):
        ref = _unshifted(backends.compute("reference", q, keys, v, moments=degree, **kw))
        got = _unshifted(backends.compute("constant", q, keys, v, moments=degree, **kw))
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13 * np.abs(b).max())
        args32 = [np.asarray(a, dtype=np.float32) for a in (q, keys, v)]
        kw32 = dict(kw, sample_weight=sw.astype(np.float32))
        got32 = backends.compute("constant", *args32, moments=degree, **kw32)
        assert got32.weight.dtype == np.float32 and all(m.dtype == np.float32 for m in got32.moments)
        want = _unshifted(backends.compute("reference", *(a.astype(np.float64) for a in args32),
                                           moments=degree, **dict(kw, sample_weight=sw.astype(np.float32)
                                                                   .astype(np.float64))))
        for a, b in zip(_unshifted(got32), want, strict=True):
            np.testing.assert_allclose(a, b, rtol=2e-7, atol=2e-7 * np.abs(b).max())


def test_single_key_and_its_leave_one_out() -> None:
    x = np.array([[2.0]])
    p = constant.partials(x, x, np.array([[3.0]]), kernel=K, bandwidth=np.ones(1), moments=1)
    assert p.finalize().tolist() == [[3.0]] and p.moments[0].tolist() == [[0.0]]
    p = constant.partials(x, x, np.array([[3.0]]), kernel=K, bandwidth=np.ones(1), exclude=np.array([0]))
    assert p.empty.all() and p.shift[0] == -np.inf and p.weight[0] == 0.0


def test_leave_one_out_is_masked_not_subtracted() -> None:
    """A key a billion times the others' values: the rest's mean survives leaving it out (a total
    less the left-out term would keep nothing of the small values)."""
    x = np.arange(6.0)[:, None]
    y = np.array([1e18, 1.0, 2.0, 3.0, 4.0, 5.0])[:, None]
    p = constant.partials(x, x, y, kernel=K, bandwidth=np.ones(1), exclude=np.arange(6))
    assert p.finalize()[0, 0] == 3.0
    assert p.finalize()[1, 0] == pytest.approx((1e18 + 14.0) / 5, rel=1e-15)


def test_auto_chooses_it_and_explain_says_why() -> None:
    for d in (1, 2, 5):
        for degree in (0, 1, 2, 3):
            for loo in (False, True):
                choice = backends.choose(K, n=10**4, m=10**4, d=d, moments=degree, loo=loo)
                assert choice.name == "constant", (d, degree, loo, choice)
    said = backends.explain("constant", n=10**5, m=10**5, d=2)
    assert said.startswith("constant: constant kernel in d=2: every sum is a global sum") and "fused" in said
    assert backends.choose(get_kernel("boxcar"), n=10**4, m=10**4, d=1).name != "constant"
    with pytest.raises(ValueError, match="backend='constant' does not support kernel='gaussian'"):
        backends.choose(get_kernel("gaussian"), n=10, m=10, d=1, backend="constant")


@pytest.mark.parametrize("degree", [1, 2])
def test_pool_and_loo_pool_match_a_plain_least_squares(degree: int) -> None:
    """``auto`` at 700 keys (above the reference's small calls) takes the constant backend; the
    local fit of every query is within 1e-9 of one weighted least squares per query (the keys
    around 1e6, the values' own leave-one-out)."""
    rng = np.random.default_rng(degree)
    n = 700
    x = 1e6 + rng.uniform(0.0, 1.0, n)
    y = np.sin(6 * x) + rng.normal(0.0, 0.3, n)
    sw = rng.uniform(0.5, 2.0, n)
    at = np.array([1e6 - 0.5, 1e6 + 0.25, 1e6 + 2.0])
    fit = nadaraya.pool(at, x, y, kernel="constant", bandwidth=0.1, degree=degree, sample_weight=sw)
    loo = nadaraya.loo_pool(x, y, kernel="constant", bandwidth=0.1, degree=degree, sample_weight=sw)

    def wls(q: float, keep: np.ndarray) -> float:
        design = np.vander(x[keep] - q, degree + 1, increasing=True)
        root = np.sqrt(sw[keep])
        return float(np.linalg.lstsq(design * root[:, None], y[keep] * root, rcond=None)[0][0])

    everyone = np.ones(n, dtype=bool)
    np.testing.assert_allclose(fit, [wls(q, everyone) for q in at], rtol=0, atol=1e-9)
    want = np.array([wls(x[i], np.arange(n) != i) for i in range(n)])
    np.testing.assert_allclose(loo, want, rtol=0, atol=1e-9)
    from nadaraya._core.call import compute_partials, prepare

    _, choice = compute_partials(prepare(x, x, y, kernel="constant", bandwidth=0.1), exclude=np.arange(n),
                                 moments=degree)
    assert choice.name == "constant"
