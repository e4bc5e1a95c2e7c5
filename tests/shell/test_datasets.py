"""The textbook data and the real data sets that ship with dependencies."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya import datasets


@pytest.mark.parametrize(("variant", "f"), [
    ("2sin+x", lambda x: 2 * np.sin(x) + x),
    ("2sin+x^0.8", lambda x: 2 * np.sin(x) + x**0.8),
])
def test_textbook_follows_the_formula(variant: str, f) -> None:
    s = datasets.textbook(n=50, noise=1.0, seed=3, variant=variant)
    assert s.x_train.shape == (50,) and (np.diff(s.x_train) >= 0).all()
    assert s.x_train.min() >= 0 and s.x_train.max() < 5
    np.testing.assert_allclose(s.x_val, np.arange(0, 5, 0.1))
    np.testing.assert_allclose(s.y_val, f(s.x_val))
    resid = s.y_train - f(s.x_train)
    assert 0.5 < resid.std() < 1.5  # noise of standard deviation 1
    np.testing.assert_allclose(datasets.textbook(noise=0.0, variant=variant).y_train,
                               f(datasets.textbook(noise=0.0, variant=variant).x_train))


def test_textbook_is_seeded() -> None:
    a, b, c = datasets.textbook(seed=1), datasets.textbook(seed=1), datasets.textbook(seed=2)
    np.testing.assert_array_equal(a.y_train, b.y_train)
    assert not np.array_equal(a.x_train, c.x_train)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"variant": "2sinx"}, "variant='2sinx'"),
    ({"n": 0}, "n must be a positive integer; got 0"),
    ({"n": 2.5}, "got 2.5"),
    ({"noise": -1.0}, "noise must be .* got -1.0"),
])
def test_textbook_bad_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        datasets.textbook(**kwargs)


def test_diabetes_is_sklearns() -> None:
    from sklearn.datasets import load_diabetes

    d, ref = datasets.diabetes(), load_diabetes()
    np.testing.assert_array_equal(d.X, ref.data)
    np.testing.assert_array_equal(d.y, ref.target)
    assert d.feature_names == list(ref.feature_names)


def test_engel_loads_offline() -> None:
    pytest.importorskip("statsmodels")
    e = datasets.engel()
    assert e.X.shape == (235, 1) and e.y.shape == (235,)
    assert np.isfinite(e.X).all() and (e.y > 0).all()
    # food spending rises with income
    assert np.corrcoef(e.X[:, 0], e.y)[0, 1] > 0.8


def test_reprs_are_short_and_name_shapes_not_values() -> None:
    d = datasets.diabetes()
    text = repr(d)
    assert "(442, 10)" in text and "'age'" in text and "'progression'" in text
    assert "array" not in text and len(text) < 200  # the dataclass default printed both arrays
    s = datasets.textbook(n=30)
    assert repr(s) == "Split('f(x) = 2 sin x + x', n_train=30, n_val=50)"
