"""NadarayaWatson as a scikit-learn regressor: the estimator checks, pipelines, errors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import nadaraya
from nadaraya import NadarayaWatson
from nadaraya.bandwidth import robust_scale, rule_of_thumb
from naive import naive_pool


def test_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    # The default bandwidth is chosen by leave-one-out CV, and leaving a row out keeps its
    # copies: integer sample weights cannot equal repeated rows. With a fixed bandwidth the
    # equivalence holds, and the second run checks it.
    check_estimator(
        NadarayaWatson(),
        expected_failed_checks={
            "check_sample_weight_equivalence_on_dense_data": "leave-one-out CV: a weight is not a copy"
        },
    )
    check_estimator(NadarayaWatson(bandwidth="scott"))


def test_three_lines():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, (50, 1))
    y = 2 * np.sin(X[:, 0]) + X[:, 0] + rng.normal(0, 0.5, 50)
    model = NadarayaWatson().fit(X, y)
    assert model.predict(X).shape == (50,)
    average = NadarayaWatson(kernel="constant").fit(X, y)
    assert average.score(X, y) == pytest.approx(0.0, abs=1e-12)  # average pooling predicts the mean
    assert model.score(X, y) > 0.6


def test_predict_equals_pool_with_resolved_bandwidth():
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(60, 3)), rng.normal(size=(60, 2))
    sw = rng.uniform(0.5, 2, 60)
    model = NadarayaWatson(kernel="biweight", bandwidth="silverman", empty="mean").fit(X, y, sample_weight=sw)
    assert model.bandwidth_.shape == (3,)
    Q = rng.normal(size=(10, 3))
    expect = naive_pool(Q, X, y, "biweight", model.bandwidth_, sw)
    got = model.predict(Q)
    ok = np.isfinite(expect).all(axis=1)
    np.testing.assert_allclose(got[ok], expect[ok], rtol=1e-12)
    np.testing.assert_allclose(got, nadaraya.pool(Q, X, y, kernel="biweight", bandwidth=model.bandwidth_,
                                                  sample_weight=sw, empty="mean"), rtol=1e-12)


def test_user_bandwidth_is_never_overwritten():
    model = NadarayaWatson(bandwidth=[0.5, 2.0]).fit(np.eye(2), [0.0, 1.0])
    assert model.bandwidth == [0.5, 2.0]
    np.testing.assert_array_equal(model.bandwidth_, [0.5, 2.0])
    assert model.backend_ in nadaraya.backends.available()
    assert isinstance(model.backend_reason_, str)


def test_rules_of_thumb_formulas():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 2)) * [1.0, 10.0]
    n, d = 400, 2
    A = np.minimum(X.std(axis=0, ddof=1), (np.percentile(X, 75, axis=0, method="inverted_cdf")
                                           - np.percentile(X, 25, axis=0, method="inverted_cdf")) / 1.349)
    np.testing.assert_allclose(robust_scale(X), A, rtol=1e-12)
    np.testing.assert_allclose(rule_of_thumb(X, "scott"), A * n ** (-1 / (d + 4)), rtol=1e-12)
    np.testing.assert_allclose(rule_of_thumb(X, "silverman"), A * (n * (d + 2) / 4) ** (-1 / (d + 4)),
                               rtol=1e-12)
    # rescaled between kernels by canonical bandwidths: Epanechnikov / Gaussian = 2.2138
    ratio = rule_of_thumb(X, "scott", kernel="epanechnikov") / rule_of_thumb(X, "scott")
    np.testing.assert_allclose(ratio, (15**0.2) / ((1 / (2 * np.sqrt(np.pi))) ** 0.2), rtol=1e-12)
    assert ratio[0] == pytest.approx(2.2138, abs=1e-4)


def test_weighted_rule_equals_repeated_rows():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 2))
    counts = rng.integers(0, 4, 30)
    np.testing.assert_allclose(rule_of_thumb(X, "scott", sample_weight=counts),
                               rule_of_thumb(np.repeat(X, counts, axis=0), "scott"), rtol=1e-12)


def test_zero_spread_feature_is_named():
    X = np.column_stack([np.arange(10.0), np.full(10, 3.0)])
    with pytest.raises(ValueError, match=r"feature 1 has zero spread.*pass a numeric bandwidth"):
        NadarayaWatson().fit(X, np.arange(10.0))
    # a given bandwidth works
    NadarayaWatson(bandwidth=1.0).fit(X, np.arange(10.0))


def test_pipeline_and_grid_search_over_bandwidth():
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(4)
    X = rng.uniform(0, 5, (120, 1))
    y = np.sin(2 * X[:, 0]) + rng.normal(0, 0.1, 120)
    pipe = make_pipeline(StandardScaler(), NadarayaWatson())
    search = GridSearchCV(pipe, {"nadarayawatson__bandwidth": [0.01, 0.1, 1.0, 10.0]}, cv=3).fit(X, y)
    assert search.best_params_["nadarayawatson__bandwidth"] == 0.1
    assert search.score(X, y) > 0.9


def test_pickle_round_trip():
    rng = np.random.default_rng(5)
    X, y = rng.normal(size=(40, 2)), rng.normal(size=40)
    model = NadarayaWatson(kernel="tricube", bandwidth=2.0).fit(X, y)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(X), model.predict(X))


def test_feature_names_and_multi_output():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": np.arange(10.0), "b": np.arange(10.0) ** 2})
    Y = np.column_stack([np.arange(10.0), -np.arange(10.0)])
    model = NadarayaWatson(bandwidth=1.0).fit(df, Y)
    assert list(model.feature_names_in_) == ["a", "b"]
    assert model.predict(df).shape == (10, 2)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"kernel": "gauss"}, r"'kernel' parameter of NadarayaWatson .* Got 'gauss' instead"),
        ({"bandwidth": "scot"}, r"'bandwidth' parameter of NadarayaWatson .* Got 'scot' instead"),
        ({"bandwidth": -2.0}, r"'bandwidth' parameter of NadarayaWatson must be a float in the range "
                              r"\(0\.0, inf\).* Got -2\.0 instead"),
        ({"bandwidth": [1.0, 2.0]}, r"one entry per feature \(1\)"),
        ({"empty": "skip"}, r"'empty' parameter of NadarayaWatson .* Got 'skip' instead"),
        ({"backend": "cuda"}, r"'backend' parameter of NadarayaWatson .* Got 'cuda' instead"),
    ],
)
def test_bad_parameters_raise_at_fit(params, match):
    with pytest.raises(ValueError, match=match):
        NadarayaWatson(**params).fit([[0.0], [1.0], [2.0]], [0.0, 1.0, 2.0])


@pytest.mark.parametrize(
    ("X", "y", "match"),
    [
        ([[0.0], [np.nan]], [0.0, 1.0], r"NaN"),
        ([[0.0], [1.0]], [0.0, np.inf], r"(?i)inf"),
        ([[0.0], [1.0]], [0.0, 1.0, 2.0], r"inconsistent numbers of samples: \[2, 3\]"),
        (np.zeros((0, 1)), [], r"0 sample"),
    ],
)
def test_bad_data_raise_at_fit(X, y, match):
    with pytest.raises(ValueError, match=match):
        NadarayaWatson(bandwidth=1.0).fit(X, y)


def test_wrong_number_of_features_at_predict():
    model = NadarayaWatson(bandwidth=1.0).fit(np.zeros((3, 2)) + np.arange(3)[:, None], [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match=r"X has 3 features, but NadarayaWatson is expecting 2"):
        model.predict(np.zeros((1, 3)))
