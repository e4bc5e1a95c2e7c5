"""``backend="auto"`` against every exact backend that serves the call: its time over the fastest (issue 30).

For each cell of kernel (Gaussian, Epanechnikov, tricube, Laplacian) x local degree (0, 1, 2)
x features (1, 2, 3) x leave-one-out x sample weights, at n = m = 2e3 and 1e4 (x ~ U(0, 1)^d,
h = 0.15 per feature): the partial sums (``nadaraya.backends.compute``) on each exact backend
that serves the cell (``nadaraya.backends.why_not``; the torch and Dask backends, which ``auto``
never picks by itself, are left out) and on ``auto`` (the chooser's own choice, its data-aware
part included), best of six (of twenty where the fastest takes under 5 ms), timed in turns. A
backend whose modelled cost (``nadaraya.backends.cost``) is over 10x the time ``auto`` took is not
run (nor the NumPy reference above 1e6 pairs): it cannot be the fastest. A call over a second is not
repeated, nor one over 10x the fastest in two calls. Target: ``auto`` within 1.5x of the fastest
backend, in every cell.

The machine this runs on may be shared: the backends of a cell are timed in one run, interleaved.

    python benchmarks/bench_auto.py           # full sizes (6-12 minutes on a shared 2-core machine)
    python benchmarks/bench_auto.py --quick   # n = m = 1e3, no weights, best of two: a smoke run
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
import warnings

import numpy as np

from nadaraya import backends
from nadaraya._core.call import compute_partials, prepare

KERNELS = ("gaussian", "epanechnikov", "tricube", "laplacian")
EXACT = ("laplace", "windowed", "truncated", "fused", "reference")
LIMIT = 1.5
#: a backend modelled at more than this many times auto's measured time is not run, nor repeated
#: where its first run took that long
HOPELESS = 10.0
#: the NumPy reference is timed up to this many pairs (beyond, it is never the fastest: 10-100x the
#: fused loop at n = m = 2e3)
REFERENCE_PAIRS = 1e6
#: a cell whose fastest backend takes under this many seconds is timed in at least SHORT_ROUNDS rounds:
#: the best of six of a 0.3 ms call on a shared machine can still hold a busy spell (the Laplacian's
#: 1-D cells at n = 2e3 read 1.58x once, where auto adds 5-9% to the call)
SHORT = 0.005
SHORT_ROUNDS = 20


def data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, (n, d))
    y = np.sin(6 * x[:, 0]) + x.sum(axis=1) + rng.normal(0.0, 0.3, n)
    return x, y, rng.uniform(0.5, 2.0, n)


def cell(kernel: str, degree: int, d: int, loo: bool, weighted: bool, n: int,
         repeat: int) -> dict[str, float]:
    """Best-of-``2 repeat`` seconds per backend (of :data:`SHORT_ROUNDS` where the calls are
    :data:`SHORT`; ``auto`` under its own name and as ``"auto"``),
    the backends timed in turns (one call each per round), so that a busy spell of a shared
    machine falls on all of them alike."""
    x, y, sw = data(n, d)
    call = prepare(x, x, y, kernel=kernel, bandwidth=np.full(d, 0.15), sample_weight=sw if weighted else None)
    exclude = np.arange(n) if loo else None
    # a quarter of the call, run once per backend before its timing: it compiles what the call needs
    # (a first run that compiled for seconds would otherwise count as the backend's time)
    part = n // 4
    warm = prepare(x[:part], x[:part], y[:part], kernel=kernel, bandwidth=np.full(d, 0.15),
                   sample_weight=sw[:part] if weighted else None)

    def once(name: str) -> tuple[float, str]:
        t = time.perf_counter()
        _, choice = compute_partials(call, exclude=exclude, backend=name, moments=degree)
        return time.perf_counter() - t, choice.name

    once("auto")  # compile outside the timing
    t_auto, chosen = once("auto")
    times: dict[str, float] = {"auto": t_auto, "auto=" + chosen: 0.0}
    names = ["auto"]
    for name in EXACT:
        if name not in backends.available():
            continue
        if backends.why_not(name, kernel, d=d, degree=degree, loo=loo) is not None:
            continue
        model = backends.cost(name, kernel, n=n, m=n, d=d, degree=degree) / 1e9
        # a backend whose cost depends on the data (truncated) has no modelled cost: it is run
        hopeless = (math.isfinite(model) and model > HOPELESS * t_auto) or (name == "reference"
                                                                             and n * n > REFERENCE_PAIRS)
        if name != chosen and hopeless:
            continue
        compute_partials(warm, exclude=np.arange(part) if loo else None, backend=name, moments=degree)
        times[name] = once(name)[0]
        names.append(name)
    rounds = 2 * repeat
    if repeat > 1 and min(times[name] for name in names) < SHORT:
        rounds = max(rounds, SHORT_ROUNDS)
    for turn in range(1, rounds):
        best = min(times[name] for name in names)
        # a backend over a second is not repeated, nor one over HOPELESS times the best in two calls
        # (one slow call of a 0.3 ms backend, in a busy spell, would leave it out and its time slow)
        names = [name for name in names if name == "auto" or times[name] <= (1.0 if turn == 1 else
                                                                            min(HOPELESS * best, 1.0))]
        # each round in another order: a call right after a multi-core one shares the cores with
        # its threads still spinning (OpenMP), and that must not fall on one backend every time
        for name in names[turn % len(names):] + names[:turn % len(names)]:
            times[name] = min(times[name], once(name)[0])
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, best of two")
    args = parser.parse_args()
    sizes = (1_000,) if args.quick else (2_000, 10_000)
    options = (False,) if args.quick else (False, True)
    repeat = 1 if args.quick else 3
    print(f"{'cell':<44}{'auto':<11}{'seconds':>9}{'fastest':>11}{'seconds':>9}{'ratio':>7}  others")
    met = total = 0
    worst = (0.0, "")
    misses: list[str] = []
    laplace = [0, 0]  # 1-D Laplacian cells where auto took laplace, of all
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n, kernel, d, degree, loo, weighted in itertools.product(sizes, KERNELS, (1, 2, 3), (0, 1, 2),
                                                                      options, options):
            times = cell(kernel, degree, d, loo, weighted, n, repeat)
            chosen = next(k for k in times if k.startswith("auto="))[5:]
            t_auto = times["auto"]
            named = {k: v for k, v in times.items() if not k.startswith("auto")}
            fastest = min(named, key=named.get) if named else chosen
            best = min(named.values()) if named else t_auto
            ratio = t_auto / best
            total += 1
            met += ratio <= LIMIT
            name = f"n={n} {kernel} d={d} deg={degree}{' loo' if loo else ''}{' w' if weighted else ''}"
            worst = max(worst, (ratio, name))
            if ratio > LIMIT:
                misses.append(f"{name} ({chosen} {ratio:.2f}x {fastest})")
            if kernel == "laplacian" and d == 1:
                laplace[0] += chosen == "laplace"
                laplace[1] += 1
            others = " ".join(f"{k} {v:.4f}" for k, v in named.items() if k != fastest)
            flag = "" if ratio <= LIMIT else "  NOT MET"
            print(f"{name:<44}{chosen:<11}{t_auto:>9.4f}{fastest:>11}{best:>9.4f}{ratio:>6.2f}x  "
                  f"{others}{flag}", flush=True)
    print(f"auto within {LIMIT}x of the fastest exact backend: {met} of {total} cells "
          f"({'met' if met == total else 'NOT MET'}); worst {worst[0]:.2f}x ({worst[1]}); "
          f"{time.perf_counter() - start:.0f} s")
    print(f"summary: {met}/{total} cells within {LIMIT}x; Laplacian in 1-D to laplace in "
          f"{laplace[0]}/{laplace[1]}; misses: {'; '.join(misses) if misses else 'none'}")


if __name__ == "__main__":
    main()
