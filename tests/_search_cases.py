"""The data sets of tests/bandwidth/test_trust_search.py and statsmodels' ``KernelReg(bw="cv_ls")`` on them.

Run as a script to print the table of statsmodels' bandwidths that the test stores
(``python tests/_search_cases.py``; about a minute).
"""

from __future__ import annotations

import warnings

import numpy as np

#: (family, seed, n, degree): families as in :func:`make`
CASES = [
    # the family: y = sin 5 x0 + 0.5 x1 + noise, where the per-feature search smoothed
    # x1 out or stopped in a worse basin than statsmodels'
    *[("sin2", s, 100, 0) for s in (3, 6, 8, 15, 17, 18, 30, 33, 11)],
    *[("sin2", s, 100, 1) for s in (0, 2, 3, 8, 11, 18, 19, 22, 24, 25, 31)],
    ("sin2", 17, 200, 1),
    ("sin1", 0, 100, 0),
    ("sin1", 1, 100, 1),
    ("sin3", 0, 120, 0),
    ("sin3", 1, 120, 1),
    ("cu", 0, 120, 0),
    ("cu", 1, 120, 0),
    ("cu", 2, 120, 1),
    ("cu", 3, 120, 1),
    ("cu", 4, 120, 1),
    ("co", 0, 120, 0),
    ("co", 1, 120, 1),
    ("co", 3, 120, 0),
    ("co", 4, 120, 0),
    ("cuo", 0, 120, 0),
]

VAR_TYPES = {"sin1": "c", "sin2": "cc", "sin3": "ccc", "cu": "cu", "co": "co", "cuo": "cuo"}


def make(family: str, seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``X`` (n, d) and ``y`` (n,) of a family: sin 5 x0 plus a linear x1 (``sin2``), alone
    (``sin1``), with a pure-noise x2 (``sin3``); with an unordered column of 3 levels
    (``cu``), an ordered one of 5 (``co``), or both (``cuo``)."""
    rng = np.random.default_rng(seed)
    d = int(family[3]) if family.startswith("sin") else 1
    x = rng.uniform(0, 1, (n, d))
    f = np.sin(5 * x[:, 0]) + (0.5 * x[:, 1] if d >= 2 else 0.0)
    cols = list(x.T)
    if "u" in family:
        u = rng.integers(0, 3, n).astype(float)
        cols.append(u)
        f = f + np.array([0.0, 0.4, -0.3])[u.astype(int)]
    if "o" in family:
        o = rng.integers(0, 5, n).astype(float)
        cols.append(o)
        f = f + 0.15 * o
    return np.column_stack(cols), f + rng.normal(0, 0.35, n)


def statsmodels_bw(family: str, seed: int, n: int, degree: int) -> np.ndarray:
    """statsmodels' ``KernelReg(bw="cv_ls")`` bandwidths of a case (Nelder-Mead from its rule
    of thumb; a negative continuous bandwidth is the same as its absolute value)."""
    from statsmodels.nonparametric.kernel_regression import KernelReg

    X, y = make(family, seed, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kr = KernelReg(y, X, var_type=VAR_TYPES[family], reg_type="ll" if degree else "lc", bw="cv_ls")
    return np.asarray(kr.bw, dtype=np.float64)


if __name__ == "__main__":
    for case in CASES:
        print(f"    {case!r}: {np.array2string(statsmodels_bw(*case), precision=17, separator=', ')},")
