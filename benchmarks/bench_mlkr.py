"""MLKR: nadaraya.nn.MLKR against metric-learn's MLKR, ratios taken in this run (issue 34).

The problem: x ~ N(0, I_10), y = z1 + tanh(2 z2) + sin(z3) + N(0, 0.1^2) with z = B x for a random
orthonormal B (3 x 10): y depends on a 3-D projection of 10-D x.

- W1, n = 1000, d = 10, k = 3, max_iter = 100 (tol 1e-9 for both): metric-learn's MLKR (run
  once) against nadaraya's (best of three), the ratio (target: at least 20x) and the leave-one-out
  MSE of both learned maps, computed the same way (target: nadaraya's no worse). Beside the
  wall-clock ratio: the ratio per loss evaluation and the ratio of CPU times (all threads; on a
  shared machine the wall clock also counts the time others held the cores). metric-learn
  0.7 calls scikit-learn's ``check_array``/``check_X_y`` with ``force_all_finite``, which
  scikit-learn >= 1.8 renamed ``ensure_all_finite``: this script monkeypatches those two names
  in ``metric_learn._util`` to translate the keyword (the one-line shim), nothing else.
- The gradient, measured: one loss-and-gradient evaluation at n = 1000 and n = 4000 by the analytic
  formula (numba, the library's default; torch on the CPU, its ``device`` path) and by torch
  autograd over blocks of rows (each block's loss backpropagated in turn, memory bounded).
- W2, n = 2e4, d = 10, k = 3, max_iter = 50 (tol 0, so that it runs all 50): nadaraya's time,
  run once (target: at most 60 s).
- W3, the learned metric's test error: ``make_pipeline(MLKR(k=3), NadarayaWatson(bandwidth="cv"))``
  against ``NadarayaWatson(bandwidth="cv")`` on the raw features, trained on W1's 1000 points,
  tested on 2000 more (target: at most 0.7x).

    python benchmarks/bench_mlkr.py           # full sizes
    python benchmarks/bench_mlkr.py --quick   # small sizes, a smoke run
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

from _timing import timed
from nadaraya import NadarayaWatson
from nadaraya.nn import MLKR
from nadaraya.nn._mlkr_loss import loo_loss_grad


def row(name: str, impl_name: str, seconds: float, note: str = "") -> None:
    print(f"{name:<22}{impl_name:<40}{seconds:>10.4f}  {note}", flush=True)


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    B = np.linalg.qr(np.random.default_rng(12345).normal(size=(10, 3)))[0].T
    X = rng.normal(size=(n, 10))
    Z = X @ B.T
    return X, Z[:, 0] + np.tanh(2 * Z[:, 1]) + np.sin(Z[:, 2]) + 0.1 * rng.normal(size=n)


def metric_learn_mlkr():  # type: ignore[no-untyped-def]
    """metric-learn's MLKR class, with the keyword shim for scikit-learn >= 1.8 applied."""
    import metric_learn._util as util
    from metric_learn import MLKR as ML_MLKR

    def renamed(fn):  # type: ignore[no-untyped-def]
        def call(*args, force_all_finite=True, **kwargs):  # type: ignore[no-untyped-def]
            return fn(*args, ensure_all_finite=force_all_finite, **kwargs)
        return call

    util.check_array = renamed(util.check_array)
    util.check_X_y = renamed(util.check_X_y)
    return ML_MLKR


def autograd_loss_grad(
    A: np.ndarray, X: np.ndarray, Y: np.ndarray, rows: int = 256
) -> tuple[float, np.ndarray]:
    """The loss by blocks of rows with torch, the gradient by autograd block by block."""
    import torch

    Xc = torch.as_tensor(X - X.mean(0))
    Yt = torch.as_tensor(Y)
    At = torch.as_tensor(A).requires_grad_(True)
    n, total = len(X), 0.0
    for q0 in range(0, n, rows):
        q1 = min(n, q0 + rows)
        Z = Xc @ At.T
        S = -torch.cdist(Z[q0:q1], Z).square()
        idx = torch.arange(q1 - q0)
        S = S.index_put((idx, idx + q0), torch.tensor(-torch.inf, dtype=S.dtype))
        P = torch.softmax(S, dim=1)
        part = ((P @ Yt - Yt[q0:q1]) ** 2).sum() / n
        part.backward()
        total += float(part.detach())
    return total, At.grad.numpy()


def gradients(sizes: tuple[int, ...]) -> None:
    from nadaraya.nn._mlkr_torch import torch_evaluator

    rng = np.random.default_rng(3)
    for n in sizes:
        X, y = data(n, seed=5)
        Y = (y - y.mean())[:, None]
        A = rng.normal(size=(3, 10)) * 0.5
        name = f"grad n={n}"
        ev = torch_evaluator(X, Y, "cpu")
        t_nb, (_, g_nb) = timed(lambda: loo_loss_grad(A, X, Y), repeat=3)  # noqa: B023
        t_th, (_, g_th) = timed(lambda: ev(A), repeat=3)  # noqa: B023
        t_ag, (_, g_ag) = timed(lambda: autograd_loss_grad(A, X, Y), repeat=3)  # noqa: B023
        diff = max(np.max(np.abs(g_th - g_nb)), np.max(np.abs(g_ag - g_nb))) / np.max(np.abs(g_nb))
        row(name, "analytic, numba (default)", t_nb)
        row(name, "analytic, torch cpu (device path)", t_th, f"{t_th / t_nb:.1f}x numba's time")
        row(name, "torch autograd over row blocks", t_ag,
            f"{t_ag / t_nb:.1f}x numba's time; gradients agree to {diff:.1e}")


def w1(ML, Xtr: np.ndarray, ytr: np.ndarray, it1: int, name: str) -> None:  # type: ignore[no-untyped-def]
    """metric-learn's MLKR against ours: time, evaluations, and the LOO MSE of both maps."""
    import nadaraya.nn._mlkr_loss as loss_module

    theirs = ML(n_components=3, init="pca", max_iter=it1, tol=1e-9, random_state=0)
    c0 = time.process_time()
    t_ml, _ = timed(lambda: theirs.fit(Xtr, ytr), repeat=1)
    cpu_ml = time.process_time() - c0
    calls = [0]
    plain = loss_module.loo_loss_grad

    def counted(*args):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return plain(*args)

    def fit() -> MLKR:
        calls[0] = 0  # the evaluations of the last fit
        return MLKR(n_components=3, max_iter=it1, tol=1e-9).fit(Xtr, ytr)

    loss_module.loo_loss_grad = counted
    try:
        t_nd, ours = timed(fit, repeat=3)
    finally:
        loss_module.loo_loss_grad = plain
    evals = calls[0]
    c0 = time.process_time()
    fit()
    cpu_nd = time.process_time() - c0
    Y = (ytr - ytr.mean())[:, None]
    loo_ml = loo_loss_grad(theirs.components_, Xtr, Y)[0]
    loo_nd = loo_loss_grad(ours.components_, Xtr, Y)[0]
    row(name, f"metric-learn MLKR (shimmed), {it1} it", t_ml,
        f"{theirs.n_iter_} loss evaluations; LOO MSE {loo_ml:.4f}")
    per_eval = (t_ml / theirs.n_iter_) / (t_nd / max(1, evals))
    row(name, "nadaraya.nn.MLKR", t_nd,
        f"{t_ml / t_nd:.0f}x metric-learn (target >= 20x); {ours.n_iter_} iterations, {evals} loss "
        f"evaluations ({per_eval:.0f}x per evaluation; CPU time {cpu_ml:.1f} s against {cpu_nd:.2f} s, "
        f"{cpu_ml / cpu_nd:.0f}x); LOO MSE {loo_nd:.4f} "
        f"({'no worse' if loo_nd <= loo_ml * (1 + 1e-6) else 'WORSE'} than metric-learn's)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    n1, it1, n2, it2, n_test = (300, 10, 2000, 5, 500) if args.quick else (1000, 100, 20000, 50, 2000)
    X, y = data(n1 + n_test)
    Xtr, ytr, Xte, yte = X[:n1], y[:n1], X[n1:], y[n1:]
    MLKR(n_components=3, max_iter=2).fit(Xtr[:50], ytr[:50])  # compile
    print(f"{'workload':<22}{'implementation':<40}{'seconds':>10}  note")

    name = f"W1 n={n1} k=3"
    try:
        ML = metric_learn_mlkr()
    except ImportError:
        print(f"{name:<22}metric-learn is not installed (pip install metric-learn): W1 skipped", flush=True)
    else:
        w1(ML, Xtr, ytr, it1, name)

    gradients((300,) if args.quick else (1000, 4000))

    X2, y2 = data(n2, seed=1)
    t0, c0 = time.perf_counter(), time.process_time()
    big = MLKR(n_components=3, max_iter=it2, tol=0.0).fit(X2, y2)
    t_big, cpu_big = time.perf_counter() - t0, time.process_time() - c0
    row(f"W2 n={n2:.0e} k=3", f"nadaraya.nn.MLKR, {it2} it", t_big,
        f"run once; {big.n_iter_} iterations (target <= 60 s); CPU time {cpu_big:.1f} s on "
        f"{numba.get_num_threads()} numba threads")

    from sklearn.pipeline import make_pipeline

    t0 = time.perf_counter()
    pipe = make_pipeline(MLKR(n_components=3), NadarayaWatson(bandwidth="cv")).fit(Xtr, ytr)
    t_pipe = time.perf_counter() - t0
    raw = NadarayaWatson(bandwidth="cv").fit(Xtr, ytr)
    err_pipe = float(np.mean((pipe.predict(Xte) - yte) ** 2))
    err_raw = float(np.mean((raw.predict(Xte) - yte) ** 2))
    row(f"W3 n={n1} test {n_test}", "MLKR + NadarayaWatson(cv) fit", t_pipe,
        f"test MSE {err_pipe:.4f} = {err_pipe / err_raw:.2f}x NadarayaWatson(cv) on raw X "
        f"({err_raw:.4f}) (target <= 0.7x)")


if __name__ == "__main__":
    main()
