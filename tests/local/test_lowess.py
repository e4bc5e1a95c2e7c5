"""nadaraya.lowess against statsmodels' lowess, a plainly written O(n^2) LOWESS, and properties."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nadaraya import lowess

sm = pytest.importorskip("statsmodels.nonparametric.smoothers_lowess")
jit = pytest.importorskip("nadaraya.local._lowess_jit")
impl = pytest.importorskip("nadaraya.local.lowess")

TOL = 1e-10  # of max|y|, the bar


def _data(n: int, seed: int, ties: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2.0, 3.0, n)
    if ties:
        x = np.round(x, 1)
    y = np.sin(2.0 * x) + 0.3 * rng.standard_normal(n)
    y[rng.integers(0, n, n // 50 + 1)] += 5.0  # a few outliers, for the robustness passes
    return x, y


def _close(a: np.ndarray, b: np.ndarray, y: np.ndarray) -> None:
    assert a.shape == b.shape
    assert np.array_equal(np.isnan(a), np.isnan(b))
    ok = ~np.isnan(a)
    assert np.max(np.abs(a[ok] - b[ok]), initial=0.0) <= TOL * np.max(np.abs(y))


# --- a plain O(n^2) LOWESS -----------------------------------------------------------------------

def _plain(y: np.ndarray, x: np.ndarray, frac: float, it: int) -> np.ndarray:
    """LOWESS written out plainly: sort (np.argsort, as statsmodels), at each point the window of
    k = int(frac n) consecutive points found by a fresh scan (statsmodels' rule: the first start l
    with x_i <= (x[l] + x[l + k]) / 2), tricube weights over the farther end's distance times the
    robustness weights, the weighted least-squares line solved from its normal equations about
    x_i; then bisquare weights of the residuals over 6 median|residual|. Fitted values in the
    input's order."""
    order = np.argsort(x)
    xs, ys = x[order], y[order]
    n = xs.size
    k = min(max(int(frac * n + 1e-10), 2), n)
    r = np.ones(n)
    fit = np.empty(n)
    for _ in range(it + 1):
        for i in range(n):
            left = next((lft for lft in range(n - k) if xs[i] <= (xs[lft] + xs[lft + k]) / 2), n - k)
            win = slice(left, left + k)
            h = max(xs[i] - xs[left], xs[left + k - 1] - xs[i])
            w = (1.0 - (np.abs(xs[win] - xs[i]) / h) ** 3) ** 3 * r[win]
            if np.sum(w > 1e-12) < 2:
                fit[i] = ys[i]
                continue
            d = xs[win] - xs[i]
            a = np.array([[w.sum(), (w * d).sum()], [(w * d).sum(), (w * d * d).sum()]])
            b = np.array([(w * ys[win]).sum(), (w * d * ys[win]).sum()])
            fit[i] = np.linalg.solve(a, b)[0]
        e = np.abs(ys - fit)
        s = np.minimum(e / (6.0 * np.median(e)), 1.0)
        r = (1.0 - s**2) ** 2
    out = np.empty(n)
    out[order] = fit
    return out


# --- against statsmodels -------------------------------------------------------------------------

@pytest.mark.parametrize("frac", [0.05, 0.2, 0.5, 1.0])
@pytest.mark.parametrize("it", [0, 1, 2, 3, 4])
def test_statsmodels_on_random_data(frac: float, it: int) -> None:
    x, y = _data(700, seed=int(frac * 100) + it)
    _close(lowess(y, x, frac=frac, it=it), sm.lowess(y, x, frac=frac, it=it), y)
    _close(lowess(y, x, frac=frac, it=it, return_sorted=False),
           sm.lowess(y, x, frac=frac, it=it, return_sorted=False), y)


@pytest.mark.parametrize("it", [0, 1, 3])
@pytest.mark.parametrize("frac", [0.1, 0.6])
def test_statsmodels_at_xvals(it: int, frac: float) -> None:
    x, y = _data(600, seed=7 + it)
    rng = np.random.default_rng(it)
    xv = np.concatenate([rng.uniform(-3.0, 4.0, 150), x[:20], [x.min(), x.max(), 10.0, -10.0]])
    got = lowess(y, x, frac=frac, it=it, xvals=xv)
    assert got.shape == xv.shape
    _close(got, sm.lowess(y, x, frac=frac, it=it, xvals=xv), y)


@pytest.mark.parametrize("delta", [0.01, 0.2])
@pytest.mark.parametrize("ties", [False, True])
def test_statsmodels_with_delta(delta: float, ties: bool) -> None:
    x, y = _data(800, seed=3, ties=ties)
    d = delta * np.ptp(x)
    _close(lowess(y, x, frac=0.3, it=2, delta=d), sm.lowess(y, x, frac=0.3, it=2, delta=d), y)
    _close(lowess(y, x, frac=0.3, it=1, delta=d, return_sorted=False),
           sm.lowess(y, x, frac=0.3, it=1, delta=d, return_sorted=False), y)


@pytest.mark.parametrize("frac", [0.1, 0.4])
def test_statsmodels_on_ties(frac: float) -> None:
    """Same sort, same windows by position: equal on ties too."""
    x, y = _data(900, seed=11, ties=True)
    _close(lowess(y, x, frac=frac, it=2), sm.lowess(y, x, frac=frac, it=2), y)


def test_statsmodels_missing_and_sorted_shapes() -> None:
    x, y = _data(300, seed=5)
    x[[3, 50]] = np.nan
    y[[7, 90]] = np.inf
    xv = np.array([0.5, np.nan, -1.0, 2.0])
    for kw in ({}, {"return_sorted": False}, {"xvals": xv}, {"xvals": xv, "it": 0}):
        _close(lowess(y, x, frac=0.4, **kw), sm.lowess(y, x, frac=0.4, **kw), y[np.isfinite(y)])
    order = np.argsort(x)
    xs, ys = x[order], y[order]
    for kw in ({}, {"return_sorted": False}, {"xvals": np.sort(xv)}):
        want = sm.lowess(ys, xs, frac=0.4, is_sorted=True, **kw)
        _close(lowess(ys, xs, frac=0.4, is_sorted=True, **kw), want, y[np.isfinite(y)])


# --- against the plain LOWESS ----------------------------------------------------------------------

@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("frac,it", [(0.15, 0), (0.5, 2), (1.0, 1)])
def test_plain_lowess(ties: bool, frac: float, it: int) -> None:
    x, y = _data(240, seed=19, ties=ties)
    _close(lowess(y, x, frac=frac, it=it, return_sorted=False), _plain(y, x, frac, it), y)


@pytest.mark.parametrize("kind", ["clusters", "cauchy", "lognormal"])
def test_plain_lowess_on_uneven_x(kind: str) -> None:
    """Tight clusters and heavy tails: windows of very different radii side by side, where the
    moments' rounding bound sends some fits to the direct sums."""
    rng = np.random.default_rng(23)
    if kind == "clusters":
        spots = [(0.0, 1e-3), (1.0, 0.1), (5.0, 1e-4)]
        x = np.concatenate([c + s * rng.standard_normal(80) for c, s in spots])
    elif kind == "cauchy":
        x = rng.standard_cauchy(240)
    else:
        x = rng.lognormal(0.0, 2.0, 240)
    y = np.cos(np.log1p(np.abs(x))) * 100.0 + rng.standard_normal(x.size)
    for frac, it in [(0.25, 0), (0.6, 2)]:
        _close(lowess(y, x, frac=frac, it=it, return_sorted=False), _plain(y, x, frac, it), y)


def test_the_moments_serve_the_queries() -> None:
    """The sliding moments (not the direct sums) give the fits at size; equal to the direct."""
    x, y = _data(4000, seed=2)
    order = np.argsort(x)
    xs, ys = np.ascontiguousarray(x[order]), np.ascontiguousarray(y[order])
    k = impl._span(0.3, xs.size)
    fit, state = impl._regressions(xs, ys, np.ones_like(xs), impl._Windows(xs, xs, k, 0.0))
    assert np.mean(state == 0) > 0.99
    ref = _plain(y, x, 0.3, 0)[order]
    assert np.max(np.abs(fit - ref)) <= TOL * np.max(np.abs(y))


def test_far_from_the_origin_the_sums_stay_exact() -> None:
    """x = 1e6 + [0, 1]: statsmodels' sum w x about 0 loses digits; these fits keep them (against
    the plain fit about each point, in long double)."""
    rng = np.random.default_rng(4)
    x = 1e6 + rng.uniform(0.0, 1.0, 400)
    y = np.cos(5.0 * (x - 1e6)) + 0.1 * rng.standard_normal(400)
    order = np.argsort(x)
    xs, ys = x[order], y[order]
    k = impl._span(0.3, 400)
    ref = np.empty(400)
    for i in range(400):
        left = next((lft for lft in range(400 - k) if xs[i] <= (xs[lft] + xs[lft + k]) / 2), 400 - k)
        d = (xs[left:left + k] - xs[i]).astype(np.longdouble)
        h = max(xs[i] - xs[left], xs[left + k - 1] - xs[i])
        w = (1 - (np.abs(d) / h) ** 3) ** 3
        yy = ys[left:left + k].astype(np.longdouble)
        s0, s1, s2 = w.sum(), (w * d).sum(), (w * d * d).sum()
        t0, t1 = (w * yy).sum(), (w * d * yy).sum()
        ref[i] = float((s2 * t0 - s1 * t1) / (s0 * s2 - s1 * s1))
    got = lowess(ys, xs, frac=0.3, it=0, is_sorted=True)[:, 1]
    assert np.max(np.abs(got - ref)) <= 1e-11 * np.max(np.abs(y))


# --- properties -------------------------------------------------------------------------------------

@pytest.mark.parametrize("frac", [0.02, 0.3, 1.0])
def test_a_line_is_reproduced(frac: float) -> None:
    rng = np.random.default_rng(8)
    x = rng.uniform(-5.0, 5.0, 3000)
    y = 3.0 - 0.7 * x
    out = lowess(y, x, frac=frac, it=3)
    assert np.max(np.abs(out[:, 1] - (3.0 - 0.7 * out[:, 0]))) <= 1e-11 * np.max(np.abs(y))
    xv = np.linspace(-8.0, 8.0, 33)  # out to 3 units beyond the data: extrapolated lines
    at = lowess(y, x, frac=frac, it=3, xvals=xv)
    assert np.max(np.abs(at - (3.0 - 0.7 * xv))) <= 1e-11 * np.max(np.abs(y))


def test_an_outliers_influence_vanishes() -> None:
    rng = np.random.default_rng(3)
    x = np.sort(rng.uniform(0.0, 1.0, 300))
    y = np.sin(6.0 * x) + 0.1 * rng.standard_normal(300)
    clean = y.copy()
    clean[150] = np.sin(6.0 * x[150])
    moved = {}
    for it in (0, 2, 4):
        base = lowess(clean, x, frac=0.3, it=it, is_sorted=True)[:, 1]
        for big in (1e3, 1e6):
            dirty = y.copy()
            dirty[150] = big
            moved[it, big] = np.max(np.abs(lowess(dirty, x, frac=0.3, it=it, is_sorted=True)[:, 1] - base))
    assert moved[0, 1e3] > 10.0 and moved[0, 1e6] > 1e4  # without robustness: in proportion
    for big in (1e3, 1e6):
        assert moved[2, big] < 0.1  # below the noise whatever the outlier's size, and shrinking
        assert moved[4, big] < 0.005 and moved[4, big] < moved[2, big] / 5


def test_the_final_robustness_weights() -> None:
    """_smooth returns the weights of its last pass: ones for it = 0, else the bisquare of the
    previous pass's residuals over 6 median|residual|, written out here."""
    x, y = _data(500, seed=9)
    xs, ys = np.sort(x), y[np.argsort(x)]
    _, used0, _ = impl._smooth(xs, ys, xs, np.ones_like(xs), 0.3, 0, 0.0, False)
    assert np.array_equal(used0, np.ones_like(xs))
    _, used2, _ = impl._smooth(xs, ys, xs, np.ones_like(xs), 0.3, 2, 0.0, False)
    fit1 = lowess(ys, xs, frac=0.3, it=1, is_sorted=True)[:, 1]
    e = np.abs(ys - fit1)
    s = np.minimum(e / (6.0 * np.median(e)), 1.0)
    np.testing.assert_allclose(used2, (1.0 - s**2) ** 2, rtol=0, atol=1e-9)
    assert np.sum(used2 == 0.0) >= 5  # the outliers are cut


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # statsmodels' 0 / 0
def test_tiny_inputs() -> None:
    assert lowess([1.0], [0.0]).tolist() == [[0.0, 1.0]]
    np.testing.assert_allclose(lowess([1.0, 3.0], [0.0, 1.0], it=0)[:, 1], [1.0, 3.0])
    x = np.zeros(5)
    assert lowess(np.arange(5.0), x, return_sorted=False).tolist() == sm.lowess(
        np.arange(5.0), x, return_sorted=False).tolist()


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # statsmodels' 0 / 0
def test_windows_inside_a_tie_group() -> None:
    """A window of one repeated x has radius 0: no weight counts, the fit is the point's own y
    (NaN at xvals), and statsmodels' loop copies it to the point's ties."""
    rng = np.random.default_rng(6)
    x = np.repeat([0.0, 1.0, 2.0], 50)
    y = rng.standard_normal(150)
    got = lowess(y, x, frac=0.2, it=1, return_sorted=False)
    _close(got, sm.lowess(y, x, frac=0.2, it=1, return_sorted=False), y)
    assert len(np.unique(got)) == 3 and set(np.unique(got)) <= set(y)
    xv = np.array([0.0, 0.5, 1.0, 1.5])
    at = lowess(y, x, frac=0.2, it=0, xvals=xv)
    _close(at, sm.lowess(y, x, frac=0.2, it=0, xvals=xv), y)
    assert np.isnan(at).all()  # at 0.5 and 1.5 every window point sits at the radius: weight 0


# --- bad input --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,match", [
    ({"frac": 1.5}, "frac"), ({"frac": -0.1}, "frac"), ({"frac": "a"}, "frac"),
    ({"it": -1}, "it must"), ({"it": 1.5}, "it must"), ({"it": True}, "it must"),
    ({"delta": -1.0}, "delta"), ({"delta": float("nan")}, "delta"),
    ({"missing": "keep"}, "missing"), ({"xvals": [0.5], "delta": 0.1}, "delta"),
    ({"xvals": [[0.5]]}, "xvals"), ({"is_sorted": True}, "is_sorted"),
    ({"xvals": [0.9, 0.1], "is_sorted": True}, "xvals"),
])
def test_bad_options(kwargs: dict, match: str) -> None:
    x = np.array([0.3, 0.1, 0.2, 0.5])
    xs = np.sort(x) if "xvals" in kwargs and kwargs.get("is_sorted") else x
    with pytest.raises(ValueError, match=match):
        lowess(np.ones(4), xs, **kwargs)


def test_bad_data() -> None:
    with pytest.raises(ValueError, match="same length"):
        lowess(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="exog must be a vector"):
        lowess(np.ones(4), np.ones((2, 2)))
    with pytest.raises(ValueError, match="endog must be a vector"):
        lowess(np.ones((2, 2)), np.ones(4))
    with pytest.raises(ValueError, match="missing='raise'"):
        lowess([1.0, np.nan], [0.0, 1.0], missing="raise")
    with pytest.raises(ValueError, match="no observation"):
        lowess([np.nan], [0.0])
    with pytest.raises(TypeError, match="exog"):
        lowess([1.0], [object()])


def test_the_generated_shift_is_current() -> None:
    from nadaraya.local import _lowess_shift

    assert Path(_lowess_shift.__file__).read_text().endswith(_lowess_shift.source())
