"""The per-feature search's cost, counted in leave-one-out passes (``res.n_passes``).

The wider search that ends no worse than statsmodels' ``cv_ls`` (tests/bandwidth/test_trust_search.py)
first cost 4 to 10 times the passes of the single-start search it replaced: 57-78 passes on
2-D local-constant data where that took 13-20, 167-283 on local-linear data where it took 38,
and 163 on 5-D data where it took 19. Scoring the bandwidths that change one feature each in
one pass (a sweep's steps, a profile, the features tried smoothed out) brought them to 13-18,
50-52 and 34; Levenberg-Marquardt's loose polishes on CV's Gauss-Newton matrix and the tight
polish scaled by its diagonal to 9-15 and 24 (local constant). Passes are counted, not
seconds, so these bounds do not depend on the machine or its load; each holds with room for a
few passes of difference in L-BFGS-B's path.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from _search_cases import make
from nadaraya.bandwidth import select_bandwidth


def _passes(X, y, degree=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return select_bandwidth(X, y, per_feature=True, degree=degree).n_passes


@pytest.mark.parametrize("seed", range(5))
def test_two_features_local_constant_within_twice_the_single_start(seed):
    """y = sin 5 x0 + 0.5 x1 + noise, n = 500: at most 20 passes (the single start took 13-20;
    9-15 measured)."""
    assert _passes(*make("sin2", seed, 500)) <= 20


@pytest.mark.parametrize("seed", range(2))
def test_two_features_local_linear_within_twice_the_single_start(seed):
    """The same data, local linear (L-BFGS-B on finite differences): at most 62 passes (the
    single start took 38; 50-52 measured)."""
    assert _passes(*make("sin2", seed, 500), degree=1) <= 62


def test_five_features_local_constant():
    """benchmarks/bench_bandwidth.py's 5-D data (three useful features, two of noise), n = 600:
    at most 30 passes (the single start took 19; 24 measured)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (600, 5))
    y = np.sin(6 * X[:, 0]) + 2 * (X[:, 1] - 0.5) ** 2 + 0.5 * X[:, 2] + rng.normal(0, 0.2, 600)
    assert _passes(X, y) <= 30
