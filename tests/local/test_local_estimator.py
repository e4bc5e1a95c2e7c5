"""NadarayaWatson with degree=, var_types=, categorical_kernel=: predictions, gradient, summary, files."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone

import nadaraya
from nadaraya import NadarayaWatson
from nadaraya.persist import ModelFileError, load


def _mixed_data(n: int = 80, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(0, 1, n), rng.integers(0, 3, n), rng.integers(0, 4, n)]).astype(float)
    y = np.sin(3 * X[:, 0]) + 0.5 * X[:, 1] - 0.2 * X[:, 2] + rng.normal(0, 0.1, n)
    return X, y


def _plain_weights(q: np.ndarray, X: np.ndarray, h: np.ndarray, vt: str, c: list[int]) -> np.ndarray:
    """Product kernel weights written out: Gaussian on 'c', Wang-van Ryzin on 'o',
    Aitchison-Aitken on 'u' (c = the training levels)."""
    w = np.ones(X.shape[0])
    for j, t in enumerate(vt):
        diff = X[:, j] - q[j]
        if t == "c":
            w *= np.exp(-0.5 * (diff / h[j]) ** 2)
        elif t == "o":
            lam = h[j]
            w *= np.where(diff == 0, 1 - lam, (1 - lam) / 2 * lam ** np.abs(diff))
        else:
            lam = h[j]
            w *= np.where(diff == 0, 1 - lam, lam / (c[j] - 1))
    return w


# ---------------------------------------------------------------------------------------------
# predictions against plainly written references


def test_mixed_degree0_equals_the_written_product_kernel():
    X, y = _mixed_data()
    h = np.array([0.15, 0.2, 0.3])
    model = NadarayaWatson(bandwidth=h, var_types="cuo").fit(X, y)
    Q = np.array([[0.3, 1.0, 2.0], [0.9, 0.0, 0.0], [0.5, 2.0, 3.0]])
    ws = [_plain_weights(q, X, h, "cuo", [0, 3, 4]) for q in Q]
    expect = [(w @ y) / w.sum() for w in ws]
    np.testing.assert_allclose(model.predict(Q), expect, rtol=1e-12)
    np.testing.assert_array_equal(model.levels_, [0, 3, 4])
    assert model.var_types_ == "cuo"


def test_degree1_mixed_equals_weighted_least_squares_written_in_the_test():
    X, y = _mixed_data(60, seed=3)
    h = np.array([0.2, 0.1, 0.4])
    model = NadarayaWatson(bandwidth=h, degree=1, var_types="cuo").fit(X, y)
    Q = np.array([[0.0, 1.0, 2.0], [0.55, 2.0, 1.0]])
    for q, got in zip(Q, model.predict(Q)):
        w = _plain_weights(q, X, h, "cuo", [0, 3, 4])
        A = np.column_stack([np.ones(len(X)), X[:, 0] - q[0]])  # local terms: continuous columns only
        beta = np.linalg.solve(A.T @ (w[:, None] * A), A.T @ (w * y))
        assert got == pytest.approx(beta[0], rel=1e-10, abs=1e-12)


def test_predict_equals_pool_with_the_same_settings():
    X, y = _mixed_data(50, seed=1)
    h = [0.2, 0.3, 0.4]
    model = NadarayaWatson(bandwidth=h, degree=1, var_types="cuo", categorical_kernel="li-racine").fit(X, y)
    Q = X[:7] + np.array([0.01, 0, 0])
    np.testing.assert_allclose(
        model.predict(Q),
        nadaraya.pool(Q, X, y, bandwidth=h, degree=1, var_types="cuo", categorical_kernel="li-racine",
                      empty="nearest"),
        rtol=1e-12,
    )


def test_unseen_category_follows_the_kernel_formula():
    # an unordered category never seen in training is "different" from every key: each key's
    # factor is lambda / (c - 1) with c the training levels, a constant that cancels, so the
    # prediction is the continuous-only Nadaraya-Watson estimate
    X, y = _mixed_data(70, seed=2)
    h = np.array([0.2, 0.3, 0.25])
    model = NadarayaWatson(bandwidth=h, var_types="cuo").fit(X, y)
    q = np.array([0.4, 7.0, 1.0])  # category 7 of column 1 is unseen
    w = np.exp(-0.5 * ((X[:, 0] - q[0]) / h[0]) ** 2)
    w *= np.where(X[:, 2] == q[2], 1 - h[2], (1 - h[2]) / 2 * h[2] ** np.abs(X[:, 2] - q[2]))
    assert model.predict(q[None, :])[0] == pytest.approx((w @ y) / w.sum(), rel=1e-12)


def test_rule_of_thumb_sets_continuous_bandwidths_and_the_documented_lambdas():
    from nadaraya.bandwidth import rule_of_thumb

    X, y = _mixed_data(90, seed=4)
    model = NadarayaWatson(bandwidth="silverman", var_types="cuo").fit(X, y)
    n, q = 90, 1
    t = min(n ** (-2 / (4 + q)), 0.5)
    assert model.bandwidth_[0] == pytest.approx(rule_of_thumb(X[:, :1], "silverman")[0], rel=1e-12)
    assert model.bandwidth_[1] == pytest.approx((3 - 1) / 3 * t)  # unordered: top of [0, (c-1)/c]
    assert model.bandwidth_[2] == pytest.approx(1.0 * t)  # ordered: top of [0, 1)
    li = NadarayaWatson(bandwidth="scott", var_types="cuo", categorical_kernel="li-racine").fit(X, y)
    assert li.bandwidth_[1:] == pytest.approx([t, t])


def test_cv_chooses_what_select_bandwidth_chooses():
    X, y = _mixed_data(60, seed=5)
    model = NadarayaWatson(bandwidth="cv", degree=1, var_types="cuo").fit(X, y)
    ref = nadaraya.select_bandwidth(X, y, method="cv", per_feature=True, degree=1, var_types="cuo")
    # the same search; the estimator's rows come in another order, so the scores differ in the
    # last bits, and where the criterion is flat to rounding the optimiser's last steps differ
    np.testing.assert_allclose(model.bandwidth_, ref.bandwidth, rtol=1e-6)
    assert model.selection_.score == pytest.approx(ref.score, rel=1e-12)
    assert 0 <= model.bandwidth_[1] <= 2 / 3 and 0 <= model.bandwidth_[2] < 1


@pytest.mark.parametrize("bandwidth", ["scott", "cv"])
def test_dask_fit_and_predict_equal_numpy(bandwidth):
    da = pytest.importorskip("dask.array")
    X, y = _mixed_data(60, seed=6)
    here = NadarayaWatson(bandwidth=bandwidth, degree=1, var_types="cuo").fit(X, y)
    there = NadarayaWatson(bandwidth=bandwidth, degree=1, var_types="cuo").fit(
        da.from_array(X, chunks=25), da.from_array(y, chunks=25))
    np.testing.assert_array_equal(there.levels_, here.levels_)
    np.testing.assert_allclose(there.bandwidth_, here.bandwidth_, rtol=1e-12)
    Q = X[:10] + np.array([0.03, 0, 0])
    np.testing.assert_allclose(there.predict(Q).compute(), here.predict(Q), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(there.gradient(Q), here.gradient(Q), rtol=1e-10, atol=1e-12)
    assert there.summary().r_squared == pytest.approx(here.summary().r_squared, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# gradient


@pytest.mark.parametrize(("d", "kernel"), [(1, "gaussian"), (2, "gaussian"), (2, "triweight")])
def test_gradient_degree0_equals_central_differences(d, kernel):
    rng = np.random.default_rng(d)
    X = rng.uniform(0, 2, (40, d))
    y = np.column_stack([np.sin(2 * X[:, 0]) + X[:, -1], np.cos(X[:, 0])])
    h = [0.3] * d if kernel == "gaussian" else [1.5] * d
    model = NadarayaWatson(bandwidth=h, kernel=kernel).fit(X, y)
    Q = rng.uniform(-0.2, 2.2, (6, d))
    g = model.gradient(Q)
    assert g.shape == (6, d, 2)
    eps = 1e-5
    for j in range(d):
        e = np.zeros(d)
        e[j] = eps
        fd = (model.predict(Q + e) - model.predict(Q - e)) / (2 * eps)
        np.testing.assert_allclose(g[:, j, :], fd, atol=1e-6)
    one = NadarayaWatson(bandwidth=h, kernel=kernel).fit(X, y[:, 0])
    np.testing.assert_allclose(one.gradient(Q), g[:, :, 0], rtol=1e-13)


def test_gradient_degree1_is_the_slope_of_a_linear_truth_even_at_the_edges():
    rng = np.random.default_rng(7)
    X = rng.uniform(0, 1, (50, 2))
    y = 2.0 + 3.0 * X[:, 0] - 0.5 * X[:, 1]
    model = NadarayaWatson(bandwidth=0.2, degree=1).fit(X, y)
    Q = np.array([[0.0, 0.0], [1.0, 1.0], [0.5, 0.3], [1.3, -0.2]])
    np.testing.assert_allclose(model.gradient(Q), [[3.0, -0.5]] * 4, rtol=0, atol=1e-10)
    np.testing.assert_allclose(model.predict(Q), 2.0 + 3.0 * Q[:, 0] - 0.5 * Q[:, 1], atol=1e-10)


def test_gradient_is_nan_in_categorical_columns():
    X, _ = _mixed_data(40)
    y = 1.5 * X[:, 0] + X[:, 1]
    model = NadarayaWatson(bandwidth=[0.3, 0.0, 0.2], degree=1, var_types="cuo").fit(X, y)
    g = model.gradient(X[:5])
    assert np.isnan(g[:, 1:]).all()
    np.testing.assert_allclose(g[:, 0], 1.5, atol=1e-10)


# ---------------------------------------------------------------------------------------------
# summary


def _r2_written_out(y, f, w):
    ybar = np.sum(w * y) / np.sum(w)
    num = np.sum(w * (y - ybar) * (f - ybar)) ** 2
    return num / (np.sum(w * (y - ybar) ** 2) * np.sum(w * (f - ybar) ** 2))


@pytest.mark.parametrize("weighted", [False, True])
def test_summary_r_squared_and_residual_variance(weighted):
    X, y = _mixed_data(70, seed=8)
    sw = np.random.default_rng(0).uniform(0.5, 2, 70) if weighted else None
    model = NadarayaWatson(bandwidth=[0.2, 0.1, 0.3], degree=1, var_types="cuo").fit(X, y, sample_weight=sw)
    s = model.summary()
    f = model.predict(X)
    w = np.ones(70) if sw is None else sw
    assert s.r_squared == pytest.approx(_r2_written_out(y, f, w), rel=1e-10)
    assert s.residual_variance == pytest.approx(np.sum(w * (y - f) ** 2) / np.sum(w), rel=1e-10)
    assert s.weighted is weighted
    assert (s.n, s.degree, s.var_types, s.levels) == (70, 1, "cuo", (0, 3, 4))
    assert s.bandwidth == (0.2, 0.1, 0.3) and s.criterion is None and s.bandwidth_from == "given"
    text = str(s)
    assert repr(s) == text
    assert "R-squared" in text and "unordered" in text and "local linear" in text
    assert max(len(line) for line in text.splitlines()) <= 78
    with pytest.raises(AttributeError):
        s.n = 3  # frozen


def test_summary_after_selection_and_for_several_outputs():
    X, y = _mixed_data(50, seed=9)
    Y = np.column_stack([y, -2 * y + X[:, 0]])
    model = NadarayaWatson(bandwidth="aicc").fit(X[:, :1], Y)
    s = model.summary()
    assert s.criterion == "aicc" and s.criterion_value == pytest.approx(model.selection_.score)
    f = model.predict(X[:, :1])
    expect = tuple(_r2_written_out(Y[:, k], f[:, k], np.ones(50)) for k in range(2))
    assert s.r_squared == pytest.approx(expect, rel=1e-10)
    assert model.summary() is s  # kept until the next fit
    model.fit(X[:, :1], Y[:, 0])
    assert model.summary() is not s


# ---------------------------------------------------------------------------------------------
# scikit-learn habits and persistence


def test_check_estimator_local_linear():
    from sklearn.utils.estimator_checks import check_estimator

    check_estimator(NadarayaWatson(bandwidth="scott", degree=1))


def test_attention_weights_of_a_local_model_are_refused_not_wrong():
    X, y = _mixed_data(20)
    model = NadarayaWatson(bandwidth=[0.3, 0.1, 0.2], var_types="cuo").fit(X, y)
    with pytest.raises(NotImplementedError, match="var_types='cuo'"):
        model.attention_weights(X[:2])


def test_clone_and_get_params_carry_the_new_parameters():
    model = NadarayaWatson(bandwidth=[0.2, 0.1], degree=2, var_types="cu", categorical_kernel="li-racine")
    params = model.get_params()
    assert (params["degree"], params["var_types"], params["categorical_kernel"]) == (2, "cu", "li-racine")
    twin = clone(model)
    assert twin.get_params() == params
    assert NadarayaWatson().set_params(degree=1).degree == 1


def test_save_and_load_round_trip_local_mixed_models(tmp_path: Path):
    X, y = _mixed_data(40)
    model = NadarayaWatson(bandwidth=[0.3, 0.0, 0.2], degree=1, var_types="cUo").fit(X, y)
    back = load(model.save(tmp_path / "m.npz"))
    assert (back.degree, back.var_types, back.categorical_kernel) == (1, "cUo", "classic")
    assert back.var_types_ == "cuo"
    np.testing.assert_array_equal(back.levels_, [0, 3, 4])
    assert back.levels_.dtype == np.int64
    Q = X[:9] + np.array([0.05, 0, 0])
    np.testing.assert_array_equal(back.predict(Q), model.predict(Q))
    np.testing.assert_array_equal(back.gradient(Q), model.gradient(Q))


def test_a_selected_mixed_model_round_trips(tmp_path: Path):
    X, y = _mixed_data(40, seed=11)
    model = NadarayaWatson(bandwidth="cv", var_types="cuo", categorical_kernel="li-racine").fit(X, y)
    back = load(model.save(tmp_path / "m.npz"))
    np.testing.assert_array_equal(back.bandwidth_, model.bandwidth_)
    assert back.selection_.score == model.selection_.score and back.categorical_kernel == "li-racine"
    assert str(back.summary()) == str(model.summary())


def _rewrite_settings(path: Path, change) -> None:
    with zipfile.ZipFile(path) as z:
        members = {name: z.read(name) for name in z.namelist()}
    settings = json.loads(members["settings.json"])
    change(settings, members)
    members["settings.json"] = json.dumps(settings).encode()
    with zipfile.ZipFile(path, "w") as z:
        for name, blob in members.items():
            z.writestr(name, blob)


def test_files_from_before_mixed_data_load_with_the_defaults(tmp_path: Path):
    X, y = _mixed_data(30)
    model = NadarayaWatson(bandwidth=0.4).fit(X, y)
    path = model.save(tmp_path / "old.npz")

    def strip(settings, members):
        for key in ("degree", "var_types", "categorical_kernel"):
            del settings["params"][key]
        del settings["fitted"]["var_types_"], settings["fitted"]["levels_"]
        del settings["arrays"]["levels_"], members["levels_.npy"]

    _rewrite_settings(path, strip)
    back = load(path)
    assert (back.degree, back.var_types, back.var_types_) == (0, None, "ccc")
    np.testing.assert_array_equal(back.levels_, [0, 0, 0])
    np.testing.assert_array_equal(back.predict(X[:4]), model.predict(X[:4]))


def test_a_file_with_wrong_levels_or_lambdas_is_refused(tmp_path: Path):
    X, y = _mixed_data(30)
    path = NadarayaWatson(bandwidth=[0.3, 0.1, 0.2], var_types="cuo").fit(X, y).save(tmp_path / "m.npz")

    def bad_degree(settings, members):
        settings["params"]["degree"] = 7

    _rewrite_settings(path, bad_degree)
    with pytest.raises(ModelFileError, match=r"degree.*got 7"):
        load(path)
    path = NadarayaWatson(bandwidth=[0.3, 0.1, 0.2], var_types="cuo").fit(X, y).save(tmp_path / "m2.npz")

    def bad_levels(settings, members):
        buf = io.BytesIO()
        np.lib.format.write_array(buf, np.array([0, 5, 4], dtype=np.int64))
        members["levels_.npy"] = buf.getvalue()

    _rewrite_settings(path, bad_levels)  # Aitchison-Aitken's c no longer that of the training data
    with pytest.raises(ModelFileError, match=r"levels_: must count .* \[0, 3, 4\]"):
        load(path)


# ---------------------------------------------------------------------------------------------
# hostile input


@pytest.mark.parametrize("degree", [-1, 1.5, "1", 4, True])
def test_bad_degree_is_refused_naming_it(degree):
    with pytest.raises(ValueError,
                       match=rf"'degree' parameter of NadarayaWatson .* Got {re.escape(repr(degree))} "):
        NadarayaWatson(bandwidth=0.5, degree=degree).fit([[0.0], [1.0], [2.0]], [0.0, 1.0, 2.0])


@pytest.mark.parametrize(
    ("var_types", "match"),
    [("cc", r"var_types='cc' has 2 letters for 3 columns"),
     ("cxu", r"'var_types' parameter of NadarayaWatson must be a str of the letters .* Got 'cxu' instead"),
     (3, r"'var_types' parameter of NadarayaWatson must be a str .* Got 3 instead")],
)
def test_bad_var_types_are_refused_naming_them(var_types, match):
    X, y = _mixed_data(20)
    with pytest.raises(ValueError, match=match):
        NadarayaWatson(bandwidth=[0.3, 0.1, 0.2], var_types=var_types).fit(X, y)


@pytest.mark.parametrize(
    ("bandwidth", "match"),
    [
        ([0.3, 0.9, 0.2], r"entry 0\.9 of feature 1 \(unordered, c = 3 categories\) .* \[0, 0\.666667\]"),
        ([0.3, 0.1, 1.0], r"bandwidth entry 1\.0 of feature 2 \(ordered\) .* \[0, 1\)"),
        ([0.3, -0.1, 0.2], r"bandwidth entry -0\.1 of feature 1 \(unordered"),
        ([0.0, 0.1, 0.2], r"bandwidth entry 0\.0 of feature 0 \(continuous\) must be positive"),
        (0.3, r"bandwidth=0\.3 must have one entry per column \(3, var_types='cuo'"),
        ([0.3, 0.1], r"bandwidth=\[0\.3, 0\.1\] must have one entry per column"),
    ],
)
def test_lambdas_out_of_range_are_refused_naming_them(bandwidth, match):
    X, y = _mixed_data(20)
    with pytest.raises(ValueError, match=match):
        NadarayaWatson(bandwidth=bandwidth, var_types="cuo").fit(X, y)


def test_bad_categorical_kernel_is_refused_naming_it():
    with pytest.raises(ValueError,
                       match=r"'categorical_kernel' parameter of NadarayaWatson .* Got 'aitken' instead"):
        NadarayaWatson(bandwidth=0.5, categorical_kernel="aitken").fit([[0.0], [1.0]], [0.0, 1.0])
