"""Local fits on the fast exact paths: the cost of degree 1 and 2 over degree 0, ratios in one run (issue 30).

Workloads, y = sin 6x + x + N(0, 0.3^2) on x ~ U(0, 1), ``backend="auto"``, exact (no tol):

- D1, 1-D n = m = 2e5: Gaussian at h = 0.3 and 0.01, Epanechnikov at 0.002, tricube at 0.01;
  ``pool`` and ``loo_pool`` at degree 0, 1 and 2 (the best of 3-15 interleaved rounds, as
  many as fill 1.5 s); the ratio of each degree to degree 0 (targets: degree 1 at most 1.6x,
  degree 2 at most 2.5x), and the largest difference from a plainly written weighted least
  squares (one lstsq per query, over all keys) on 40 queries spread over the data (target: at most 1e-9).
- D2, mixed-data CV (``select_bandwidth(var_types="cou")``, n = 500): with the default numba
  threads and with one, on an idle machine and beside a process that holds one core (targets:
  default at most 1.2x one thread, both ways; beside the busy core at most 2x its idle time).
- D3, 1-D CV selection at n = 2e4: ``select_bandwidth(degree=1)`` over ``degree=0`` (target:
  at most 3x).
- D4, the neighbours of D1: every kernel of the registry, n = m = 2e5, at one bandwidth
  each, ``pool`` and ``loo_pool`` at degree 0, 1, 2 (the best of 2-15 interleaved rounds, as
  many as fill 1.5 s): the ratio of each degree to degree 0, held to D1's targets.
- D5, the logistic kernel's exact tails (``backend="logistic"``, which ``auto`` takes at degree 0
  in 1-D): ``pool`` and ``loo_pool`` at n = m = 2e5, h = 0.05 and 0.01, against the fused loop
  over every pair timed on 2000 queries and scaled to all 2e5 (best of two): the ratio.
- D6, the neighbours of D1 that D4 does not sweep: seven kernels at n = m = 2e5 in 1-D with
  positive seeded sample weights and with float32 keys and values (the result float32), and
  three kernels with 2-D keys (n = m = 5e4) and 3-D keys (n = m = 2e4), a bandwidth per feature;
  ``pool`` and ``loo_pool`` at degree 0, 1, 2 (the best of 1-15 interleaved rounds, as many as
  fill 2 s in 1-D and 1.5 s in 2-D and 3-D; a call over them is timed once): the ratio of each
  degree to degree 0 of the same inputs (D1's targets), and each weighted or float32 degree 0
  against the plain float64 degree 0 of its kernel (flagged above 1.5x).

The machine this runs on may be shared: the ratios are taken in one run, interleaved.

    python benchmarks/bench_degrees.py           # full sizes
    python benchmarks/bench_degrees.py --quick   # small sizes, a smoke run
    python benchmarks/bench_degrees.py --only epanechnikov,tricube   # D1 rows of those kernels only
    python benchmarks/bench_degrees.py --only D6   # the neighbours: weights, float32, 2-D, 3-D
"""

from __future__ import annotations

import argparse
import functools
import math
import multiprocessing as mp
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import nadaraya
from _timing import timed
from nadaraya.bandwidth import BandwidthWarning, select_bandwidth

KERNELS = (("gaussian", 0.3), ("gaussian", 0.01), ("epanechnikov", 0.002), ("tricube", 0.01))
PROFILES = {
    "gaussian": lambda u: np.exp(-0.5 * u * u),
    "epanechnikov": lambda u: np.clip(1.0 - u * u, 0.0, None),
    "tricube": lambda u: np.clip(1.0 - np.abs(u) ** 3, 0.0, None) ** 3,
}


def row(name: str, impl: str, seconds: float, note: str = "") -> None:
    print(f"{name:<28}{impl:<30}{seconds:>10.4f}  {note}", flush=True)


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, n)
    return x, np.sin(6 * x) + x + rng.normal(0.0, 0.3, n)


def plain_wls(at: np.ndarray, x: np.ndarray, y: np.ndarray, kernel: str, h: float, degree: int,
              loo: bool) -> np.ndarray:
    """The local polynomial estimate at the keys ``at`` (indices), written out: one lstsq each."""
    out = np.empty(at.size)
    for r, i in enumerate(at):
        w = PROFILES[kernel]((x - x[i]) / h)
        if loo:
            w[i] = 0.0
        keep = w > 0
        design = np.vander(x[keep] - x[i], degree + 1, increasing=True)
        root = np.sqrt(w[keep])
        out[r] = np.linalg.lstsq(design * root[:, None], y[keep] * root, rcond=None)[0][0]
    return out


def interleaved(calls: dict[Any, Callable[[], Any]], budget: float = 1.5, least: int = 3,
                most: int = 15) -> tuple[dict[Any, float], dict[Any, Any]]:
    """Best wall time of each call and its last result, the calls run in turns: as many rounds
    as fill about ``budget`` seconds, between ``least`` and ``most`` (a 15 ms call's best of
    two moved its ratio by a third between runs here)."""
    times = dict.fromkeys(calls, np.inf)
    out: dict[int, Any] = {}
    rounds, done = least, 0
    while done < rounds:
        start = time.perf_counter()
        for key, call in calls.items():
            t, out[key] = timed(call, repeat=1)
            times[key] = min(times[key], t)
        done += 1
        if done == 1:
            rounds = int(np.clip(math.ceil(budget / (time.perf_counter() - start)), least, most))
    return times, out


def d1(n: int, only: set[str] | None = None) -> None:
    x, y = data(n)
    at = np.argsort(x)[np.linspace(n // 100, n - 1 - n // 100, 40).astype(int)]
    for kernel, h in KERNELS:
        if only is not None and kernel not in only and "D1" not in only:
            continue
        for deg in (0, 1, 2):  # compile outside the timing
            nadaraya.pool(x[:3000], x[:3000], y[:3000], kernel=kernel, bandwidth=h, degree=deg)
            nadaraya.loo_pool(x[:3000], y[:3000], kernel=kernel, bandwidth=h, degree=deg)
        name = f"D1 {kernel} h={h}"
        for mode in ("pool", "loo_pool"):
            fn = nadaraya.pool if mode == "pool" else nadaraya.loo_pool
            args = (x, x, y) if mode == "pool" else (x, y)
            times, fits = interleaved({deg: functools.partial(fn, *args, kernel=kernel, bandwidth=h,
                                                              degree=deg) for deg in (0, 1, 2)})
            for deg in (0, 1, 2):
                want = plain_wls(at, x, y, kernel, h, deg, mode == "loo_pool")
                err = float(np.max(np.abs(fits[deg][at] - want)))
                note = f"max |fit - plain WLS| {err:.1e} (target <= 1e-9)"
                if deg:
                    limit = 1.6 if deg == 1 else 2.5
                    ratio = times[deg] / times[0]
                    note = (f"ratio {ratio:.2f}x degree 0 (target <= {limit}x: "
                            f"{'met' if ratio <= limit else 'NOT MET'}); " + note)
                row(name, f"{mode} degree={deg}", times[deg], note)


#: D4's bandwidths: windows of about 4000 keys for the compact kernels at n = 2e5 (800 for the
#: tricube, D1 has it at 0.01), and the unbounded ones at a middle bandwidth (D1 has the
#: Gaussian's ends).
NEIGHBOURS = (("gaussian", 0.05), ("laplacian", 0.05), ("logistic", 0.05), ("epanechnikov", 0.01),
              ("boxcar", 0.01), ("triangular", 0.01), ("biweight", 0.01), ("triweight", 0.01),
              ("tricube", 0.002), ("cosine", 0.01), ("parzen", 0.01), ("constant", 0.01))


#: D4's kernels whose exact sums visit every pair (the fused loop): a tenth of the size
EVERY_PAIR: tuple[str, ...] = ()


def d4(n: int, only: set[str] | None = None) -> None:
    for kernel, h in NEIGHBOURS:
        if only is not None and kernel not in only and "D4" not in only:
            continue
        size = n // 10 if kernel in EVERY_PAIR else n
        x, y = data(size)
        for deg in (0, 1, 2):  # compile outside the timing
            nadaraya.pool(x[:3000], x[:3000], y[:3000], kernel=kernel, bandwidth=h, degree=deg)
            nadaraya.loo_pool(x[:3000], y[:3000], kernel=kernel, bandwidth=h, degree=deg)
        for mode in ("pool", "loo_pool"):
            fn = nadaraya.pool if mode == "pool" else nadaraya.loo_pool
            args = (x, x, y) if mode == "pool" else (x, y)
            times, _ = interleaved({deg: functools.partial(fn, *args, kernel=kernel, bandwidth=h, degree=deg)
                                    for deg in (0, 1, 2)}, least=2)
            for deg in (0, 1, 2):
                note = ""
                if deg:
                    limit = 1.6 if deg == 1 else 2.5
                    ratio = times[deg] / times[0]
                    note = (f"ratio {ratio:.2f}x degree 0 (D1's target <= {limit}x: "
                            f"{'met' if ratio <= limit else 'NOT MET'})")
                row(f"D4 {kernel} h={h} n={size}", f"{mode} degree={deg}", times[deg], note)


#: D5's bandwidths, and the queries the fused loop is timed on (scaled to all)
TAILS = (0.05, 0.01)
TAILS_SUBSAMPLE = 2000


def d5(n: int) -> None:
    x, y = data(n)
    sub = min(n, TAILS_SUBSAMPLE)
    nadaraya.pool(x[:3000], x[:3000], y[:3000], kernel="logistic", bandwidth=0.05)  # compile
    nadaraya.loo_pool(x[:3000], y[:3000], kernel="logistic", bandwidth=0.05)
    nadaraya.pool(x[:300], x[:3000], y[:3000], kernel="logistic", bandwidth=0.05, backend="fused")
    for h in TAILS:
        kw = {"kernel": "logistic", "bandwidth": h}
        fused = min(timed(lambda kw=kw: nadaraya.pool(x[:sub], x, y, backend="fused", **kw), repeat=1)[0]
                    for _ in range(2)) * n / sub
        row(f"D5 logistic h={h} n={n}", f"fused, {sub} queries scaled", fused)
        for mode in ("pool", "loo_pool"):
            if mode == "pool":
                call = lambda kw=kw: nadaraya.pool(x, x, y, **kw)  # noqa: E731
            else:
                call = lambda kw=kw: nadaraya.loo_pool(x, y, **kw)  # noqa: E731
            seconds = min(timed(call, repeat=1)[0] for _ in range(2))
            row(f"D5 logistic h={h} n={n}", f"{mode} auto (logistic)", seconds,
                f"{fused / seconds:.0f}x the fused loop (scaled)")


#: D6's kernels in 1-D (n = m = 2e5): D1's and D4's bandwidths where they name the kernel
D6_KERNELS = (("gaussian", 0.01), ("epanechnikov", 0.002), ("tricube", 0.01), ("triweight", 0.01),
              ("laplacian", 0.05), ("logistic", 0.05), ("constant", 0.01))
#: D6's kernels in 2 and 3 features, the first feature's bandwidth (feature j's is sqrt(j + 1)
#: times it: a bandwidth per feature; the compact windows hold about 100 keys in 2-D, 400 in 3-D)
D6_ND = {2: (("gaussian", 0.01), ("epanechnikov", 0.02), ("laplacian", 0.05)),
         3: (("gaussian", 0.05), ("epanechnikov", 0.1), ("laplacian", 0.1))}
D6_SIZES = {2: 50_000, 3: 20_000}
#: a weighted or float32 degree 0 above this many times the plain float64 degree 0 is flagged
D6_FLAG = 1.5


def _degree_note(deg: int, seconds: float, base: float) -> str:
    limit = 1.6 if deg == 1 else 2.5
    ratio = seconds / base
    return f"ratio {ratio:.2f}x degree 0 (D1's target <= {limit}x: {'met' if ratio <= limit else 'NOT MET'})"


def _d6_1d(n: int, kernel: str, h: float) -> None:
    x, y = data(n)
    sw = np.random.default_rng(6).uniform(0.2, 5.0, n)  # positive, seeded
    inputs = {"plain": (x, y, None), "weights": (x, y, sw),
              "float32": (x.astype(np.float32), y.astype(np.float32), None)}
    for xc, yc, wc in inputs.values():  # compile outside the timing
        for deg in (0, 1, 2):
            kw = {"kernel": kernel, "bandwidth": h, "degree": deg,
                  "sample_weight": None if wc is None else wc[:3000]}
            nadaraya.pool(xc[:3000], xc[:3000], yc[:3000], **kw)
            nadaraya.loo_pool(xc[:3000], yc[:3000], **kw)
    for mode in ("pool", "loo_pool"):
        fn = nadaraya.pool if mode == "pool" else nadaraya.loo_pool
        calls = {}
        for case, (xc, yc, wc) in inputs.items():
            args = (xc, xc, yc) if mode == "pool" else (xc, yc)
            for deg in (0,) if case == "plain" else (0, 1, 2):
                calls[case, deg] = functools.partial(fn, *args, kernel=kernel, bandwidth=h, degree=deg,
                                                     sample_weight=wc)
        times, _ = interleaved(calls, budget=2.0, least=1)  # the weighted Gaussian's round: a minute
        name = f"D6 {kernel[:8]} h={h}"
        plain = times["plain", 0]
        row(name, f"{mode} plain float64 degree=0", plain)
        for case in ("weights", "float32"):
            slow = times[case, 0] / plain
            flag = f"FLAG: > {D6_FLAG}x" if slow > D6_FLAG else "ok"
            row(name, f"{mode} {case} degree=0", times[case, 0],
                f"{slow:.2f}x plain float64 degree 0 ({flag})")
            for deg in (1, 2):
                row(name, f"{mode} {case} degree={deg}", times[case, deg],
                    _degree_note(deg, times[case, deg], times[case, 0]))


def _d6_nd(d: int, n: int, kernel: str, h: float) -> None:
    rng = np.random.default_rng(d)
    x = rng.uniform(0.0, 1.0, (n, d))
    y = np.sin(6 * x[:, 0]) + x[:, 1:].sum(axis=1) + rng.normal(0.0, 0.3, n)
    hh = h * np.sqrt(np.arange(1, d + 1))
    for deg in (0, 1, 2):  # compile outside the timing
        nadaraya.pool(x[:2000], x[:2000], y[:2000], kernel=kernel, bandwidth=hh, degree=deg)
        nadaraya.loo_pool(x[:2000], y[:2000], kernel=kernel, bandwidth=hh, degree=deg)
    for mode in ("pool", "loo_pool"):
        fn = nadaraya.pool if mode == "pool" else nadaraya.loo_pool
        args = (x, x, y) if mode == "pool" else (x, y)
        times, _ = interleaved({deg: functools.partial(fn, *args, kernel=kernel, bandwidth=hh, degree=deg)
                                for deg in (0, 1, 2)}, least=1)
        name = f"D6 {d}-D {kernel[:8]} h={h:g}.."
        for deg in (0, 1, 2):
            note = _degree_note(deg, times[deg], times[0]) if deg else ""
            row(name, f"{mode} degree={deg}", times[deg], note)


def d6(n: int, only: set[str] | None = None, quick: bool = False) -> None:
    """The 1-D rows at ``n`` keys and queries, the 2-D and 3-D rows at ``D6_SIZES`` (a tenth with
    ``quick``); the singular and empty local systems of the small windows are not warned about."""
    print(f"D6: 1-D n = m = {n}; 2-D n = m = {D6_SIZES[2] // (10 if quick else 1)}, "
          f"3-D n = m = {D6_SIZES[3] // (10 if quick else 1)}", flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.SingularFitWarning)
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        for kernel, h in D6_KERNELS:
            if only is None or kernel in only or "D6" in only:
                _d6_1d(n, kernel, h)
        for d, size in D6_SIZES.items():
            for kernel, h in D6_ND[d]:
                if only is None or kernel in only or "D6" in only:
                    _d6_nd(d, size // 10 if quick else size, kernel, h)


def _mixed_data(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)
    c = rng.uniform(0, 5, n)
    u = rng.integers(0, 4, n)
    o = rng.integers(0, 5, n)
    y = np.sin(c) + 0.5 * (u == 2) + 0.2 * o + rng.normal(0, 0.3, n)
    return np.column_stack([c, u, o]).astype(float), y


def _spin(stop: float, ready: object = None) -> None:  # pragma: no cover - a helper process
    if ready is not None:
        ready.set()  # type: ignore[attr-defined]
    while time.perf_counter() < stop:
        pass


def _select(x: np.ndarray, y: np.ndarray, **kw: object) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        return select_bandwidth(x, y, **kw)


def d2(n: int, rounds: int = 9) -> None:
    """Each setting's best of ``rounds`` calls, the settings interleaved call by call (the machine's
    noise hits both alike); beside a busy core, the spinning process is started and spinning
    before the warm-up call, so its start-up is not timed."""
    import numba

    x, y = _mixed_data(n)
    default = numba.get_num_threads()

    cpu: dict[tuple[str, int], float] = {}

    def both(label: str) -> dict[int, float]:
        _select(x, y, var_types="cou")  # warm-up: compiled code, caches, the thread pools' start
        out = dict.fromkeys((default, 1), np.inf)
        for _ in range(rounds):
            for threads in (default, 1):
                numba.set_num_threads(threads)
                try:
                    # the CPU time of every thread of this process: above the wall time where it
                    # runs in parallel
                    c0 = time.process_time()
                    t = timed(lambda: _select(x, y, var_types="cou"), repeat=1)[0]
                    c = time.process_time() - c0
                finally:
                    numba.set_num_threads(default)
                out[threads] = min(out[threads], t)
                cpu[label, threads] = min(cpu.get((label, threads), np.inf), c)
        return out

    _select(x[:60], y[:60], var_types="cou")  # compile outside the timing
    idle = both("idle")
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    busy_proc = ctx.Process(target=_spin, args=(time.perf_counter() + 300.0, ready))
    busy_proc.start()
    try:
        ready.wait(60.0)
        busy = both("beside a busy core")
    finally:
        busy_proc.terminate()
        busy_proc.join()
    name = f"D2 mixed cou CV n={n}"
    for label, got in (("idle", idle), ("beside a busy core", busy)):
        ratio = got[default] / got[1]
        row(name, f"{label}: {default} threads", got[default],
            f"ratio {ratio:.2f}x one thread (target <= 1.2x: {'met' if ratio <= 1.2 else 'NOT MET'}; "
            f"best of {rounds}, interleaved)")
        row(name, f"{label}: 1 thread", got[1],
            f"CPU time of the process: {cpu[label, default]:.4f} s with {default} threads, "
            f"{cpu[label, 1]:.4f} s with 1 (best of {rounds})")
    slow = busy[default] / idle[default]
    cpu_slow = cpu["beside a busy core", default] / cpu["idle", default]
    row(name, "busy / idle (default threads)", busy[default],
        f"ratio {slow:.2f}x its idle time (target <= 2x: {'met' if slow <= 2 else 'NOT MET'}); "
        f"CPU time {cpu_slow:.2f}x")


def d3(n: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 5, n)
    y = 2 * np.sin(x) + x + rng.normal(0, 0.5, n)
    for deg in (0, 1):
        _select(x[:3000], y[:3000], degree=deg)
    times = dict.fromkeys((0, 1), np.inf)
    for _ in range(2):
        for deg in (0, 1):
            times[deg] = min(times[deg], timed(lambda deg=deg: _select(x, y, degree=deg), repeat=1)[0])
    row(f"D3 CV selection 1-D n={n}", "select_bandwidth degree=0", times[0])
    ratio = times[1] / times[0]
    row(f"D3 CV selection 1-D n={n}", "select_bandwidth degree=1", times[1],
        f"ratio {ratio:.2f}x degree 0 (target <= 3x: {'met' if ratio <= 3 else 'NOT MET'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--only", default=None,
                        help="workloads (D1, D2, D3, D4, D5, D6) or D1/D4/D6 kernels, comma-separated: "
                             "epanechnikov,tricube")
    args = parser.parse_args()
    only = None if args.only is None else {t.strip() for t in args.only.split(",") if t.strip()}
    print(f"{'workload':<28}{'implementation':<30}{'seconds':>10}  note")
    if only is None or "D1" in only or only & {k for k, _ in KERNELS}:
        d1(20_000 if args.quick else 200_000, only)
    if only is None or "D2" in only:
        d2(200 if args.quick else 500)
    if only is None or "D3" in only:
        d3(4_000 if args.quick else 20_000)
    if only is None or "D4" in only or only & {k for k, _ in NEIGHBOURS}:
        d4(20_000 if args.quick else 200_000, only)
    if only is None or "D5" in only:
        d5(20_000 if args.quick else 200_000)
    if only is None or "D6" in only or only & {k for k, _ in D6_KERNELS}:
        d6(20_000 if args.quick else 200_000, only, args.quick)


if __name__ == "__main__":
    main()
