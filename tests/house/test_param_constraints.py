"""Public doors validate: every scikit-learn estimator of nadaraya states what each parameter
accepts in ``_parameter_constraints``, and scikit-learn checks them once per ``fit``, with an
error that names the parameter and the value."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from typing import Any

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import check_param_validation

import nadaraya
from nadaraya import AttentionPoolingRegressor, ConditionalDensity, KernelDensity, NadarayaWatson
from nadaraya.kernels import get as get_kernel
from nadaraya.nn import MLKR

ESTIMATORS: list[type[BaseEstimator]] = [
    NadarayaWatson, KernelDensity, ConditionalDensity, MLKR, AttentionPoolingRegressor,
]
#: small settings that keep a fit cheap (a number, not a search; one epoch)
CHEAP: dict[type, dict[str, Any]] = {
    NadarayaWatson: dict(bandwidth=0.3), KernelDensity: dict(bandwidth=0.3),
    ConditionalDensity: dict(bandwidth=0.3), MLKR: dict(max_iter=2),
    AttentionPoolingRegressor: dict(epochs=1),
}


def _data(cls: type, d: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (24, d))
    return X, np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(24)


def _fit(model: BaseEstimator, X: np.ndarray, y: np.ndarray) -> BaseEstimator:
    return model.fit(X) if isinstance(model, KernelDensity) else model.fit(X, y)


def _every_estimator_class() -> set[type]:
    """Every BaseEstimator subclass defined in src/nadaraya, found by importing each module."""
    found: set[type] = set()
    for info in pkgutil.walk_packages(nadaraya.__path__, "nadaraya."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseEstimator) and obj.__module__.startswith("nadaraya"):
                found.add(obj)
    return found


def test_every_estimator_is_listed_here() -> None:
    assert _every_estimator_class() == set(ESTIMATORS)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_init_parameter_has_a_constraint(cls: type) -> None:
    params = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert set(cls._parameter_constraints) == params
    assert all(c != "no_validation" for c in cls._parameter_constraints.values())


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_sklearn_check_param_validation(cls: type) -> None:
    check_param_validation(cls.__name__, cls(**CHEAP[cls]))


BAD: list[tuple[type, str, Any]] = [
    (NadarayaWatson, "kernel", "foo"), (NadarayaWatson, "kernel", 3),
    (NadarayaWatson, "bandwidth", -0.5), (NadarayaWatson, "bandwidth", 0.0),
    (NadarayaWatson, "bandwidth", np.nan), (NadarayaWatson, "bandwidth", np.inf),
    (NadarayaWatson, "bandwidth", True), (NadarayaWatson, "bandwidth", "CV"),
    (NadarayaWatson, "bandwidth", "normal_reference"), (NadarayaWatson, "bandwidth", None),
    (NadarayaWatson, "empty", "zero"), (NadarayaWatson, "backend", "gpu"),
    (NadarayaWatson, "degree", 4), (NadarayaWatson, "degree", -1), (NadarayaWatson, "degree", 1.0),
    (NadarayaWatson, "degree", True), (NadarayaWatson, "var_types", "cx"), (NadarayaWatson, "var_types", ""),
    (NadarayaWatson, "var_types", 3), (NadarayaWatson, "categorical_kernel", "aitchison"),
    (NadarayaWatson, "device", 1.5), (NadarayaWatson, "tol", 0), (NadarayaWatson, "tol", 0.2),
    (NadarayaWatson, "tol", True), (NadarayaWatson, "tol", "1e-3"), (NadarayaWatson, "bandwidth_type", "nn"),
    (NadarayaWatson, "robust_iterations", -1), (NadarayaWatson, "robust_iterations", 101),
    (NadarayaWatson, "robust_iterations", 2.0), (NadarayaWatson, "robust_iterations", True),
    (KernelDensity, "kernel", "constant"), (KernelDensity, "kernel", "mean"),
    (KernelDensity, "bandwidth", "cv"),
    (KernelDensity, "bandwidth", -1.0), (KernelDensity, "var_types", "cq"), (KernelDensity, "tol", 0.5),
    (KernelDensity, "backend", "x"), (KernelDensity, "categorical_kernel", "wang"),
    (ConditionalDensity, "kernel", "average"), (ConditionalDensity, "bandwidth", "scott"),
    (ConditionalDensity, "bandwidth", 0), (ConditionalDensity, "dep_types", "z"),
    (ConditionalDensity, "var_types", 1), (ConditionalDensity, "backend", "cuda"),
    (MLKR, "n_components", 0), (MLKR, "n_components", 1.5), (MLKR, "init", "zeros"), (MLKR, "max_iter", 0),
    (MLKR, "tol", -1.0), (MLKR, "tol", np.inf), (MLKR, "random_state", "seed"), (MLKR, "device", 2.5),
    (AttentionPoolingRegressor, "module", "mlp"), (AttentionPoolingRegressor, "per_feature", "yes"),
    (AttentionPoolingRegressor, "hidden", 0), (AttentionPoolingRegressor, "epochs", -1),
    (AttentionPoolingRegressor, "lr", 0), (AttentionPoolingRegressor, "optimizer", "rmsprop"),
    (AttentionPoolingRegressor, "batch_size", 0), (AttentionPoolingRegressor, "dtype", "float16"),
    (AttentionPoolingRegressor, "random_state", 1.5), (AttentionPoolingRegressor, "bandwidth", 0.0),
    (AttentionPoolingRegressor, "kernel", "gauss"),
]


@pytest.mark.parametrize(("cls", "name", "value"), BAD, ids=lambda v: getattr(v, "__name__", repr(v)))
def test_a_bad_value_names_the_parameter_and_the_value(cls: type, name: str, value: Any) -> None:
    X, y = _data(cls)
    model = cls(**{**CHEAP[cls], name: value})
    pattern = rf"The '{name}' parameter of {cls.__name__} must be .* Got {re.escape(repr(value))} instead"
    with pytest.raises(InvalidParameterError, match=pattern) as caught:
        _fit(model, X, y)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)


GOOD: list[tuple[type, dict[str, Any], int]] = [
    (NadarayaWatson, dict(bandwidth=np.float64(0.3)), 1),
    (NadarayaWatson, dict(bandwidth=np.float32(0.3)), 1),
    (NadarayaWatson, dict(bandwidth=2), 1), (NadarayaWatson, dict(bandwidth=[0.3, 0.4]), 2),
    (NadarayaWatson, dict(bandwidth=np.array([0.3, 0.4])), 2),
    (NadarayaWatson, dict(bandwidth=np.array(0.3)), 1),
    (NadarayaWatson, dict(bandwidth="cv"), 1), (NadarayaWatson, dict(bandwidth="scott"), 1),
    (NadarayaWatson, dict(bandwidth=5, bandwidth_type="generalized_nn"), 1),
    (NadarayaWatson, dict(bandwidth=np.int64(5), bandwidth_type="adaptive_nn"), 1),
    (NadarayaWatson, dict(bandwidth=0.5, bandwidth_type="generalized_nn"), 1),
    (NadarayaWatson, dict(bandwidth=0.3, kernel=" Gaussian"), 1),
    (NadarayaWatson, dict(bandwidth=0.3, kernel="TopHat"), 1),
    (NadarayaWatson, dict(bandwidth=0.3, kernel=get_kernel("epanechnikov")), 1),
    (NadarayaWatson, dict(bandwidth=0.3, degree=np.int64(1), tol=np.float32(1e-3)), 1),
    (NadarayaWatson, dict(bandwidth=0.3, var_types="C", categorical_kernel="Li_Racine"), 1),
    (NadarayaWatson, dict(bandwidth=0.3, robust_iterations=np.int64(1), empty="nan"), 1),
    (KernelDensity, dict(bandwidth="Scott", kernel="Normal"), 1),
    (KernelDensity, dict(bandwidth=[0.2, 0.3]), 2),
    (KernelDensity, dict(bandwidth=np.float64(0.3), tol=0.1, var_types="cc"), 2),
    (ConditionalDensity, dict(bandwidth=[0.2, 0.2], kernel="Epanechnikov"), 1),
    (ConditionalDensity, dict(bandwidth="normal_reference", var_types="c", dep_types="C"), 1),
    (MLKR, dict(n_components=np.int64(1), max_iter=2, tol=0), 2),
    (MLKR, dict(init=np.eye(2)[:1], max_iter=2, random_state=np.random.RandomState(0)), 2),
    (AttentionPoolingRegressor, dict(epochs=0, bandwidth=np.float64(0.5), random_state=np.int64(3)), 1),
    (AttentionPoolingRegressor, dict(module="average", epochs=0, batch_size=4, optimizer="adam"), 1),
]


@pytest.mark.parametrize(("cls", "options", "d"), GOOD, ids=lambda v: getattr(v, "__name__", None))
def test_valid_edge_values_are_accepted(cls: type, options: dict[str, Any], d: int) -> None:
    X, y = _data(cls, d)
    model = cls(**options)
    model._validate_params()  # scikit-learn's check alone, then the whole fit
    assert _fit(model, X, y) is model


def test_a_torch_module_and_device_are_accepted() -> None:
    torch = pytest.importorskip("torch")
    from nadaraya.nn import KernelPooling

    X, y = _data(AttentionPoolingRegressor)
    model = AttentionPoolingRegressor(KernelPooling(bandwidth=0.5), epochs=0, device=torch.device("cpu"))
    assert model.fit(X, y).predict(X[:2]).shape == (2,)
    assert MLKR(max_iter=1, device=torch.device("cpu")).fit(X, y).components_.shape == (1, 1)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_the_parameters_are_validated_once_per_fit(cls: type, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = BaseEstimator._validate_params

    def counted(self: BaseEstimator) -> None:
        calls.append(type(self).__name__)
        real(self)

    monkeypatch.setattr(BaseEstimator, "_validate_params", counted)
    X, y = _data(cls)
    options = dict(CHEAP[cls])
    if cls is NadarayaWatson:  # a search, robustness refits, and a prediction: still one check
        options = dict(bandwidth="cv", robust_iterations=2)
    model = _fit(cls(**options), X, y)
    assert calls == [cls.__name__]
    if hasattr(model, "predict"):
        model.predict(X[:3])
    _fit(model, X, y)
    assert calls == [cls.__name__] * 2
