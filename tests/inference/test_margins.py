"""Average marginal effects: against finite differences, a plainly written delta method, a
wild bootstrap refit loop, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya import NadarayaWatson
from nadaraya.inference.training import noise_variance


def _data(n: int = 100, d: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(3 * X[:, 0]) + X[:, -1] ** 2 + rng.normal(0, 0.2, n)
    return X, y


@pytest.mark.parametrize("params", [{"bandwidth": [0.15, 0.2]},
                                    {"bandwidth": [0.3, 0.3], "kernel": "epanechnikov"}])
def test_estimate_is_the_mean_of_finite_differences(params):
    X, y = _data()
    model = NadarayaWatson(**params).fit(X, y)
    for points in (None, X[:30] * 0.8 + 0.1):
        P = X if points is None else points
        eps = 1e-6
        fd = [np.mean((model.predict(P + eps * e) - model.predict(P - eps * e)) / (2 * eps))
              for e in np.eye(2)]
        got = model.average_gradient(points)
        np.testing.assert_allclose(got.estimate, fd, rtol=1e-6, atol=1e-8)


def test_local_linear_averages_the_local_slopes():
    # with degree >= 1 the gradient is the local polynomial's slope (not the fit's derivative)
    X, y = _data()
    model = NadarayaWatson(bandwidth=[0.25, 0.3], degree=1).fit(X, y)
    np.testing.assert_allclose(model.average_gradient(X[:40]).estimate, model.gradient(X[:40]).mean(axis=0),
                               rtol=1e-10)


def test_delta_se_is_the_plain_sandwich_of_the_weights():
    X, y = _data(n=80)
    model = NadarayaWatson(bandwidth=[0.15, 0.2]).fit(X, y)
    eps = 1e-6
    # the average gradient is c @ y with c the mean derivative of the attention weights
    W = model.attention_weights
    c = np.array([np.mean((W(X + eps * e) - W(X - eps * e)) / (2 * eps), axis=0) for e in np.eye(2)])
    sigma2 = np.empty(len(y))
    sigma2[model.fit_order_] = noise_variance(model, "heteroscedastic")[:, 0]  # back in the given order
    got = model.average_gradient()
    np.testing.assert_allclose(got.estimate, c @ y, rtol=1e-6)
    np.testing.assert_allclose(got.se, np.sqrt(c**2 @ sigma2), rtol=1e-5)
    homo = model.average_gradient(variance="homoscedastic")
    s2 = noise_variance(model, "homoscedastic")[0, 0]
    np.testing.assert_allclose(homo.se, np.sqrt(c**2 @ np.full(len(y), s2)), rtol=1e-5)


def test_bootstrap_agrees_with_a_refit_loop_and_the_delta_method():
    X, y = _data(n=100, d=1, seed=3)
    h = 0.12
    model = NadarayaWatson(bandwidth=h).fit(X, y)
    boot = model.average_gradient(method="bootstrap", n_boot=2000, random_state=0)
    delta = model.average_gradient()
    # a wild bootstrap written out: refit on y* = fit + sign * leave-one-out residual
    fits = model.predict(X)
    loo = np.array([NadarayaWatson(bandwidth=h).fit(np.delete(X, i, 0), np.delete(y, i)).predict(X[i:i + 1])
                    for i in range(len(y))])[:, 0]
    rng = np.random.default_rng(1)
    reps = []
    for _ in range(200):
        ystar = fits + (y - loo) * rng.choice([-1.0, 1.0], len(y))
        reps.append(NadarayaWatson(bandwidth=h).fit(X, ystar).gradient(X).mean(axis=0))
    loop_se = np.std(reps, axis=0, ddof=1)
    assert boot.method == "bootstrap"
    np.testing.assert_allclose(boot.estimate, delta.estimate, rtol=1e-12)
    np.testing.assert_allclose(boot.se, loop_se, rtol=0.15)  # 200 replicates: MC error about 5%
    np.testing.assert_allclose(boot.se, delta.se, rtol=0.3)


def test_delta_se_covers_in_a_simulation():
    # the truth the estimator targets given the design: the average gradient of the noiseless fit
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, (150, 1))
    truth = NadarayaWatson(bandwidth=0.15).fit(X, np.sin(3 * X[:, 0])).average_gradient(X).estimate[0]
    z = []
    for _ in range(40):
        y = np.sin(3 * X[:, 0]) + rng.normal(0, 0.3, 150)
        ame = NadarayaWatson(bandwidth=0.15).fit(X, y).average_gradient(X, variance="homoscedastic")
        z.append((ame.estimate[0] - truth) / ame.se[0])
    assert 0.7 < np.std(z) < 1.4 and abs(np.mean(z)) < 0.5


@pytest.mark.parametrize("kwargs, error, match", [
    ({"method": "jackknife"}, ValueError, "method"),
    ({"variance": "hc9"}, ValueError, "variance"),
    ({"method": "bootstrap", "n_boot": 1}, ValueError, "n_boot"),
    ({"X": np.zeros((2, 3))}, ValueError, "features"),
    ({"X": np.zeros((0, 2))}, ValueError, "0 sample|no rows"),
])
def test_bad_input(kwargs, error, match):
    X, y = _data(n=30)
    with pytest.raises(error, match=match):
        NadarayaWatson(bandwidth=[0.2, 0.2]).fit(X, y).average_gradient(**kwargs)
