"""Conditional density: nadaraya.ConditionalDensity against statsmodels' KDEMultivariateConditional,
ratios taken in this run (issue 32).

Data: x ~ U(0, 1), y = sin(4x) + (0.1 + 0.5x) N(0, 1); one continuous x, one continuous y.

- W1, n = 1000 keys, 1000 queries, fixed bandwidths: pdf and cdf, statsmodels (run once)
  against nadaraya (best of three); the ratio and the largest relative difference.
- W2, n = 300: bandwidths by cv_ml, statsmodels (run once, from its normal reference start)
  against nadaraya; each one's leave-one-out log likelihood on the same objective.
- W3, n = 2000 keys, 2000 queries x 3 levels: conditional quantiles (statsmodels has none);
  nadaraya's time and the largest |F(q | x) - alpha|, against the dense inversion (per query
  block, the x-weights of every key; nadaraya's own reference path, run once).

    python benchmarks/bench_conditional.py
    python benchmarks/bench_conditional.py --quick   # small sizes, a smoke run
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from _timing import timed
from nadaraya import ConditionalDensity


def row(name: str, impl_name: str, seconds: float, note: str = "") -> None:
    print(f"{name:<22}{impl_name:<40}{seconds:>10.4f}  {note}", flush=True)


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, n)
    return x, np.sin(4.0 * x) + (0.1 + 0.5 * x) * rng.standard_normal(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from statsmodels.nonparametric.api import KDEMultivariateConditional

    n1, n2, n3 = (200, 60, 300) if args.quick else (1000, 300, 2000)
    print(f"{'workload':<22}{'implementation':<40}{'seconds':>10}  note")

    x, y = data(n1)
    qx, qy = data(n1, seed=1)
    bw = [0.05, 0.1]
    ref = KDEMultivariateConditional(endog=[y], exog=[x], dep_type="c", indep_type="c", bw=bw[::-1], rng=0)
    ours = ConditionalDensity(bandwidth=bw).fit(x, y)
    ours.pdf(qx, qy), ours.cdf(qx, qy)  # compile, and load the backend chooser's compiled planners
    name = f"W1 n=m={n1}"
    for what in ("pdf", "cdf"):
        theirs, mine = getattr(ref, what), getattr(ours, what)
        t_sm, want = timed(lambda: theirs(endog_predict=qy, exog_predict=qx), repeat=1)  # noqa: B023
        t_nd, got = timed(lambda: mine(qx, qy), repeat=3)  # noqa: B023
        err = float(np.max(np.abs(got / want - 1)))
        row(name, f"statsmodels {what}", t_sm)
        row(name, f"nadaraya {what}", t_nd, f"{t_sm / t_nd:.0f}x statsmodels; max rel diff {err:.1e}")

    x, y = data(n2, seed=2)
    t_sm, ref = timed(lambda: KDEMultivariateConditional(endog=[y], exog=[x], dep_type="c", indep_type="c",
                                                         bw="cv_ml", rng=0), repeat=1)
    t_nd, ours = timed(lambda: ConditionalDensity(bandwidth="cv_ml").fit(x, y), repeat=1)
    l_sm = -ref.loo_likelihood(ref.bw, func=np.log)
    l_nd = -ref.loo_likelihood(ours.bandwidth_[::-1], func=np.log)
    name = f"W2 n={n2} cv_ml"
    row(name, "statsmodels bw='cv_ml'", t_sm, f"loo log likelihood {l_sm:.6f}")
    row(name, "nadaraya bandwidth='cv_ml'", t_nd,
        f"{t_sm / t_nd:.0f}x statsmodels; loo log likelihood {l_nd:.6f} (on statsmodels' objective; "
        f"{'no worse' if l_nd >= l_sm - 1e-9 * abs(l_sm) else 'WORSE'})")

    x, y = data(n3, seed=3)
    ours = ConditionalDensity(bandwidth=[0.03, 0.08]).fit(x, y)
    qx, _ = data(n3, seed=4)
    levels = np.array([0.05, 0.5, 0.95])
    t_nd, q = timed(lambda: ours.quantile(qx, levels), repeat=2)
    err = max(float(np.max(np.abs(ours.cdf(qx, q[:, k]) - a))) for k, a in enumerate(levels))
    from nadaraya.density._conditional import _dense_quantile

    t_dense, q_dense = timed(lambda: _dense_quantile(ours.sample_, qx[:, None], levels), repeat=1)
    name = f"W3 n=m={n3} x3 levels"
    row(name, "dense inversion (reference path)", t_dense)
    row(name, "nadaraya quantile", t_nd,
        f"{t_dense / t_nd:.1f}x dense; {t_nd / (n3 * levels.size) * 1e6:.0f} us per quantile; "
        f"max |F(q|x) - alpha| {err:.1e}; max |q - dense q| {float(np.max(np.abs(q - q_dense))):.1e}")


if __name__ == "__main__":
    main()
