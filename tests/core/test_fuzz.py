"""Hypothesis fuzzing of every public entry point (issue 12, "the suite that keeps it so").

Each test draws hostile calls (shapes, dtypes, scales from 1e-300 to 1e300, NaN/inf, bad
bandwidths, weights, kernels and policies) and asserts one property: the call either returns
what a plain NumPy reference written here computes (dense weights in the log domain with the
row maximum subtracted), or raises ValueError / TypeError (ModelFileError for model files)
whose message names the bad argument. Never another exception type, never a NaN for finite
input with a log-profile kernel (except leave-one-out points with no other key), never a
RuntimeWarning, never a file left behind by a failing command.

Where a plain float64 formula is itself unreliable (scaled distances that overflow, log
weights so far below zero that their differences lose digits, weights on the underflow edge,
keys exactly on a compact window's edge), only the properties are checked: finite for a
log-profile kernel, each output within the range of the values, and the same answer from the
"reference", "fused" and (compact kernels) "windowed" backends.
"""

from __future__ import annotations

import tempfile
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import nadaraya
from nadaraya import EmptyWindowWarning
from nadaraya.persist import ModelFileError

FAST = settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# --- the kernels, written plainly (constants cancel in the weights) ----------------------------

LOG_KERNELS = {
    "gaussian": lambda u: -0.5 * u * u,
    "laplacian": lambda u: -np.abs(u),
    "logistic": lambda u: -np.abs(u) - 2.0 * np.log1p(np.exp(-np.abs(u))),
    "constant": lambda u: np.zeros_like(u),
}


def _parzen(a):
    return np.where(a <= 0.5, 4.0 / 3.0 - 8.0 * a * a + 8.0 * a**3, 8.0 / 3.0 * (1.0 - a) ** 3)


COMPACT = {
    "epanechnikov": lambda a: 1.0 - a * a,
    "boxcar": lambda a: np.ones_like(a),
    "triangular": lambda a: 1.0 - a,
    "biweight": lambda a: (1.0 - a * a) ** 2,
    "triweight": lambda a: (1.0 - a * a) ** 3,
    "tricube": lambda a: (1.0 - a**3) ** 3,
    "cosine": lambda a: np.cos(np.pi / 2.0 * a),
    "parzen": _parzen,
}
KERNELS = sorted([*LOG_KERNELS, *COMPACT])
JUNK_KERNELS = ["gauss", "", "epanechikov", "box car", 3, None, b"gaussian", ["gaussian"]]
POLICIES = ["nan", "nearest", "mean", "raise"]
BACKENDS = ["reference", "fused"]


def _log_weights(q, k, h, kernel, sw):
    """(m, n) log weights ``sum_j log K(u_j) + log s``: -inf outside a window or for s = 0."""
    with np.errstate(all="ignore"):
        u = (q[:, None, :] - k[None, :, :]) / h
        if kernel in LOG_KERNELS:
            lw = LOG_KERNELS[kernel](u).sum(axis=2)
        else:
            a = np.abs(u)
            lw = np.where(a <= 1.0, np.log(np.maximum(COMPACT[kernel](np.minimum(a, 1.0)), 0.0)), -np.inf)
            lw = lw.sum(axis=2)
        if sw is not None:
            lw = lw + np.log(sw / sw.max())[None, :]
    return u, lw


def _nearest(q, k, h, sw, others):
    """Indices (of ``others``) of the keys nearest to q in x / h, compared exactly."""
    d = [sum(((Fraction(float(a)) - Fraction(float(b))) / Fraction(float(c))) ** 2
             for a, b, c in zip(q, k[i], h)) for i in others]
    best = min(d)
    return [i for i, di in zip(others, d) if di == best]


def reference(q, k, v, h, kernel, sw, empty, loo=False):
    """The plain dense estimate in float64, its weights, the NaN rows it must warn about, and
    whether the plain formula can be trusted for this input (see the module docstring)."""
    q, k, v, h = (np.asarray(a, dtype=np.float64) for a in (q, k, v, h))
    sw = None if sw is None else np.asarray(sw, dtype=np.float64)
    h = np.broadcast_to(h, (k.shape[1],))
    n = k.shape[0]
    u, lw = _log_weights(q, k, h, kernel, sw)
    if loo:
        lw[np.arange(n), np.arange(n)] = -np.inf
    live = np.ones(n, bool) if sw is None else sw > 0
    s = np.ones(n) if sw is None else sw
    m = q.shape[0]
    top = lw.max(axis=1)
    reliable = bool(np.isfinite(u).all() and np.abs(u).max(initial=0) < 1e100)
    if kernel in LOG_KERNELS:
        reliable &= bool((top[np.isfinite(top)] > -500).all())
    else:
        a = np.abs(u)
        edge = np.abs(a - 1.0) < 1e-6
        reliable &= not edge.any()
        fin = lw[np.isfinite(lw)]
        reliable &= bool((fin > -600).all())
    W = np.zeros_like(lw)
    out = np.full((m, v.shape[1]), np.nan)
    nan_rows = np.zeros(m, bool)
    raise_rows = np.zeros(m, bool)
    with np.errstate(all="ignore"):
        for i in range(m):
            if np.isfinite(top[i]):
                w = np.exp(lw[i] - top[i])
                W[i] = w / w.sum()
                out[i] = W[i] @ v
                continue
            others = [j for j in range(n) if live[j] and not (loo and j == i)]
            if not others:
                nan_rows[i] = True
                raise_rows[i] = True
                W[i] = np.nan
                continue
            if kernel in LOG_KERNELS:
                # every log weight overflowed here (reliable is False): the library gives the
                # exact far-query limit, which this plain formula cannot compute; not a NaN row
                W[i] = np.nan
                continue
            if empty == "raise":
                raise_rows[i] = True
            elif empty == "nan":
                nan_rows[i] = True
                W[i] = np.nan
            else:
                pick = _nearest(q[i], k, h, sw, others) if empty == "nearest" else others
                W[i, pick] = s[pick] / s[pick].sum()
                out[i] = W[i] @ v
    return out, W, nan_rows, raise_rows, reliable


# --- drawing problems -------------------------------------------------------------------------


@st.composite
def problems(draw, loo=False):
    """A valid call: (queries, keys, values, kernel, bandwidth, sample_weight, empty)."""
    d = draw(st.integers(1, 2))
    n = draw(st.integers(1, 6))
    m = n if loo else draw(st.integers(1, 5))
    p = draw(st.sampled_from([None, 1, 2]))
    grid = st.floats(-8, 8, allow_nan=False, allow_subnormal=False)
    kk = np.array(draw(st.lists(grid, min_size=n * d, max_size=n * d))).reshape(n, d)
    qq = np.array(draw(st.lists(grid, min_size=m * d, max_size=m * d))).reshape(m, d)
    vals = np.array(draw(st.lists(st.floats(-10, 10), min_size=n * (p or 1), max_size=n * (p or 1))))
    vals = vals.reshape(n) if p is None else vals.reshape(n, p)
    kernel = draw(st.sampled_from(KERNELS))
    # one irrational-ish factor keeps keys off a window's edge (edges are checked by property)
    hb = draw(st.sampled_from([0.3, 1.0, 2.5, 9.0])) * 1.0123456789
    h = hb if d == 1 or draw(st.booleans()) else np.array([hb, hb * draw(st.sampled_from([0.5, 3.0]))])
    scale = 10.0 ** draw(st.sampled_from([0, 0, -300, -150, -20, 20, 150, 300]))
    vscale = 10.0 ** draw(st.sampled_from([0, 0, -300, -160, 160, 300]))
    kk, qq, h = kk * scale, qq * scale, np.asarray(h) * scale
    how_far = draw(st.sampled_from([None, None, None, "offset", "tiny-h"]))
    if how_far == "offset" and not loo:
        qq = qq + 1e200 * (scale / max(scale, 1.0))
    elif how_far == "tiny-h":
        h = h * 1e-160 if scale >= 1e-140 else h
    vals = vals * vscale
    sw = None
    kind = draw(st.sampled_from([None, None, "ones", "int", "zeros", "huge", "subnormal", "mixed"]))
    if kind is not None:
        base = np.array(draw(st.lists(st.floats(0.1, 4), min_size=n, max_size=n)))
        sw = {"ones": np.ones(n), "int": np.arange(1, n + 1), "zeros": base,
              "huge": base * 1e307, "subnormal": base * 5e-322, "mixed": base}[kind]
        if kind in ("zeros", "mixed") and n > 1:
            idx = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n - 1, unique=True))
            sw = sw.copy()
            sw[idx] = 0.0 if kind == "zeros" else 1e300
    dtype = draw(st.sampled_from(["float64", "float64", "float32", "int", "bool"]))
    if dtype == "float32":
        if not (1e-20 <= scale <= 1e20 and 1e-20 <= vscale <= 1e20 and how_far is None):
            dtype = "float64"
        else:
            kk, qq, vals = kk.astype(np.float32), qq.astype(np.float32), vals.astype(np.float32)
    if dtype in ("int", "bool"):
        conv = (lambda a: np.round(a).astype(np.int64)) if dtype == "int" else (lambda a: a > 0)
        kk, qq = conv(kk / scale), conv(qq / scale) if how_far is None else qq
        h = np.asarray(h) / scale
    empty = draw(st.sampled_from(POLICIES))
    return qq, kk, vals, kernel, h, sw, empty


def _tol(v, dtype):
    span = float(np.max(np.abs(v))) if np.size(v) else 1.0
    return (1e-3 if dtype == np.float32 else 1e-8) * (span or 1.0)


def _check_result(got, want, values, kernel, nan_rows, reliable, dtype, what):
    got = np.asarray(got, dtype=np.float64).reshape(want.shape)
    v = np.asarray(values, dtype=np.float64).reshape(want.shape[0] if False else -1, want.shape[1])
    assert np.isnan(got).any(axis=1).tolist() == nan_rows.tolist() or (not reliable and kernel in COMPACT), (
        what, got, want)
    ok = ~np.isnan(got).any(axis=1)
    if kernel in LOG_KERNELS:  # never NaN for finite input, except leave-one-out points alone
        assert (ok | nan_rows).all(), (what, got)
    assert np.isfinite(got[ok]).all(), (what, got)
    lo, hi = v.min(axis=0), v.max(axis=0)
    slack = _tol(v, dtype)
    assert ((got[ok] >= lo - slack) & (got[ok] <= hi + slack)).all(), (what, got, lo, hi)
    if reliable:
        both = ok & ~nan_rows
        np.testing.assert_allclose(got[both], want[both], rtol=0, atol=_tol(v, dtype), err_msg=what)


def _call(fn, *args, known_bug=False, **kwargs):
    """Run fn recording every warning; a RuntimeWarning is a bug (``known_bug``: one reported and
    kept as a strict xfail below, not asserted again here)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert known_bug or not runtime, [str(w.message) for w in runtime]
    return out, [w for w in caught if issubclass(w.category, EmptyWindowWarning)]


def _expect_error(names, fn, *args, **kwargs):
    """fn raises ValueError or TypeError whose message names one of ``names``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyWindowWarning)
        with pytest.raises((ValueError, TypeError)) as info:
            fn(*args, **kwargs)
    text = str(info.value)
    assert any(nm in text for nm in names), (names, text)


def _backends(kernel):
    return [*BACKENDS, "windowed"] if kernel in COMPACT else BACKENDS


# --- pool and loo_pool: valid input --------------------------------------------------------------


def _run_valid(prob, loo):
    qq, kk, vals, kernel, h, sw, empty = prob
    want, _, nan_rows, raise_rows, reliable = reference(
        kk if loo else qq, kk, np.asarray(vals).reshape(np.shape(kk)[0], -1), h, kernel, sw, empty, loo)
    note(f"reliable={reliable} nan_rows={nan_rows}")
    dtype = np.float32 if all(getattr(a, "dtype", None) == np.float32 for a in (qq, kk, vals)) else np.float64
    results = []
    for backend in _backends(kernel):
        kw = dict(kernel=kernel, bandwidth=h, sample_weight=sw, empty=empty, backend=backend)
        if empty == "raise" and raise_rows.any() and reliable:
            _expect_error(["empty", "leave-one-out"], nadaraya.loo_pool if loo else nadaraya.pool,
                          *((kk, vals) if loo else (qq, kk, vals)), **kw)
            continue
        if empty == "raise" and not reliable:
            try:
                got, warned = _call(nadaraya.loo_pool if loo else nadaraya.pool,
                                    *((kk, vals) if loo else (qq, kk, vals)), **kw)
            except ValueError as exc:
                assert "empty" in str(exc) or "leave-one-out" in str(exc), str(exc)
                continue
        else:
            got, warned = _call(nadaraya.loo_pool if loo else nadaraya.pool,
                                *((kk, vals) if loo else (qq, kk, vals)), **kw)
        assert np.shape(got) == ((np.shape(kk)[0] if loo else np.shape(qq)[0]),
                                 *np.shape(vals)[1:]), (backend, np.shape(got))
        assert got.dtype == dtype, (backend, got.dtype)
        _check_result(got, want, vals, kernel, nan_rows, reliable, dtype, backend)
        if reliable:
            assert bool(warned) == bool(nan_rows.any()), (backend, [str(w.message) for w in warned])
        results.append(np.asarray(got, dtype=np.float64))
    for other in results[1:]:  # every backend agrees, also where the plain formula cannot
        np.testing.assert_allclose(other, results[0], rtol=0, atol=_tol(vals, dtype), equal_nan=True)


@FAST
@given(problems())
def test_pool_agrees_with_the_plain_formula(prob) -> None:
    _run_valid(prob, loo=False)


@FAST
@given(problems(loo=True))
def test_loo_pool_agrees_with_the_plain_formula(prob) -> None:
    _run_valid(prob, loo=True)


def test_parzen_far_from_every_key_warns_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("ignore", EmptyWindowWarning)
        out = nadaraya.pool([1e200], [0.0], [0.0], kernel="parzen", bandwidth=0.3, backend="reference")
    assert np.isnan(out).all()


# --- pool, loo_pool, attention_weights: hostile arguments ---------------------------------------

def _ints(a):
    return np.clip(np.nan_to_num(np.asarray(a, dtype=float)), -1e6, 1e6).astype(np.int64)


NOT_REAL = {
    "complex": lambda a: np.asarray(a, dtype=float) + 1j,
    "object-str": lambda a: np.array(["x"] * np.size(a), dtype=object).reshape(np.shape(a)),
    # numeric text ("0.5") is parsed as numbers by design; text that is not a number is refused
    "str": lambda a: np.char.add("v", np.asarray(a, dtype=float).astype(str)),
    "datetime": lambda a: _ints(a).astype("datetime64[D]"),
    "timedelta": lambda a: _ints(a).astype("timedelta64[s]"),
    "none": lambda a: np.array([None] * np.size(a), dtype=object).reshape(np.shape(a)),
}


@st.composite
def hostile_calls(draw):
    """A valid problem with one argument broken; returns (kwargs, names the error may give)."""
    qq, kk, vals, kernel, h, sw, empty = draw(problems())
    args = dict(queries=qq, keys=kk, values=vals, kernel=kernel, bandwidth=h, sample_weight=sw, empty=empty)
    n, d = np.shape(kk)[0], np.shape(kk)[1]
    what = draw(st.sampled_from([
        "dtype", "nonfinite", "length", "empty-array", "ndim", "bandwidth", "sample_weight", "kernel",
        "empty",
    ]))
    if what == "dtype":
        arg = draw(st.sampled_from(["queries", "keys", "values", "sample_weight"]))
        base = args[arg] if args[arg] is not None else np.ones(n)
        args[arg] = NOT_REAL[draw(st.sampled_from(sorted(NOT_REAL)))](base)
    elif what == "nonfinite":
        arg = draw(st.sampled_from(["queries", "keys", "values", "sample_weight"]))
        base = np.array(args[arg] if args[arg] is not None else np.ones(n), dtype=float)
        flat = base.reshape(-1)
        flat[draw(st.integers(0, flat.size - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
        args[arg] = base
    elif what == "length":
        arg = draw(st.sampled_from(["values", "sample_weight", "queries"]))
        if arg == "queries":
            args[arg] = np.ones((2, d + 1))
        else:
            args[arg] = np.ones(n + draw(st.sampled_from([-n, 1, 3])))
    elif what == "empty-array":
        arg = draw(st.sampled_from(["queries", "keys"]))
        args[arg] = np.empty((0, d)) if draw(st.booleans()) else np.empty((1, 0))
    elif what == "ndim":
        arg = draw(st.sampled_from(["queries", "keys", "values"]))
        args[arg] = np.ones((2, 2, 2)) if draw(st.booleans()) else np.float64(1.0)
    elif what == "bandwidth":
        arg = "bandwidth"
        args[arg] = draw(st.sampled_from([
            0.0, -1.0, np.inf, np.nan, "0.5", "scott", "cv", "", [1.0] * (d + 1), [], [[1.0]], -1e-300,
            np.array([1.0, 0.0])[:d] if d == 2 else 0.0, None, 1j, b"x", {"h": 1},
        ]))
    elif what == "sample_weight":
        arg = "sample_weight"
        args[arg] = draw(st.sampled_from([
            -np.ones(n), np.zeros(n), np.where(np.arange(n) == 0, -1e-300, 1.0), ["a"] * n,
            np.full(n, np.inf),
            np.full(n, 1e309 * 0 - 1),
        ]))
    elif what == "kernel":
        arg = "kernel"
        args[arg] = draw(st.sampled_from(JUNK_KERNELS))
    else:
        arg = "empty"
        args[arg] = draw(st.sampled_from(["NaN", "none", "", None, 0, "zero", "nearest "]))
    # names the message may use for that argument (a mismatch may be blamed on either side)
    names = {"queries": ["queries", "keys"], "keys": ["keys"], "values": ["values", "keys"],
             "sample_weight": ["sample_weight"], "bandwidth": ["bandwidth"], "kernel": ["kernel"],
             "empty": ["empty"]}[arg]
    return args, names, arg


@FAST
@given(hostile_calls(), st.sampled_from(["pool", "loo_pool", "attention_weights"]))
def test_hostile_arguments_raise_a_clear_error(call, entry) -> None:
    args, names, arg = call
    if entry == "loo_pool":
        assume(arg != "queries")
        args.pop("queries")
    if entry == "attention_weights":
        assume(arg != "values")
        args.pop("values")
    _expect_error(names, getattr(nadaraya, entry), **args)


@FAST
@given(problems(), st.booleans())
def test_attention_weights_agree_with_the_plain_formula(prob, sparse) -> None:
    qq, kk, _vals, kernel, h, sw, empty = prob
    _, want, nan_rows, raise_rows, reliable = reference(
        qq, kk, np.zeros((np.shape(kk)[0], 1)), h, kernel, sw, empty)
    log_alone = kernel in LOG_KERNELS and nan_rows.any()  # only with every weight zero: refused
    assume(not log_alone)
    kw = dict(kernel=kernel, bandwidth=h, sample_weight=sw, empty=empty, sparse=sparse)
    if empty == "raise" and raise_rows.any():
        if reliable:
            _expect_error(["empty"], nadaraya.attention_weights, qq, kk, **kw)
        return
    got, warned = _call(nadaraya.attention_weights, qq, kk, **kw)
    dense = got.toarray() if sparse else got
    dense = np.asarray(dense, dtype=np.float64)
    assert dense.shape == want.shape
    rows = ~nan_rows
    if sparse:
        assert (dense[nan_rows] == 0).all()
    else:
        assert np.isnan(dense[nan_rows]).all()
    assert (dense[rows] >= 0).all()
    tol = 1e-3 if dense.dtype == np.float32 or getattr(qq, "dtype", None) == np.float32 else 1e-9
    np.testing.assert_allclose(dense[rows].sum(axis=1), 1.0, atol=tol)
    if reliable:
        np.testing.assert_allclose(dense[rows], want[rows], atol=tol, rtol=0)
        assert bool(warned) == bool(nan_rows.any())


def test_attention_weights_refuses_a_result_above_max_bytes() -> None:
    _expect_error(["max_bytes"], nadaraya.attention_weights, np.zeros(40), np.zeros(40), max_bytes=100)
    _expect_error(["max_bytes"], nadaraya.attention_weights, [0.0], [0.0], max_bytes=-1)
    _expect_error(["max_bytes"], nadaraya.attention_weights, [0.0], [0.0], max_bytes=float("nan"))


# --- select_bandwidth and the estimator -----------------------------------------------------


@st.composite
def regression_data(draw):
    d = draw(st.integers(1, 2))
    n = draw(st.sampled_from([0, 1, 2, 3, 5, 8, 12]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    X = rng.uniform(-3, 3, (n, d))
    if draw(st.booleans()) and n:  # ties and a constant feature
        X[:, -1] = np.round(X[:, -1]) if draw(st.booleans()) else 1.5
    y = np.sin(X[:, 0]) + rng.normal(0, 0.2, n) if n else np.empty(0)
    xs = 10.0 ** draw(st.sampled_from([0, 0, -300, -150, 150, 300]))
    ys = 10.0 ** draw(st.sampled_from([0, 0, -300, 160, 300]))
    X, y = X * xs, y * ys
    if draw(st.booleans()) and n:
        y = np.column_stack([y, -y])
    sw = draw(st.sampled_from([None, None, "ones", "zeros", "huge", "subnormal"]))
    if sw is not None:
        w = rng.uniform(0.5, 2, n)
        if sw == "zeros" and n:
            w[: n // 2] = 0.0
        sw = w * {"ones": 1.0, "zeros": 1.0, "huge": 1e307, "subnormal": 5e-322}[sw]
    return X, y, sw


def _cv_reference(X, y, h, kernel, sw):
    """Weighted mean squared leave-one-out residual, written plainly."""
    yy = y.reshape(len(y), -1)
    f, *_ = reference(X, X, yy, h, kernel, sw, "nan", loo=True)
    s = np.ones(len(y)) if sw is None else sw / sw.max()
    live = s > 0
    return float((s[live] * ((f[live] - yy[live]) ** 2).sum(axis=1)).sum() / s[live].sum())


@settings(max_examples=30)
@given(regression_data(), st.sampled_from(["gaussian", "laplacian", "epanechnikov", "constant", "tricube"]),
       st.sampled_from(["cv", "aicc", "CV", "bogus"]), st.booleans())
def test_select_bandwidth_returns_a_bandwidth_or_a_clear_error(data, kernel, method, per_feature) -> None:
    X, y, sw = data
    try:
        sel, _ = _call(nadaraya.select_bandwidth, X, y, method=method, kernel=kernel, per_feature=per_feature,
                       sample_weight=sw)
    except (ValueError, TypeError) as exc:
        text = str(exc)
        assert any(nm in text for nm in ("X", "y", "sample", "method", "feature", "bandwidth")), text
        return
    assert method in ("cv", "aicc")
    h = np.asarray(sel.bandwidth)
    assert h.shape == (X.shape[1],) and np.isfinite(h).all() and (h > 0).all(), h
    # a CV score beyond float64's range (targets near 1e160) is reported as inf, as documented
    beyond = method == "cv" and float(np.abs(np.asarray(y, float)).max()) > 1e150
    assert np.isfinite(sel.score) or kernel in COMPACT or beyond, sel.score
    # per feature, the score may belong to a neighbouring point: test_per_feature_score_is_at_the_bandwidth
    if method == "cv" and kernel in LOG_KERNELS and np.isfinite(sel.score) and not per_feature:
        ref = _cv_reference(X, y, h, kernel, sw)
        if np.isfinite(ref) and abs(np.log10(np.max(np.abs(X)) + 1e-320)) < 100:
            tol = 1e-12 * float(np.max(y**2))
            assert sel.score == pytest.approx(ref, rel=1e-6, abs=tol), (sel.score, ref)


@settings(max_examples=40)
@given(regression_data(), st.sampled_from([*KERNELS, "junk"]),
       st.sampled_from([1.0, 0.5, "scott", "silverman", "cv", 0.0, -1.0, np.inf, "0.5", "scot",
                        [1.0, 2.0, 3.0]]),
       st.sampled_from([*POLICIES, "bogus"]),
       st.sampled_from(["same", "shifted", "wrong-features", "nan", "inf", "empty", "none"]))
def test_estimator_fit_predict_agree_with_the_plain_formula(data, kernel, bandwidth, empty, queries) -> None:
    X, y, sw = data
    est = nadaraya.NadarayaWatson(kernel=kernel, bandwidth=bandwidth, empty=empty)
    try:
        _call(est.fit, X, y, sample_weight=sw)
    except (ValueError, TypeError) as exc:
        text = str(exc)
        assert any(nm in text for nm in ("X", "y", "sample", "kernel", "bandwidth", "empty", "feature",
                                          "array", "samples")), text
        return
    d = X.shape[1]
    Q = {"same": X, "shifted": X * 1.37 + 0.1 * np.max(np.abs(X)),
         "wrong-features": np.ones((2, d + 1)), "nan": np.full((2, d), np.nan),
         "inf": np.full((1, d), -np.inf), "empty": np.empty((0, d)),
         "none": np.full((1, d), None, dtype=object)}[queries]
    ref_out = None
    try:
        got, _ = _call(est.predict, Q)
    except (ValueError, TypeError) as exc:
        text = str(exc)
        assert queries not in ("same", "shifted") or empty == "raise", text
        assert any(nm in text for nm in ("X", "feature", "empty", "NaN", "complex", "sample")), text
        return
    assert queries in ("same", "shifted")
    ref_out, _, nan_rows, _, reliable = reference(Q, est.X_fit_, est.y_fit_.reshape(len(est.y_fit_), -1),
                                                  est.bandwidth_, kernel, est.sample_weight_, empty)
    _check_result(got, ref_out, est.y_fit_, kernel, nan_rows, reliable, np.float64, "predict")


X_SHARP = np.array([[0.82177012, -1.38127972], [-2.75415886, -2.90083419], [1.87962144, 2.47653346],
                    [0.63981465, 1.37697937], [0.26174995, 2.61043454]])
Y_SHARP = np.array([0.60769741, -0.36954847, 0.48768517, 0.55328843, 0.0095891])


def test_per_feature_score_is_at_the_bandwidth() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sel = nadaraya.select_bandwidth(X_SHARP, Y_SHARP, per_feature=True)
    ref = _cv_reference(X_SHARP, Y_SHARP, sel.bandwidth, "gaussian", None)
    assert sel.score == pytest.approx(ref, rel=1e-6)


def test_gradient_pass_score_is_the_exact_cv() -> None:
    """Found by hypothesis: at h = [0.0806, 551] the gradient pass scored 0.0904970 where the
    exact CV is 0.0919328 (an xfail until 924f1a8, which stopped the pass from counting each
    point's own, left-out term as an overflow)."""
    from nadaraya.bandwidth._objective import _Objective
    from nadaraya.kernels import get

    h = np.array([0.0805993465, 551.126711])
    obj = _Objective(X_SHARP, Y_SHARP[:, None], None, get("gaussian"), "cv", "auto")
    score, _ = obj.with_gradient(h)
    assert score == pytest.approx(_cv_reference(X_SHARP, Y_SHARP, h, "gaussian", None), rel=1e-9)


X_AICC = np.array([[0.07092975, 2.70278218], [-2.13504232, 2.69189668], [-1.12901129, -0.46004131],
                   [1.96621556, -0.54480518], [0.29756213, -2.83464532], [1.52107865, 0.22885988],
                   [-1.0216097, 1.73057222], [-1.18083102, -0.27901266]])
Y_AICC = np.array([0.07881471, -0.90348342, -1.0603716, 0.87139671, 0.29481878, 0.94364375, -0.59413662,
                   -0.72357739])


def test_per_feature_search_warns_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("error", RuntimeWarning)
        sel = nadaraya.select_bandwidth(X_AICC, Y_AICC, method="aicc", kernel="laplacian", per_feature=True)
    assert np.isfinite(sel.bandwidth).all()


@pytest.mark.parametrize("Q", [
    np.array([[0.5 + 1j]]), np.array([[1]], dtype="datetime64[D]"), np.array([[1]], dtype="timedelta64[s]"),
    np.array([["v1"]]),
], ids=["complex", "datetime", "timedelta", "text"])
def test_predict_refuses_non_real_X_naming_it(Q) -> None:
    model = nadaraya.NadarayaWatson(bandwidth=1.0).fit([[0.0], [1.0]], [0.0, 1.0])
    with pytest.raises(ValueError, match=r"\bX\b.*(real|numeric|as numbers)"):
        model.predict(Q)


# --- model files ------------------------------------------------------------------------------


def _model_bytes() -> bytes:
    model = nadaraya.NadarayaWatson(bandwidth=0.7).fit(np.arange(6.0)[:, None], np.arange(6.0) ** 2)
    with tempfile.TemporaryDirectory() as tmp:
        return model.save(Path(tmp) / "m.npz").read_bytes()


@settings(max_examples=40)
@given(st.one_of(
    st.binary(max_size=300).map(lambda b: ("random", b)),
    st.tuples(st.integers(0, 10**6), st.integers(0, 7)).map(lambda t: ("flip", t)),
    st.integers(0, 10**6).map(lambda i: ("truncate", i)),
))
def test_load_gives_a_model_or_model_file_error(mutation) -> None:
    how, arg = mutation
    data = bytearray(_MODEL)
    if how == "random":
        data = bytearray(arg)
    elif how == "flip":
        data[arg[0] % len(data)] ^= 1 << arg[1]
    else:
        data = data[: arg % len(data)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.npz"
        path.write_bytes(bytes(data))
        try:
            model = nadaraya.load(path)
        except ModelFileError as exc:
            assert "m.npz" in str(exc), str(exc)
            return
        got = model.predict([[2.5]])
        assert np.isfinite(got).all() or np.isnan(got).all()


_MODEL = _model_bytes()


# --- the command line -------------------------------------------------------------------------

CELLS = st.one_of(st.floats(-1e6, 1e6, allow_nan=False).map(repr), st.sampled_from(
    ["", "nan", "NA", "inf", "-inf", "1e400", "abc", "1,5", "0x10", "True", " 3 "]))


@st.composite
def csv_files(draw):
    names = draw(st.lists(st.sampled_from(["a", "b", "y", "a", "é", "x y"]), min_size=1, max_size=4))
    rows = draw(st.integers(0, 8))
    body = [",".join(names)]
    for i in range(rows):
        body.append(",".join(repr(float(i + j)) if draw(st.integers(0, 4)) else draw(CELLS)
                             for j in range(len(names))))
    text = "\n".join(body) + "\n"
    raw = text.encode("latin-1" if draw(st.integers(0, 6)) == 0 else "utf-8", errors="replace")
    return raw, names


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@settings(max_examples=40)
@given(csv_files(), st.sampled_from(["fit", "predict", "select"]),
       st.sampled_from(["a", "b", "a,b", "zz", "y"]), st.sampled_from(["y", "a", "q"]),
       st.sampled_from(["1", "scott", "cv", "0", "-1", "nan", "inf", "1,2", "abc", "1e-320"]),
       st.sampled_from(["gaussian", "epanechnikov", "junk", "constant"]),
       st.sampled_from(["out.csv", "out.tsv", "out.parquet", "out.xyz", "d.csv"]),
       st.booleans())
def test_cli_commands_succeed_or_fail_cleanly(csv, command, x, y, bandwidth, kernel, out, dropna) -> None:
    pytest.importorskip("pyarrow")
    from typer.testing import CliRunner

    from nadaraya.cli import app

    raw, _ = csv
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "d.csv").write_bytes(raw)
        (folder / "m.npz").write_bytes(_CLI_MODEL)
        before = _snapshot(folder)
        args = {
            "fit": ["fit", "d.csv", "-x", x, "-y", y, "--bandwidth", bandwidth, "--kernel", kernel,
                    "--model", out.replace("out.csv", "model.npz")],
            "predict": ["predict", "--model", "m.npz", "d.csv", "--out", out],
            "select": ["select", "d.csv", "-x", x, "-y", y, "--kernel", kernel, "-q"],
        }[command]
        files = (".csv", ".npz", ".tsv", ".parquet", ".xyz")
        args = [str(folder / a) if a.endswith(files) else a for a in args]
        if dropna:
            args.append("--dropna")
        result = CliRunner().invoke(app, args)
        after = _snapshot(folder)
        assert result.exit_code in (0, 2), (result.exit_code, result.output, repr(result.exception))
        for name in before:  # inputs byte-identical, whatever happened
            assert after.get(name) == before[name], name
        if result.exit_code == 2:
            lines = [s for s in result.output.splitlines() if s.strip()]
            assert len(lines) == 1 and lines[0].startswith("error: "), result.output
            assert set(after) == set(before), sorted(set(after) - set(before))
        elif command == "fit":
            nadaraya.load(folder / Path(args[args.index("--model") + 1]).name)
        elif command == "predict":
            assert Path(args[args.index("--out") + 1]).name in after


def _cli_model() -> bytes:
    model = nadaraya.NadarayaWatson(bandwidth=0.7).fit(np.arange(6.0)[:, None], np.arange(6.0))
    model.feature_names_in_ = np.asarray(["a"], dtype=object)
    model.target_names_ = ["y"]
    with tempfile.TemporaryDirectory() as tmp:
        return model.save(Path(tmp) / "m.npz").read_bytes()


_CLI_MODEL = _cli_model()


# --- the torch modules ------------------------------------------------------------------------


@settings(max_examples=40)
@given(st.sampled_from(KERNELS), st.integers(0, 4), st.integers(0, 5), st.integers(1, 2),
       st.sampled_from(["float64", "float32", "int64", "bool"]),
       st.sampled_from([1.3, 0.05, 1e-160, 1e160, 0.0, -1.0, float("inf"), [1.0, 2.0, 3.0]]),
       st.integers(0, 2**16))
def test_kernel_pooling_agrees_with_the_plain_formula(kernel, m, n, d, dtype, bandwidth, seed) -> None:
    torch = pytest.importorskip("torch")
    from nadaraya.nn import KernelPooling

    rng = np.random.default_rng(seed)
    q, k, v = rng.uniform(-3, 3, (m, d)), rng.uniform(-3, 3, (n, d)), rng.uniform(-5, 5, (n, 1))
    try:
        layer = KernelPooling(kernel, bandwidth=bandwidth, learnable=False).double()
    except (ValueError, TypeError) as exc:
        assert "bandwidth" in str(exc), str(exc)
        return
    tq, tk, tv = (torch.from_numpy(a).to(getattr(torch, dtype)) for a in (q, k, v))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = layer(tq, tk, tv)
    except (ValueError, TypeError) as exc:
        assert dtype in ("int64", "bool"), str(exc)
        assert any(nm in str(exc) for nm in ("queries", "keys", "values")), str(exc)
        return
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert dtype in ("float64", "float32") and tuple(out.shape) == (m, 1), (dtype, out.shape)
    if m == 0 or n == 0:
        return
    h = np.broadcast_to(np.asarray(bandwidth, float), (d,))
    want, _, nan_rows, _, reliable = reference(q, k, v, h, kernel, None, "nan")
    got = out.detach().double().numpy()
    _check_result(got, want, v, kernel, nan_rows, reliable,
                  np.float32 if dtype == "float32" else np.float64, "KernelPooling")


@settings(max_examples=40)
@given(st.sampled_from(["average", "additive", "dot"]), st.integers(0, 4), st.integers(0, 5),
       st.integers(1, 3), st.sampled_from(["float64", "float32", "int64", "bool", "complex128"]),
       st.sampled_from([1.0, 1e-300, 1e30, 1e300]), st.booleans(), st.integers(0, 2**16))
def test_attention_modules_give_weights_that_pool(module, m, n, d, dtype, scale, masked, seed) -> None:
    """AveragePooling, AdditiveAttentionPooling and DotProductAttentionPooling: the weights are
    non-negative, sum to one over the allowed keys (NaN rows where none is), and the output is
    weights @ values; hostile dtypes raise naming the argument, never another exception."""
    torch = pytest.importorskip("torch")
    from nadaraya.nn import AdditiveAttentionPooling, AveragePooling, DotProductAttentionPooling

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    layer = {"average": lambda: AveragePooling(), "additive": lambda: AdditiveAttentionPooling(d, hidden=4),
             "dot": lambda: DotProductAttentionPooling(d, dim=3)}[module]().double()
    q, k = rng.uniform(-3, 3, (m, d)) * scale, rng.uniform(-3, 3, (n, d)) * scale
    v = rng.uniform(-5, 5, (n, 2))
    tq, tk, tv = (torch.from_numpy(a).to(getattr(torch, dtype)) for a in (q, k, v))
    mask = torch.from_numpy(rng.random((m, n)) < 0.7) if masked else None
    kw = {} if mask is None else {"mask": mask}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out, w = layer(tq, tk, tv, return_weights=True, **kw)
    except (ValueError, TypeError) as exc:
        assert dtype not in ("float64",) or "mask" in str(exc), str(exc)
        assert any(nm in str(exc) for nm in ("queries", "keys", "values", "mask", "dtype")), str(exc)
        return
    assert not [x for x in caught if issubclass(x.category, RuntimeWarning)]
    assert tuple(out.shape) == (m, 2) and tuple(w.shape) == (m, n)
    wn, on = w.detach().double().numpy(), out.detach().double().numpy()
    allowed = np.ones((m, n), bool) if mask is None else mask.numpy()
    if module == "average" or scale <= 1e30:  # scores stay finite: the weights are defined
        empty_rows = ~allowed.any(axis=1) if n else np.ones(m, bool)
        live = ~empty_rows
        assert np.isnan(on[empty_rows]).all()
        assert (wn[live] >= 0).all() and (wn[live][~allowed[live]] == 0).all()
        np.testing.assert_allclose(wn[live].sum(axis=1), 1.0, rtol=1e-6)
        vv = tv.detach().double().numpy()
        tol = 1e-5 * (1 + np.abs(v).max(initial=0))
        np.testing.assert_allclose(on[live], wn[live] @ vv, rtol=1e-5, atol=tol)
    if module == "average":  # the plain mean of the allowed values
        for i in range(m):
            if allowed[i].any():
                np.testing.assert_allclose(on[i], v[allowed[i]].mean(axis=0), rtol=1e-6, atol=1e-9)


def test_kernel_pooling_names_a_text_bandwidth() -> None:
    pytest.importorskip("torch")
    from nadaraya.nn import KernelPooling

    with pytest.raises((ValueError, TypeError), match="bandwidth"):
        KernelPooling("gaussian", bandwidth="1")


def test_windowed_kd_tree_survives_overflowing_coordinates() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyWindowWarning)
        out = nadaraya.pool([[0.0, 1e150]], [[0.0, 0.0]], [0.0], kernel="biweight", bandwidth=1e-160,
                            backend="windowed", empty="nearest")
    assert out.tolist() == [0.0]
