"""MLKR: the leave-one-out loss and gradient against a dense reference, the learned map, the transformer."""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest
from scipy.linalg import subspace_angles

from nadaraya import NadarayaWatson
from nadaraya.nn import MLKR
from nadaraya.nn._mlkr_loss import ROWS, TILE, loo_loss_grad


def dense_loss(A: np.ndarray, X: np.ndarray, Y: np.ndarray) -> float:
    """The leave-one-out MSE written out: the n x n kernel matrix, its diagonal zeroed."""
    Z = X @ A.T
    D = ((Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1)
    K = np.exp(-D)
    np.fill_diagonal(K, 0.0)
    P = K / K.sum(1, keepdims=True)
    R = P @ Y - Y
    return float((R * R).sum() / len(X))


def dense_grad(A: np.ndarray, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The chain rule pair by pair: dL/dK_ij = (2/n) r_i . (y_j - yhat_i) / W_i and
    dK_ij/dA = -2 K_ij A (x_i - x_j)(x_i - x_j)^T."""
    n = len(X)
    Z = X @ A.T
    K = np.exp(-((Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1))
    np.fill_diagonal(K, 0.0)
    W = K.sum(1)
    Yh = (K @ Y) / W[:, None]
    R = Yh - Y
    G = np.zeros_like(A)
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            dx = X[i] - X[j]
            dL_dK = 2.0 / n * R[i] @ (Y[j] - Yh[i]) / W[i]
            G += dL_dK * (-2.0 * K[i, j]) * np.outer(A @ dx, dx)
    return G


# n beyond one tile and not a multiple of the row block; one output and several; 2k < d (the
# gradient through C^T Z and C Z) and 2k >= d (through C X)
CASES = [(7, 3, 2, 1), (TILE + 2 * ROWS + 3, 7, 3, 1), (61, 4, 4, 3), (45, 7, 2, 2)]


@pytest.mark.parametrize(("n", "d", "k", "p"), CASES)
def test_loss_and_gradient_match_the_dense_reference(n: int, d: int, k: int, p: int) -> None:
    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, d)) + 5.0  # off-centre: the loss does not see a shift
    Y = rng.normal(size=(n, p))
    for scale in (0.2, 1.0, 3.0):  # wide to narrow kernels
        A = rng.normal(size=(k, d)) * scale
        loss, grad = loo_loss_grad(A, X, Y)
        want = dense_loss(A, X, Y)
        assert abs(loss - want) <= 1e-10 * want
        if n < 100:
            want_g = dense_grad(A, X, Y)
            assert np.max(np.abs(grad - want_g)) <= 1e-10 * np.max(np.abs(want_g))


def test_gradient_matches_finite_differences() -> None:
    rng = np.random.default_rng(1)
    for d in (4, 5):  # 2k = d and 2k < d
        X, Y = rng.normal(size=(50, d)), rng.normal(size=(50, 2))
        A = rng.normal(size=(2, d)) * 0.7
        _, grad = loo_loss_grad(A, X, Y)
        _check_finite_differences(A, X, Y, grad)


def _check_finite_differences(A: np.ndarray, X: np.ndarray, Y: np.ndarray, grad: np.ndarray) -> None:
    step = 1e-6
    for a in range(A.shape[0]):
        for b in range(A.shape[1]):
            E = np.zeros_like(A)
            E[a, b] = step
            fd = (dense_loss(A + E, X, Y) - dense_loss(A - E, X, Y)) / (2 * step)
            assert abs(fd - grad[a, b]) <= 1e-6 * np.max(np.abs(grad))


def test_torch_path_matches_the_numpy_path() -> None:
    torch = pytest.importorskip("torch")
    from nadaraya.nn._mlkr_torch import loo_loss_grad_torch

    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(90, 5)), rng.normal(size=(90, 2))
    A = rng.normal(size=(3, 5))
    loss, grad = loo_loss_grad(A, X, Y)
    Xc = torch.as_tensor(X - X.mean(0))
    lt, gt = loo_loss_grad_torch(torch.as_tensor(A), Xc, torch.as_tensor(Y))
    assert abs(float(lt) - dense_loss(A, X, Y)) <= 1e-10 * loss
    assert np.max(np.abs(gt.numpy() - grad)) <= 1e-10 * np.max(np.abs(grad))


def test_a_far_point_keeps_its_nearest_neighbour() -> None:
    """Every other weight underflows in exp(-|z_i - z_j|^2); the shift by the row's largest keeps the row."""
    X = np.array([[0.0], [1.0], [2.0], [100.0]])
    Y = np.array([[0.0], [1.0], [2.0], [5.0]])
    loss, grad = loo_loss_grad(np.array([[3.0]]), X, Y)
    assert np.isfinite(loss) and np.all(np.isfinite(grad))
    # point 3 pools point 2 alone; 0 and 2 pool 1; 1 pools 0 and 2 equally
    assert loss == pytest.approx((1 + 0 + 1 + 9) / 4, rel=1e-12)


def problem(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """y depends on x (10-D) only through a 2-D projection B x."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 10))
    B = np.linalg.qr(rng.normal(size=(10, 2)))[0].T
    Z = X @ B.T
    return X, Z[:, 0] + np.tanh(2 * Z[:, 1]) + 0.1 * rng.normal(size=n), B


def test_learns_the_projection_and_beats_raw_features() -> None:
    from sklearn.pipeline import make_pipeline

    X, y, B = problem(600, seed=0)
    train, test = slice(0, 300), slice(300, None)
    model = MLKR(n_components=2).fit(X[train], y[train])
    angles = np.degrees(subspace_angles(model.components_.T, B.T))
    assert np.max(angles) < 10.0
    pipe = make_pipeline(MLKR(n_components=2), NadarayaWatson(bandwidth="cv")).fit(X[train], y[train])
    raw = NadarayaWatson(bandwidth="cv").fit(X[train], y[train])
    err_pipe = np.mean((pipe.predict(X[test]) - y[test]) ** 2)
    err_raw = np.mean((raw.predict(X[test]) - y[test]) ** 2)
    assert err_pipe < 0.5 * err_raw


def test_loss_curve_is_the_loss_of_the_map() -> None:
    X, y, _ = problem(120, seed=3)
    model = MLKR(n_components=2, max_iter=15).fit(X, y)
    curve = model.loss_curve_
    assert len(curve) == model.n_iter_ + 1 <= 16
    assert all(b <= a for a, b in itertools.pairwise(curve))  # L-BFGS decreases each step
    loss, _ = loo_loss_grad(model.components_, X, (y - y.mean())[:, None])
    assert loss == pytest.approx(curve[-1], rel=1e-10)
    assert model.transform(X) == pytest.approx(X @ model.components_.T)


@pytest.mark.parametrize("init", ["pca", "identity", "random"])
def test_inits_and_multi_output(init: str) -> None:
    X, y, _ = problem(80, seed=4)
    Y = np.column_stack([y, 100.0 * np.sin(X[:, 0])])
    model = MLKR(n_components=3, init=init, max_iter=10, random_state=0).fit(X, Y)
    assert model.components_.shape == (3, 10)
    assert model.loss_curve_[-1] < model.loss_curve_[0]
    again = MLKR(init=model.components_, max_iter=1).fit(X, Y)
    assert again.loss_curve_[0] == pytest.approx(model.loss_curve_[-1], rel=1e-10)


def test_device_cpu_follows_the_same_path() -> None:
    pytest.importorskip("torch")
    X, y, _ = problem(100, seed=5)
    a = MLKR(n_components=2, max_iter=20).fit(X, y)
    b = MLKR(n_components=2, max_iter=20, device="cpu").fit(X, y)
    assert b.n_iter_ == a.n_iter_
    assert np.max(np.abs(b.components_ - a.components_)) <= 1e-6 * np.max(np.abs(a.components_))


def test_numpy_path_does_not_import_torch() -> None:
    code = ("import sys, numpy as np; from nadaraya.nn import MLKR; "
            "X = np.random.default_rng(0).normal(size=(30, 3)); MLKR(max_iter=2).fit(X, X[:, 0]); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_scikit_learn_conventions() -> None:
    from sklearn.base import clone
    from sklearn.utils.estimator_checks import check_estimator

    check_estimator(MLKR(max_iter=3))
    pd = pytest.importorskip("pandas")
    X, y, _ = problem(40, seed=6)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(10)])
    model = clone(MLKR(n_components=2, max_iter=3)).fit(frame, y)
    assert list(model.get_feature_names_out()) == ["mlkr0", "mlkr1"]
    assert list(model.feature_names_in_) == list(frame.columns)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_components": 0}, "n_components"),
        ({"n_components": 11}, "n_components"),
        ({"n_components": 2.5}, "n_components"),
        ({"n_components": True}, "n_components"),
        ({"max_iter": 0}, "max_iter"),
        ({"tol": -1.0}, "tol"),
        ({"tol": float("nan")}, "tol"),
        ({"init": "lda"}, "init"),
        ({"init": np.ones((2, 3))}, "init"),
        ({"init": np.full((2, 10), np.nan)}, "init"),
        ({"init": np.ones((2, 10)), "n_components": 3}, "n_components=3"),
    ],
)
def test_bad_parameters(params: dict, match: str) -> None:
    X, y, _ = problem(20, seed=7)
    with pytest.raises(ValueError, match=match):
        MLKR(**params).fit(X, y)


def test_bad_data() -> None:
    X, y, _ = problem(20, seed=8)
    with pytest.raises(ValueError):
        MLKR().fit(X[:1], y[:1])
    with pytest.raises(ValueError):
        MLKR().fit(X, y[:-1])
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError):
        MLKR().fit(bad, y)
    model = MLKR(max_iter=2).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.transform(X[:, :5])
