"""The fused backend's moment sums of local polynomial fits, against the reference backend.

Each moment array is compared normalised by its own backend's weight sum (``M / W`` does not
depend on the shift, which in the fused backend is an upper bound of the maximum), entry by
entry, to within ``RTOL`` times its natural size ``sum w |u|^j / sum w`` (times ``|v|`` for the
sums with values), computed plainly here from the kernel's profile with ``u = k - q``,
``|u|`` the largest coordinate. RTOL = 1e-12 in float64: the two backends take the same
exact differences, their exponentials agree to 2 ulp and their sums differ only in order, so
over at most 4097 keys they differ by a few times 4097 * 1.1e-16 = 4.5e-13 of the natural size
at worst. Log-domain weights carry one more error: a log weight ``L`` is only known to
``|L| eps``, so queries far from every key get ``8 eps |L_max|`` on top.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from nadaraya import backends
from nadaraya.backends import fused, reference
from nadaraya.kernels import get
from nadaraya.partials import merge

RTOL = 1e-12
EPS = np.finfo(np.float64).eps


def _data(seed, n, m, d, p, kernel, dtype=np.float64, zeros=True):
    """Keys in the unit cube, queries a little beyond it, weights with zeros, one bandwidth a feature."""
    rng = np.random.default_rng(seed)
    keys = rng.uniform(size=(n, d))
    queries = rng.uniform(-0.1, 1.1, size=(m, d))
    values = rng.normal(size=(n, p))
    sw = rng.uniform(0.5, 2.0, size=n)
    if zeros:
        sw[rng.uniform(size=n) < 0.2] = 0.0
    compact = get(kernel).log_profile is None
    h = rng.uniform(0.6, 0.8, size=d) if compact else rng.uniform(0.15, 0.4, size=d)
    exclude = rng.integers(-1, n, size=m)
    cast = lambda a: a.astype(dtype)  # noqa: E731
    return cast(queries), cast(keys), cast(values), cast(sw), cast(h), exclude


def _plain(queries, keys, values, kernel, h, sw, exclude):
    """Per query: the natural size of each moment order (dict j -> (m,), and ('v', j) -> (m,)),
    the largest |log weight| (0 for kernels not in the log domain) and whether any key weighs."""
    q, k, v, h = (np.asarray(a, dtype=np.float64) for a in (queries, keys, values, h))
    kern = get(kernel)
    z = (q[:, None, :] - k[None, :, :]) / h
    sw = np.ones(len(k)) if sw is None else np.asarray(sw, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if kern.log_profile is not None:
            lw = kern.log_profile(z).sum(axis=2) + np.log(sw)
        else:
            lw = np.log(np.prod(kern.profile(z), axis=2) * sw)
    if exclude is not None:
        rows = np.nonzero(exclude >= 0)[0]
        lw[rows, exclude[rows]] = -np.inf
    top = lw.max(axis=1)
    live = np.isfinite(top)
    w = np.exp(lw - np.where(live, top, 0.0)[:, None])
    norm = np.abs(k[None, :, :] - q[:, None, :]).max(axis=2)
    vmax = np.abs(v).max(axis=1)
    total = np.where(live, w.sum(axis=1), 1.0)
    sizes = {}
    for j in range(1, 5):
        sizes[j] = (w * norm**j).sum(axis=1) / total
        sizes["v", j] = (w * norm**j * vmax).sum(axis=1) / total
    big = np.where(live, np.abs(top), 0.0) if kern.log_profile is not None else np.zeros(len(q))
    return sizes, big, live


def _orders(degree):
    """The order of each moment of ``moment_shapes(degree, ...)`` and whether it has the values."""
    return [(j, False) for j in range(1, 2 * degree + 1)] + [(j, True) for j in range(1, degree + 1)]


def _compare(got, want, degree, plain, d, p, rtol=RTOL):
    """``got`` against ``want`` (Partials with moments): shapes, the pooled values, and each
    moment normalised by its weight, within ``rtol`` of its natural size."""
    sizes, big, live = plain
    shapes = reference.moment_shapes(degree, d, p)
    assert [s.shape[1:] for s in got.moments] == [tuple(s) for s in shapes]
    assert np.array_equal(got.weight > 0, want.weight > 0)
    assert np.array_equal(want.weight > 0, live)
    tol = rtol + 8 * EPS * (big + 40.0)  # the log weights' own rounding: |L| eps
    w_got = np.where(live, got.weight, 1.0).astype(np.float64)
    w_want = np.where(live, want.weight, 1.0).astype(np.float64)
    for (j, with_values), mg, mw in zip(_orders(degree), got.moments, want.moments, strict=True):
        tail = (slice(None),) + (None,) * (mg.ndim - 1)
        a = mg.astype(np.float64) / w_got[tail]
        b = mw.astype(np.float64) / w_want[tail]
        scale = (sizes["v", j] if with_values else sizes[j]) * tol
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (np.abs(a - b) / scale[tail])[live]  # within the tolerance: at most 1
        worst = float(np.max(ratio, initial=0.0))
        assert np.all((np.abs(a - b) <= scale[tail])[live]), (j, with_values, worst)
        assert np.all(mg[~live] == 0.0)  # no key weighs: every sum is zero, not NaN
    pooled = got.finalize()[live].astype(np.float64)
    np.testing.assert_allclose(pooled, want.finalize()[live], rtol=max(rtol, 1e-12) * 10, atol=1e-12)


def _both(queries, keys, values, kernel, h, sw, exclude, degree):
    args = dict(kernel=get(kernel), bandwidth=h, sample_weight=sw, exclude=exclude)
    return (fused.partials(queries, keys, values, **args, moments=degree),
            reference.partials(queries, keys, values, **args, moments=degree))


# d = 10 is past fused.MAX_FUSED (8): the prefix of features through the scratch row, and the
# general walk of the moment sums for degree 1 as well
CASES = (
    [("gaussian", d, r) for d in (1, 2, 3, 5, 10) for r in (1, 2)]
    + [("laplacian", d, r) for d in (1, 3, 10) for r in (1, 2)]
    + [("epanechnikov", d, r) for d in (1, 3, 5) for r in (1, 2)]
    + [("tricube", d, r) for d in (2, 5, 10) for r in (1, 2)]
    + [("logistic", 2, 1), ("constant", 2, 1)]
)


@pytest.mark.parametrize(("kernel", "d", "degree"), CASES)
def test_moments_match_the_reference(kernel, d, degree):
    """Several key blocks (2049 keys: the last block holds one), 3 outputs, weights with zeros,
    a random left-out key per query (or none)."""
    n = 2049 if degree == 1 or d <= 5 else 300
    q, k, v, sw, h, ex = _data(d * 10 + degree, n, 23, d, 3, kernel)
    got, want = _both(q, k, v, kernel, h, sw, ex, degree)
    _compare(got, want, degree, _plain(q, k, v, kernel, h, sw, ex), d, 3)
    # the symmetric sums are stored in full, mirrored exactly
    assert np.array_equal(got.moments[1], np.swapaxes(got.moments[1], 1, 2))


@pytest.mark.parametrize(("kernel", "d"), [("gaussian", 1), ("gaussian", 2), ("gaussian", 5),
                                           ("epanechnikov", 3)])
@pytest.mark.parametrize("degree", [1, 2])
def test_leave_one_out_and_one_output(kernel, d, degree):
    """Queries are the keys and each leaves itself out; one output column (no further columns)."""
    _, k, v, _, h, _ = _data(7 + d, 1500, 1500, d, 1, kernel, zeros=False)
    q, ex = k[:40], np.arange(40)
    got, want = _both(q, k, v, kernel, h, None, ex, degree)
    _compare(got, want, degree, _plain(q, k, v, kernel, h, None, ex), d, 1)
    # leaving a key out of its own query's sums changes them
    kept = fused.partials(q, k, v, kernel=get(kernel), bandwidth=h, moments=degree)
    second = lambda p: p.moments[1] / p.weight[:, None, None]  # noqa: E731
    assert not np.allclose(second(kept), second(got), rtol=1e-9, atol=0)


@pytest.mark.parametrize(("n", "m"), [(1, 1), (2, 3), (3, 2), (4097, 4), (4, 4097)])
@pytest.mark.parametrize(("kernel", "d"), [("gaussian", 2), ("epanechnikov", 1), ("gaussian", 5)])
def test_awkward_sizes(n, m, kernel, d):
    q, k, v, sw, h, ex = _data(n + m, n, m, d, 3, kernel)
    for degree in (1, 2):
        got, want = _both(q, k, v, kernel, h, sw, ex, degree)
        _compare(got, want, degree, _plain(q, k, v, kernel, h, sw, ex), d, 3)


@pytest.mark.parametrize(("kernel", "d"), [("gaussian", 1), ("gaussian", 2), ("gaussian", 5),
                                           ("laplacian", 3)])
@pytest.mark.parametrize("degree", [1, 2])
def test_far_queries(kernel, d, degree):
    """Queries whose every plain Gaussian weight underflows (log weights below -1000): the
    moments stay consistent with the weight under the shift, as the reference's."""
    q, k, v, sw, h, _ = _data(3, 700, 6, d, 2, kernel, zeros=False)
    h = np.full(d, 0.1)
    q[:3] = k.mean(axis=0) + 6.0 * np.arange(1, 4)[:, None] / np.sqrt(d)  # 6, 12 and 18 from the middle
    got, want = _both(q, k, v, kernel, h, sw, None, degree)
    if kernel == "gaussian":
        assert np.all(want.shift[:3] < -745)  # exp of every log weight underflows
    _compare(got, want, degree, _plain(q, k, v, kernel, h, sw, None), d, 2)


@pytest.mark.parametrize(("d", "degree"), [(1, 1), (2, 1), (3, 1), (2, 2)])
def test_keys_far_from_the_origin(d, degree):
    """Keys and queries near 1e8 with a bandwidth of 0.05: the differences are taken exactly, so
    the moments are as accurate as near the origin (an expansion about the origin would lose
    about 1e8 * eps / 0.05 = 4e-7 of them)."""
    q, k, v, sw, h, ex = _data(11, 600, 9, d, 2, "gaussian")
    k, q, h = k + 1e8, q + 1e8, np.full(d, 0.05)
    got, want = _both(q, k, v, "gaussian", h, sw, ex, degree)
    _compare(got, want, degree, _plain(q, k, v, "gaussian", h, sw, ex), d, 2)


@pytest.mark.parametrize("d", [2, 3])
def test_sparse_blocks_redo_the_bound(d):
    """Keys on the diagonal, queries off it, a small bandwidth: a query inside the bounding box
    of a block is far from all its keys, so the block's bound is far above its largest weight
    and the block is summed again under its exact maximum (both calls of the fused loop)."""
    rng = np.random.default_rng(d)
    t = rng.uniform(size=3000)
    k = np.repeat(t[:, None], d, axis=1) + rng.normal(scale=1e-3, size=(3000, d))
    q = rng.uniform(size=(50, d))
    v = rng.normal(size=(3000, 2))
    h = np.full(d, 0.01)
    for degree in (1, 2):
        got, want = _both(q, k, v, "gaussian", h, None, None, degree)
        _compare(got, want, degree, _plain(q, k, v, "gaussian", h, None, None), d, 2)


@pytest.mark.parametrize(("kernel", "d"), [("gaussian", 1), ("gaussian", 2), ("gaussian", 5), ("tricube", 3)])
@pytest.mark.parametrize("degree", [1, 2])
def test_float32(kernel, d, degree):
    """float32 inputs: computed in float64 and rounded once, so within 1e-6 of the float64
    reference on the same (rounded) inputs, and within 1e-4 of the float32 reference, whose
    sums accumulate in float32 (4097 keys: up to 4097 * 6e-8 = 2.4e-4 at worst, ~1e-6 typical)."""
    q, k, v, sw, h, ex = _data(5 + d, 4097, 30, d, 2, kernel, dtype=np.float32)
    got, want32 = _both(q, k, v, kernel, h, sw, ex, degree)
    assert {a.dtype for a in (got.shift, got.weight, got.value, *got.moments)} == {np.dtype(np.float32)}
    f64 = [a.astype(np.float64) for a in (q, k, v, sw, h)]
    want = reference.partials(f64[0], f64[1], f64[2], kernel=get(kernel), bandwidth=f64[4],
                              sample_weight=f64[3], exclude=ex, moments=degree)
    plain = _plain(*f64[:3], kernel, f64[4], f64[3], ex)
    _compare(got, want, degree, plain, d, 2, rtol=1e-6)
    _compare(got, want32, degree, plain, d, 2, rtol=1e-4)


def test_float32_far_query_moves_the_exponent_into_the_shift():
    """A far query's weight under the fused backend's bound may be tiny; in float32 it moves its
    binary exponent into the shift, and the moments with it (they stay finite and consistent)."""
    q, k, v, sw, h, _ = _data(2, 500, 4, 2, 1, "gaussian", dtype=np.float32, zeros=False)
    q[:2] = np.float32(6.0)
    h = np.full(2, 0.1, dtype=np.float32)
    got = fused.partials(q, k, v, kernel=get("gaussian"), bandwidth=h, sample_weight=sw, moments=1)
    f64 = [a.astype(np.float64) for a in (q, k, v, sw, h)]
    want = reference.partials(f64[0], f64[1], f64[2], kernel=get("gaussian"), bandwidth=f64[4],
                              sample_weight=f64[3], moments=1)
    assert np.all((got.weight >= 0.5) & (got.weight < 1.0))  # the mantissa, exponent in the shift
    _compare(got, want, 1, _plain(*f64[:3], "gaussian", f64[4], f64[3], None), 2, 1, rtol=1e-6)


@pytest.mark.parametrize(("kernel", "d"), [("gaussian", 2), ("gaussian", 3), ("epanechnikov", 2)])
def test_merging_split_keys_gives_the_whole(kernel, d):
    """Partials of two halves of the keys (each under its own shift) merge into the one pass."""
    q, k, v, sw, h, _ = _data(9, 3000, 25, d, 2, kernel)
    args = dict(kernel=get(kernel), bandwidth=h, moments=1)
    whole = fused.partials(q, k, v, sample_weight=sw, **args)
    halves = merge(fused.partials(q, k[:1234], v[:1234], sample_weight=sw[:1234], **args),
                   fused.partials(q, k[1234:], v[1234:], sample_weight=sw[1234:], **args))
    _compare(halves, whole, 1, _plain(q, k, v, kernel, h, sw, None), d, 2)


@pytest.mark.parametrize(("kernel", "d"), [("gaussian", 3), ("gaussian", 10), ("tricube", 2)])
def test_moments_leave_weight_and_value_as_without(kernel, d):
    """Where the weights come from the plain loop and the sums from a pass over them, asking for
    moments leaves the weight and value sums as without (and moments=0 carries none). Equal up
    to the last bits, not bit for bit: a loop compiled in the process and the same loop loaded
    from numba's disk cache were seen to differ there (the plain loop, before moments existed)."""
    q, k, v, sw, h, ex = _data(4, 2500, 31, d, 3, kernel)
    args = dict(kernel=get(kernel), bandwidth=h, sample_weight=sw, exclude=ex)
    plain = fused.partials(q, k, v, **args)
    assert plain.moments == ()
    for degree in (1, 2):
        more = fused.partials(q, k, v, **args, moments=degree)
        assert np.array_equal(plain.shift, more.shift)
        for a, b in ((plain.weight, more.weight), (plain.value, more.value)):
            np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-14 * np.abs(a).max())


@pytest.mark.parametrize("bad", [-1, True, 1.0, "1", None])
def test_bad_moments_name_the_argument(bad):
    x = np.zeros((3, 1))
    with pytest.raises(ValueError, match="moments") as info:
        backends.compute("fused", x, x, x, kernel=get("gaussian"), bandwidth=np.ones(1), moments=bad)
    assert repr(bad) in str(info.value)
