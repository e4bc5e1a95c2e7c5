"""Local polynomial fits and mixed data: nadaraya's costs against its own local-constant pass and statsmodels.

Workloads (issue 14), each a ratio of two timings taken in this run:

- L1, the cost of local linear over local constant on the same data: one ``pool`` pass with
  ``degree=1`` over one with ``degree=0``, Gaussian, 1-D n = m = 1e5 on U(0, 5) and 5-D
  n = m = 2e4 on U(0, 1)^5 (target, like for like on the fused engine: at most 1.6x; the
  exponentials are shared. In 5-D a pair's local-linear sums are 25 products after its weight,
  which bounds the ratio near 1.75x on a core that issues one 512-bit multiply a cycle; issue 30
  takes up to 2.35x there as met, and the verdict says so), and with ``backend="auto"``, which
  may take another backend per degree (no target here: ``bench_degrees`` D1 holds auto's).
- L2, local-linear CV selection, 1-D n = 1000 (y = 2 sin x + x + N(0, 0.5^2)): nadaraya's
  ``select_bandwidth(degree=1)`` against statsmodels ``KernelReg(reg_type="ll", bw="cv_ls")``
  (run once); each selected bandwidth is scored by the same exact CV (target: at least 100x,
  score no worse).
- L3, mixed data ``var_types="cuo"``, n = 500 (one continuous, one unordered with 4 categories,
  one ordered with 5 levels), local-constant CV selection against statsmodels
  ``KernelReg(reg_type="lc", var_type="cuo", bw="cv_ls")`` (run once; target: at least 100x,
  score no worse).

    python benchmarks/bench_local.py           # full sizes
    python benchmarks/bench_local.py --quick   # small sizes, a smoke run
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

import nadaraya
from _timing import timed as _timed
from nadaraya.bandwidth import BandwidthWarning, score_bandwidth, select_bandwidth


def timed(fn: Callable[[], Any], repeat: int = 5) -> tuple[float, Any]:
    """Best of ``repeat`` runs (one run when it takes over two seconds)."""
    return _timed(fn, repeat, slow=2.0)


def row(name: str, impl: str, seconds: float, note: str = "") -> None:
    print(f"{name:<24}{impl:<34}{seconds:>10.4f}  {note}", flush=True)


def l1(name: str, n: int, d: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 5 if d == 1 else 1, (n, d))
    y = 2 * np.sin(x[:, 0]) + x[:, 0] + rng.normal(0, 0.5, n)
    h = 0.1 if d == 1 else 0.2
    for deg in (0, 1):  # compile outside the timing
        nadaraya.pool(x[:100], x[:100], y[:100], bandwidth=h, degree=deg)
    for backend in ("auto", "fused"):  # auto may take another backend per degree (1-D: truncated)
        times = {0: np.inf, 1: np.inf}
        for _ in range(3):  # interleaved: the machine's noise hits both alike
            for deg in (0, 1):
                call = lambda deg=deg, b=backend: nadaraya.pool(x, x, y, bandwidth=h, degree=deg, backend=b)  # noqa: E731
                t, _ = timed(call, repeat=1)
                times[deg] = min(times[deg], t)
        row(name, f"pool degree=0 backend={backend}", times[0])
        ratio = times[1] / times[0]
        if backend != "fused":
            target = "no target: each degree takes its own backend"
        elif ratio <= 1.6:
            target = "target <= 1.6x: met"
        elif d > 1 and ratio <= 2.35:
            target = "target <= 1.6x: NOT MET; issue 30 takes <= 2.35x in 5-D as met"
        else:
            target = "target <= 1.6x: NOT MET"
        row(name, f"pool degree=1 backend={backend}", times[1],
            f"ratio {ratio:.2f}x local constant ({target})")


def _ours(x: np.ndarray, y: np.ndarray, **kw: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        return select_bandwidth(x, y, **kw)


def _statsmodels(x: np.ndarray, y: np.ndarray, var_type: str, reg_type: str) -> np.ndarray:
    from statsmodels.nonparametric.kernel_regression import KernelReg

    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        warnings.simplefilter("ignore")
        return np.abs(KernelReg(y, x, var_type=var_type, reg_type=reg_type, bw="cv_ls").bw)


def _compare(
    name: str, x: np.ndarray, y: np.ndarray, kw: dict[str, Any], var_type: str, reg_type: str
) -> None:
    _ours(x, y, **kw)  # compile outside the timing (at this size: auto's backends depend on it)
    t_ours, res = timed(lambda: _ours(x, y, **kw), repeat=7)
    row(name, f"nadaraya {kw}", t_ours, f"h={np.round(res.bandwidth, 4).tolist()} CV={res.score:.10f}")
    try:
        t_sm, h_sm = timed(lambda: _statsmodels(x, y, var_type, reg_type), repeat=1)
    except ImportError as exc:
        row(name, "statsmodels", float("nan"), f"skipped: {exc}")
        return
    cv = float(score_bandwidth(x, y, h_sm, **kw))
    verdict = "ours no worse" if res.score <= cv * (1 + 1e-9) else "OURS WORSE"
    row(name, f"statsmodels {reg_type} cv_ls", t_sm,
        f"h={np.round(h_sm, 4).tolist()} CV={cv:.10f}  ratio {t_sm / t_ours:.0f}x "
        f"(target >= 100x; {verdict})")


def l2(n: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 5, n)
    y = 2 * np.sin(x) + x + rng.normal(0, 0.5, n)
    _compare(f"L2 ll CV 1-D n={n}", x, y, {"degree": 1}, "c", "ll")


def l3(n: int) -> None:
    rng = np.random.default_rng(2)
    c = rng.uniform(0, 5, n)
    u = rng.integers(0, 4, n)
    o = rng.integers(0, 5, n)
    y = np.sin(c) + 0.5 * (u == 2) + 0.2 * o + rng.normal(0, 0.3, n)
    X = np.column_stack([c, u, o]).astype(float)
    _compare(f"L3 mixed cuo n={n}", X, y, {"var_types": "cuo"}, "cuo", "lc")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args(argv)
    print(f"{'workload':<24}{'implementation':<34}{'seconds':>10}")
    if args.quick:
        l1("L1 1-D n=m=1e4", 10_000, 1)
        l1("L1 5-D n=m=2e3", 2_000, 5)
        l2(150)
        l3(80)
        return 0
    l1("L1 1-D n=m=1e5", 100_000, 1)
    l1("L1 5-D n=m=2e4", 20_000, 5)
    l2(1000)
    l3(500)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
