"""ConditionalDensity against statsmodels' KDEMultivariateConditional and plainly written sums."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from nadaraya import ConditionalDensity

sm_np = pytest.importorskip("statsmodels.nonparametric.api")


def _data(n: int = 60, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x1 = rng.normal(size=n)
    return {
        "x1": x1,
        "x2": rng.integers(0, 3, n).astype(float),
        "x3": rng.integers(0, 4, n).astype(float),
        "y1": x1 + 0.5 * rng.normal(size=n),
        "y2": rng.integers(0, 4, n).astype(float),
        "y3": rng.exponential(size=n),
    }


# (indep types, their columns, dep types, their columns)
CASES = [
    ("c", ["x1"], "c", ["y1"]),
    ("cu", ["x1", "x2"], "c", ["y1"]),
    ("co", ["x1", "x3"], "c", ["y1"]),
    ("c", ["x1"], "o", ["y2"]),
    ("c", ["x1"], "u", ["y2"]),
    ("cou", ["x1", "x3", "x2"], "cc", ["y1", "y3"]),
    ("u", ["x2"], "co", ["y1", "y2"]),
]


def _fixed(types: str, cont: float, cat: float) -> list[float]:
    return [cont if t == "c" else cat for t in types]


@pytest.mark.parametrize(("vt", "xc", "dt", "yc"), CASES)
def test_pdf_cdf_match_statsmodels(vt: str, xc: list[str], dt: str, yc: list[str]) -> None:
    d = _data()
    X, Y = np.column_stack([d[c] for c in xc]), np.column_stack([d[c] for c in yc])
    bx, by = _fixed(vt, 0.5, 0.3), _fixed(dt, 0.4, 0.2)
    ref = sm_np.KDEMultivariateConditional(
        endog=Y, exog=X, dep_type=dt, indep_type=vt, bw=np.array(by + bx), rng=0
    )
    cd = ConditionalDensity(bandwidth=bx + by, var_types=vt, dep_types=dt).fit(X, Y)
    shift = np.array([0.13 if t == "c" else 0.0 for t in vt])
    qx, qy = X[:25] + shift, Y[10:35]
    pdf, cdf = cd.pdf(qx, qy), cd.cdf(qx, qy)
    want_pdf, want_cdf = (
        ref.pdf(endog_predict=qy, exog_predict=qx),
        ref.cdf(endog_predict=qy, exog_predict=qx),
    )
    assert np.all(np.abs(pdf - want_pdf) <= 1e-8 * np.abs(want_pdf))
    assert np.all(np.abs(cdf - want_cdf) <= 1e-8 * np.abs(want_cdf))
    # the objectives of cv_ml and cv_ls are statsmodels' (its bandwidths list y first)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm_ml = ref.loo_likelihood(np.array(by + bx), func=np.log)
        sm_ls = ref.imse(np.array(by + bx))
    assert abs(-cd.loo_log_likelihood() - sm_ml) <= 1e-10 * abs(sm_ml)
    assert abs(cd.cv_ls_criterion() - sm_ls) <= 1e-10 * abs(sm_ls)


def _plain_loo_loglik(
    x: np.ndarray, xcat: np.ndarray, y: np.ndarray, h: float, lam: float, g: float
) -> float:
    """sum_i log [ sum_{j != i} K_h(x) L(xcat) K_g(y) / sum_{j != i} K_h(x) L(xcat) ], written out."""
    n = x.size
    c = np.unique(xcat).size
    total = 0.0
    for i in range(n):
        num = den = 0.0
        for j in range(n):
            if j == i:
                continue
            kx = np.exp(-0.5 * ((x[i] - x[j]) / h) ** 2) / (np.sqrt(2 * np.pi) * h)
            lx = 1 - lam if xcat[i] == xcat[j] else lam / (c - 1)
            ky = np.exp(-0.5 * ((y[i] - y[j]) / g) ** 2) / (np.sqrt(2 * np.pi) * g)
            num += kx * lx * ky
            den += kx * lx
        total += np.log(num / den)
    return total


def test_cv_ml_objective_is_the_plain_formula() -> None:
    d = _data(40, seed=3)
    X = np.column_stack([d["x1"], d["x2"]])
    cd = ConditionalDensity(bandwidth=[0.6, 0.2, 0.5], var_types="cu").fit(X, d["y1"])
    for h, lam, g in [(0.6, 0.2, 0.5), (0.3, 0.5, 0.2), (1.5, 0.05, 1.0)]:
        want = _plain_loo_loglik(d["x1"], d["x2"], d["y1"], h, lam, g)
        assert abs(cd.loo_log_likelihood([h, lam, g]) - want) <= 1e-10 * abs(want)


def test_cv_bandwidths_score_no_worse_than_statsmodels() -> None:
    rng = np.random.default_rng(4)
    x = rng.uniform(0, 1, 80)
    y = np.sin(3 * x) + (0.1 + 0.4 * x) * rng.standard_normal(80)
    ours = ConditionalDensity(bandwidth="cv_ml").fit(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = sm_np.KDEMultivariateConditional(
            endog=[y], exog=[x], dep_type="c", indep_type="c", bw="cv_ml", rng=0
        )
        theirs = -ref.loo_likelihood(ref.bw, func=np.log)
    assert ours.loo_log_likelihood() >= theirs - 1e-9 * abs(theirs)
    assert ours.loo_log_likelihood() >= ours.loo_log_likelihood(ref.bw[::-1])
    ls = ConditionalDensity(bandwidth="cv_ls").fit(x, y)
    start = ConditionalDensity(bandwidth="normal_reference").fit(x, y).bandwidth_
    assert ls.cv_ls_criterion() <= ls.cv_ls_criterion(start)


def test_li_racine_categorical_y_is_a_distribution() -> None:
    d = _data(50, seed=5)
    cd = ConditionalDensity(bandwidth=[0.5, 0.4], dep_types="o", categorical_kernel="li-racine").fit(
        d["x1"], d["y2"]
    )
    q = np.linspace(-1, 1, 7)
    levels = np.unique(d["y2"])
    probs = np.stack([cd.pdf(q, np.full(q.size, lv)) for lv in levels])
    np.testing.assert_allclose(probs.sum(axis=0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(cd.cdf(q, np.full(q.size, levels[-1])), 1.0, rtol=1e-12)
    np.testing.assert_allclose(cd.cdf(q, np.full(q.size, levels[1])), probs[:2].sum(axis=0), rtol=1e-12)


def test_score_is_the_total_log_density_and_clone_keeps_the_parameters() -> None:
    from sklearn.base import clone

    d = _data(30, seed=6)
    cd = ConditionalDensity(bandwidth=[0.5, 0.4], var_types="c").fit(d["x1"], d["y1"])
    total = float(np.sum(np.log(cd.pdf(d["x1"], d["y1"]))))
    assert cd.score(d["x1"], d["y1"]) == pytest.approx(total, rel=1e-12)
    assert clone(cd).get_params() == cd.get_params()
