"""The fused numba backend: its vectorisable exponential, kernel expressions, compile cache and threads."""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from nadaraya.backends._numba_exp import exp_fast, exp_fast32  # noqa: E402


@numba.njit
def _exp64(x, out):
    for i in range(x.size):
        out[i] = exp_fast(x[i])


@numba.njit
def _exp32(x, out):
    for i in range(x.size):
        out[i] = exp_fast32(x[i])


_SPECIAL = [-np.inf, np.inf, np.nan, 0.0, -0.0, 1e-300, -1e-300]


def test_exp_fast_float64_whole_range() -> None:
    x = np.concatenate([np.linspace(-800.0, 720.0, 400_001), np.random.default_rng(1).normal(0, 3, 10_000)])
    out = np.empty_like(x)
    _exp64(x, out)
    with np.errstate(over="ignore"):
        ref = np.exp(x)
    normal = (ref >= np.finfo(np.float64).tiny) & np.isfinite(ref)
    assert np.max(np.abs(out[normal] / ref[normal] - 1.0)) < 4e-16
    sub = ref < np.finfo(np.float64).tiny
    assert np.max(np.abs(out[sub] - ref[sub])) <= 5e-324  # one unit of the smallest subnormal
    assert np.all(out[x < -745.2] == 0.0)
    assert np.all(out[x > 709.79] == np.inf)


def test_exp_fast_float64_special_values() -> None:
    x = np.array(_SPECIAL)
    out = np.empty_like(x)
    _exp64(x, out)
    np.testing.assert_array_equal(out, np.exp(x))


def test_exp_fast_float32_whole_range() -> None:
    x = np.concatenate([np.linspace(-110.0, 90.0, 200_001), _SPECIAL]).astype(np.float32)
    out = np.empty_like(x)
    _exp32(x, out)
    assert out.dtype == np.float32
    with np.errstate(over="ignore"):
        exact = np.exp(x.astype(np.float64))
    normal = (exact >= np.finfo(np.float32).tiny) & (exact <= np.finfo(np.float32).max)
    assert np.max(np.abs(out[normal] / exact[normal] - 1.0)) < 3e-7
    assert np.all(out[x < -104.0] == 0.0)
    assert np.all(out[(x > 88.8) & np.isfinite(x)] == np.inf)
    np.testing.assert_array_equal(out[-len(_SPECIAL) :], np.exp(np.array(_SPECIAL, np.float32)))
