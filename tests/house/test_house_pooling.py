"""The house (issue 13), the pooling rooms: one empty-window policy, one values check, fit validating once."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import nadaraya
import nadaraya._core.finish as _finish
from nadaraya._support.validation import is_dask

da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")


def _message(fn, *args, **kw) -> str:
    with pytest.raises(ValueError) as info:
        out = fn(*args, **kw)
        if hasattr(out, "compute"):
            out.compute(scheduler="synchronous")
    return str(info.value)


def test_dask_empty_window_error_names_the_kernel_and_bandwidth_as_numpy_does():
    """One empty-window report: the Dask chunk's error is the single-machine one, plus where."""
    keys, values, queries = np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0]), np.array([0.1, 9.0])
    kw = dict(kernel="epanechnikov", bandwidth=0.2, empty="raise")
    plain = _message(nadaraya.pool, queries, keys, values, **kw)
    dq, dk = da.from_array(queries, chunks=1), da.from_array(keys, chunks=2)
    lazy = _message(nadaraya.pool, dq, dk, values, **kw)
    assert plain.startswith("1 of 2 queries have no key with positive weight within the support of the "
                            "'epanechnikov' kernel (bandwidth [0.2])")
    assert lazy.startswith("1 of 1 queries in the chunk starting at row 1 have no key with positive weight "
                           "within the support of the 'epanechnikov' kernel (bandwidth [0.2])")
    assert plain.split(")", 1)[1] == lazy.split(")", 1)[1]  # the same advice


def test_dask_values_without_columns_get_the_numpy_error():
    """One values check: (n, 0) values are refused with the NumPy path's words on Dask too."""
    keys = np.arange(4.0)
    plain = _message(nadaraya.pool, keys, keys, np.zeros((4, 0)))
    lazy = _message(nadaraya.pool, keys, da.from_array(keys, chunks=2), da.zeros((4, 0), chunks=2))
    assert plain == lazy == "values has no columns (shape (4, 0)); at least one output is needed"


@pytest.mark.parametrize("empty", ["nearest", "mean"])
def test_one_fill_for_pool_attention_weights_and_dask(empty):
    """The same policy fills empty windows in pool, in attention_weights (as weights) and per Dask
    chunk: the weights' rows times the values are the predictions, and Dask gives the same."""
    rng = np.random.default_rng(3)
    keys, values = rng.uniform(0, 1, 40), rng.normal(size=40)
    queries = np.concatenate([rng.uniform(0, 1, 10), [-3.0, 4.0, 7.5]])
    kw = dict(kernel="biweight", bandwidth=0.05, empty=empty)
    got = nadaraya.pool(queries, keys, values, **kw)
    w = nadaraya.attention_weights(queries, keys, **kw)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(w @ values, got, rtol=1e-12)
    lazy = nadaraya.pool(da.from_array(queries, chunks=4), da.from_array(keys, chunks=9), values, **kw)
    np.testing.assert_allclose(lazy.compute(scheduler="synchronous"), got, rtol=1e-12)
    if empty == "mean":
        np.testing.assert_allclose(got[-3:], values.mean(), rtol=1e-12)
    else:
        np.testing.assert_allclose(got[-3:], values[[np.argmin(keys), np.argmax(keys), np.argmax(keys)]])


def test_fill_empty_leaves_raise_and_reports_rows_without_a_fill():
    out = np.zeros((4, 1))
    nearest = lambda rows: (np.ones((rows.size, 1)), rows != 2)  # noqa: E731
    left = _finish.fill_empty(out, np.array([1, 2]), "nearest", nearest=nearest, mean=nearest)
    assert left.tolist() == [2] and out[:, 0].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert _finish.fill_empty(out, np.array([3]), "raise", nearest=nearest, mean=nearest).size == 0
    _finish.fill_empty(out, np.array([3]), "nan", nearest=nearest, mean=nearest, nan=5.0)
    assert out[3, 0] == 5.0


def test_is_dask_does_not_need_dask_and_sees_dask_collections():
    assert is_dask(da.ones(3)) and is_dask(np.ones(2), da.ones(2).sum())
    assert not is_dask(np.ones(2), [1.0], None, 3.0)


@pytest.mark.parametrize("bandwidth", ["scott", "cv", 0.5])
def test_fit_validates_the_training_points_once(monkeypatch, bandwidth):
    """scikit-learn's validate_data is the only check of X at fit: the primitive (prepare) and the
    bandwidth rules and search trust it (before: as_points ran in rule_of_thumb, robust_scale,
    the selection's _validate and prepare)."""
    from nadaraya._support import validation as _validation

    calls = []
    real = _validation.as_points

    def counting(name, a, *args, **kw):
        calls.append(name)
        return real(name, a, *args, **kw)

    for name in ("nadaraya.pooling", "nadaraya.bandwidth.rules", "nadaraya.bandwidth.criteria",
                 "nadaraya.bandwidth.search", "nadaraya.estimator"):
        module = importlib.import_module(name)
        if hasattr(module, "as_points"):
            monkeypatch.setattr(module, "as_points", counting)
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (60, 2))
    y = X[:, 0] + rng.normal(0, 0.1, 60)
    model = nadaraya.NadarayaWatson(bandwidth=bandwidth).fit(X, y)
    assert calls == []
    assert (np.diff(model.X_fit_[:, 0]) >= 0).all()
    np.testing.assert_allclose(model.predict(X[:5]),
                               nadaraya.pool(X[:5], X, y, bandwidth=model.bandwidth_), rtol=1e-12)
