"""The constant kernel's one global local fit (constant.local_fit through pool and loo_pool) at
the edges: queries left without weight, and keys whose powers leave float64's range."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import nadaraya
from nadaraya.local import fit as local_fit_module


def both(call, monkeypatch):
    """``call()`` through the new path and through the per-query rule: (result or error, warnings)."""

    def run():
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                out = call()
            except Exception as err:  # the error is what is compared
                out = f"{type(err).__name__}: {err}"
        return out, [f"{m.category.__name__}: {m.message}" for m in seen]

    new = run()
    with monkeypatch.context() as mp:
        mp.setattr(local_fit_module, "_constant_fit", lambda *a: None)
        old = run()
    return new, old


def assert_same(new, old):
    assert new[1] == old[1]  # the same warnings
    assert not isinstance(new[0], str), new[0]
    assert not isinstance(old[0], str), old[0]
    np.testing.assert_allclose(new[0], old[0], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("empty", ["nan", "nearest", "mean"])
@pytest.mark.parametrize("case", ["one weighted key", "one key", "auto backend, n = 1000"])
def test_loo_pool_with_a_point_left_without_weight(
    degree: int, empty: str, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leave-one-out query with no other key of weight is far (shift -inf) for the constant
    kernel: the global fit's shared slope row must not stop the NaN written for it. The result
    and the warnings are the per-query rule's (the hook turned off)."""
    rng = np.random.default_rng(0)
    kw = {"kernel": "constant", "bandwidth": 0.1, "degree": degree, "empty": empty, "backend": "constant"}
    if case == "one weighted key":
        x = rng.uniform(0, 1, 8)
        w = np.zeros(8)
        w[3] = 1.0
    elif case == "one key":
        x, w = np.array([0.25]), None
    else:
        x = rng.uniform(0, 1, 1000)
        w = np.zeros(1000)
        w[3] = 1.0
        del kw["backend"]  # auto takes the constant backend at this size
    y = np.sin(6 * x)
    new, old = both(lambda: nadaraya.loo_pool(x, y, sample_weight=w, **kw), monkeypatch)
    assert_same(new, old)


@pytest.mark.parametrize("degree, scale", [(1, 1e200), (2, 1e100), (2, 1e-100)])
def test_keys_whose_powers_leave_the_range_get_the_exact_fit(degree: int, scale: float) -> None:
    """Keys spread over ``scale``: the per-query rule's moments in the keys' units overflow or
    underflow at the power 2 * degree, and it falls back to degree 0 with a warning. The one
    global fit is made about the keys' mean in orthogonal polynomials: it fits the full degree,
    and equals the plain least squares on the keys divided by ``scale`` (a fit that does not
    depend on the units)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, 40) * scale
    y = np.sin(6 * x / scale)
    q = np.linspace(-0.5, 1.5, 9) * scale
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = nadaraya.pool(q, x, y, kernel="constant", bandwidth=0.1, degree=degree, backend="constant")
    want = np.polyval(np.polyfit(x / scale, y, degree), q / scale)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12 * np.abs(y).max())
