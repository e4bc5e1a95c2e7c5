"""Validate once: ``fit`` validates the training data once and keeps it validated; ``predict``
and ``gradient`` check only ``X``, once (counted by wrapping every validation function)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from nadaraya import NadarayaWatson

#: where each validation function is looked up at call time (module, name)
CHECKS = [
    ("nadaraya._core.call", "as_points"), ("nadaraya._core.call", "as_values"),
    ("nadaraya._core.call", "as_sample_weight"), ("nadaraya.local.job", "as_points"),
    ("nadaraya.local.job", "as_values"), ("nadaraya.local.job", "as_sample_weight"),
    ("nadaraya.estimator", "validate_data"), ("nadaraya.estimator", "_check_sample_weight"),
]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> collections.Counter:
    import importlib

    calls: collections.Counter = collections.Counter()
    for module, name in CHECKS:
        mod = importlib.import_module(module)
        real = getattr(mod, name)

        def wrapper(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(mod, name, wrapper)
    return calls


def _data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = np.column_stack([rng.uniform(0, 1, 80), rng.integers(0, 3, 80)])
    return X, np.sin(3 * X[:, 0]) + X[:, 1], rng.uniform(0.5, 2.0, 80)


@pytest.mark.parametrize("options", [
    dict(bandwidth=[0.2, 0.3]), dict(bandwidth=[0.2, 0.3], degree=1),
    dict(bandwidth=[0.2, 0.5], var_types="cu"), dict(bandwidth=[0.2, 0.5], var_types="cu", degree=1),
])
def test_predict_checks_only_x_once(counted: collections.Counter, options: dict) -> None:
    X, y, sw = _data(np.random.default_rng(0))
    model = NadarayaWatson(**options).fit(X, y, sample_weight=sw)
    assert counted["validate_data"] == 1 and counted["_check_sample_weight"] == 1  # fit: once each
    for _ in range(3):
        counted.clear()
        model.predict(X[:5])
        assert dict(counted) == {"validate_data": 1}, dict(counted)  # X once; the training data never
    counted.clear()
    model.gradient(X[:5])
    assert dict(counted) == {"validate_data": 1}, dict(counted)


def test_trusted_predictions_equal_the_checked_ones() -> None:
    """The trusted path is the same sums: predictions equal those of the public primitive, which
    checks everything (to rounding: fit keeps the training rows sorted, so the sums run in
    another order)."""
    import nadaraya

    X, y, sw = _data(np.random.default_rng(1))
    model = NadarayaWatson(bandwidth=[0.2, 0.3]).fit(X, y, sample_weight=sw)
    expected = nadaraya.pool(X[:7], X, y, kernel="gaussian", bandwidth=[0.2, 0.3], sample_weight=sw)
    np.testing.assert_allclose(model.predict(X[:7]), expected, rtol=1e-13)


def test_a_refit_is_not_served_from_the_old_training_data() -> None:
    X, y, _ = _data(np.random.default_rng(2))
    model = NadarayaWatson(bandwidth=[0.2, 0.3]).fit(X, y)
    first = model.predict(X[:3])
    model.fit(X, 2 * y)
    np.testing.assert_allclose(model.predict(X[:3]), 2 * first, rtol=1e-12)


def test_pickles_do_not_carry_the_kept_copy() -> None:
    import pickle

    X, y, _ = _data(np.random.default_rng(3))
    model = NadarayaWatson(bandwidth=[0.2, 0.3]).fit(X, y)
    model.predict(X[:2])
    assert "_trusted_fit" in model.__dict__
    loaded = pickle.loads(pickle.dumps(model))
    assert "_trusted_fit" not in loaded.__dict__
    np.testing.assert_array_equal(loaded.predict(X[:4]), model.predict(X[:4]))
