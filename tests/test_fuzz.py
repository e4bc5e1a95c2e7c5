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

import io
import math
import tempfile
import warnings
import zipfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, note, settings
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
            if kernel in LOG_KERNELS or not others:
                nan_rows[i] = True
                raise_rows[i] = True
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
        qq = qq + 1e200 * scale / max(scale, 1.0)
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
    assert np.isnan(got).any(axis=1).tolist() == nan_rows.tolist() or not reliable and kernel in COMPACT, (
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


def _parzen_overflows(kernel, backend, qq, kk, h):
    """The known bug of test_parzen_far_from_every_key_warns_nothing: the reference backend's
    Parzen profile forms inf - inf once |u| passes about 4.7e153."""
    if kernel != "parzen" or backend != "reference":
        return False
    with np.errstate(all="ignore"):
        q = np.asarray(qq, float).reshape(np.shape(qq)[0], -1)
        k = np.asarray(kk, float).reshape(np.shape(kk)[0], -1)
        u = np.abs((q[:, None, :] - k[None, :, :]) / np.asarray(h, float))
    return bool((u > 1e150).any())


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
        kw = dict(kernel=kernel, bandwidth=h, sample_weight=sw, empty=empty, backend=backend,
                  known_bug=_parzen_overflows(kernel, backend, qq, kk, h))
        if empty == "raise" and raise_rows.any() and reliable:
            kw.pop("known_bug")
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


@pytest.mark.xfail(strict=True, reason="bug: the reference backend's Parzen profile evaluates "
                   "4/3 - 8a^2 + 8a^3 where both powers overflow (|u| > ~4.7e153): inf - inf, a RuntimeWarning "
                   "'invalid value encountered in add' from nadaraya.kernels._parzen (the result is right)")
def test_parzen_far_from_every_key_warns_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("ignore", EmptyWindowWarning)
        out = nadaraya.pool([1e200], [0.0], [0.0], kernel="parzen", bandwidth=0.3, backend="reference")
    assert np.isnan(out).all()
