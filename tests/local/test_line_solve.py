"""The compiled degree-1 closed form in one feature against the 2 x 2 rule written out (the same
decisions; the fits to the rounding of a few operations, scaled by the system's condition)."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya.local.solve import RCOND, solve
from nadaraya.partials import Partials


def _plain(w, m1, m2, r0, r1, h):
    """The local line of each query from its sums, the equilibrated 2 x 2 rule, written out."""
    ok = w > 0
    s0 = np.where(ok, w, 1.0).astype(np.float64)
    m1 = m1.astype(np.float64) / s0 / h
    m2 = m2.astype(np.float64) / s0 / h**2
    r0 = r0.astype(np.float64) / s0[:, None]
    r1 = r1.astype(np.float64) / s0[:, None] / h
    est = np.full(r0.shape, np.nan)
    slope = np.full(r0.shape, np.nan)
    used = np.full(w.size, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.abs(m1) / np.sqrt(m2)
        regular = ok & (m2 > 0) & np.isfinite(m2) & ((1.0 - c) / (1.0 + c) >= RCOND)
        det = m2 - m1 * m1
        line = (m2[:, None] * r0 - m1[:, None] * r1) / det[:, None]
        rise = (r1 - m1[:, None] * r0) / det[:, None] / h
    est[regular], slope[regular], used[regular] = line[regular], rise[regular], 1
    flat = ok & ~regular
    est[flat], used[flat] = r0[flat], 0
    return est, slope, used


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_line_is_the_plain_rule(dtype):
    rng = np.random.default_rng(0)
    m, p, h = 3000, 2, 0.1
    w = rng.uniform(0.0, 2.0, m)
    w[::7] = 0.0
    m1 = rng.normal(size=m) * w * 0.1
    m2 = rng.uniform(0.0, 1.0, m) * w * 0.01
    m2[::13] = m1[::13] ** 2 / np.where(w[::13] > 0, w[::13], 1.0) * 0.01  # nearly singular
    m2[::17] = 0.0
    r0, r1 = rng.normal(size=(m, p)), rng.normal(size=(m, p))
    moments = (m1[:, None].astype(dtype), m2[:, None, None].astype(dtype), r1[:, None, :].astype(dtype))
    parts = Partials(np.zeros(m, dtype), w.astype(dtype), r0.astype(dtype), moments)
    fit = solve(parts, 1, np.array([h]))
    est, slope, used = _plain(*(a.astype(dtype) for a in (w, m1, m2, r0, r1)), h)
    np.testing.assert_array_equal(fit.degree, used)
    # the compiled rows multiply by reciprocals where the rule divides: a few roundings apart
    # (in float64, as both compute), times the condition 1 / (1 - c^2) of the equilibrated system
    wf, hh = w.astype(dtype).astype(np.float64), h
    s0 = np.where(wf > 0, wf, 1.0)
    c = np.abs(m1.astype(dtype) / s0 / hh) / np.sqrt(np.abs(m2.astype(dtype) / s0) / hh**2 + 1e-300)
    cond = np.where(used == 1, 1.0 / np.maximum(1.0 - np.minimum(c, 1.0) ** 2, 1e-300), 1.0)[:, None]
    size = np.abs(r0.astype(dtype)) / s0[:, None] + np.abs(r1.astype(dtype)) / s0[:, None] / hh
    for got, want, unit in ((fit.estimate, est, 1.0), (fit.slope[:, 0, :], slope, 1.0 / hh)):
        assert np.array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        bound = 32 * np.finfo(np.float64).eps * cond * (size * unit + np.abs(want))
        assert np.all(np.abs(got - want)[ok] <= bound[ok])
    assert {0, 1, -1} <= set(fit.degree.tolist())


def test_parabola_decides_as_the_general_solve():
    """Degree 2 in one feature: the closed form (with its Gershgorin shortcut) takes the same
    degree as the general solve's eigenvalues on every query, and the same fit to rounding,
    also for queries near and beyond the data's ends (nearly singular systems)."""
    from nadaraya.backends import reference
    from nadaraya.kernels import get
    from nadaraya.local import solve as solve_module

    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(0.0, 1.0, 300))[:, None]
    y = np.sin(6 * x) + rng.normal(0.0, 0.3, x.shape)
    q = np.linspace(-0.2, 1.2, 400)[:, None]
    h = np.array([0.06])
    parts = reference.partials(q, x, y, kernel=get("epanechnikov"), bandwidth=h, moments=2)
    fit = solve(parts, 2, h)
    m, p = parts.value.shape
    general = solve_module._general(parts, 2, h, np.full((m, p), np.nan), np.full((m, 1, p), np.nan),
                                    np.full(m, -1), np.full(m, np.nan))
    np.testing.assert_array_equal(fit.degree, general.degree)
    assert {2, -1} <= set(fit.degree.tolist())
    np.testing.assert_allclose(fit.estimate, general.estimate, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fit.inverse00, general.inverse00, rtol=1e-9, atol=1e-12)


def test_line_decides_as_the_general_solve():
    """Degree 1 in one feature: the closed form takes the same degree as the general solve's
    eigenvalues on every query, and the same fit to rounding, queries beyond the data's ends
    included (nearly singular systems)."""
    from nadaraya.backends import reference
    from nadaraya.kernels import get
    from nadaraya.local import solve as solve_module

    rng = np.random.default_rng(2)
    x = np.sort(rng.uniform(0.0, 1.0, 300))[:, None]
    y = np.column_stack([np.sin(6 * x[:, 0]), x[:, 0] ** 2]) + rng.normal(0.0, 0.3, (300, 2))
    q = np.linspace(-0.2, 1.2, 400)[:, None]
    h = np.array([0.05])
    for kernel in ("epanechnikov", "tricube", "gaussian"):
        parts = reference.partials(q, x, y, kernel=get(kernel), bandwidth=h, moments=1)
        fit = solve(parts, 1, h)
        m, p = parts.value.shape
        general = solve_module._general(parts, 1, h, np.full((m, p), np.nan), np.full((m, 1, p), np.nan),
                                        np.full(m, -1), np.full(m, np.nan))
        np.testing.assert_array_equal(fit.degree, general.degree)
        assert 1 in set(fit.degree.tolist())
        np.testing.assert_allclose(fit.estimate, general.estimate, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(fit.slope, general.slope, rtol=1e-8, atol=1e-10)
