"""Inference in the ``nadaraya`` command: the options and columns of ``predict --std/--band``, ``test``'s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
import typer

from nadaraya.cli._io import BadInput, _split_names
from nadaraya.inference.limits import MAX_BOOT, MIN_BOOT

BAND_METHODS = ("asymptotic", "bootstrap", "rbc")
INTERVAL_METHODS = ("jackknife+", "cv+", "split")
VARIANCES = ("heteroscedastic", "homoscedastic")
#: the replicates of a band when ``--n-boot`` is not given (the library's default)
BAND_BOOT = 999

# the options (flags take no value: metavar="" keeps the help from suggesting one)
Std = Annotated[bool, typer.Option(
    "--std", help="Add a std_<target> column: the standard error of each prediction.", metavar="")]
Variance = Annotated[str | None, typer.Option(
    help="Noise variance of --std and --band: heteroscedastic (default) or homoscedastic.",
    show_default=False)]
Level = Annotated[float | None, typer.Option(
    "--band", help="Add lower_<target> and upper_<target> columns: a confidence band of this level "
    "(e.g. 0.95).",
    show_default=False)]
BandMethod = Annotated[str | None, typer.Option(
    help="asymptotic (default), bootstrap (the wild bootstrap) or rbc (robust bias-corrected: covers the "
    "true function, not only the smoothed one).", show_default=False)]
Simultaneous = Annotated[bool, typer.Option(
    "--simultaneous", help="A band covering all the rows at once, not each row alone.", metavar="")]
BandBoot = Annotated[int | None, typer.Option(
    help=f"Bootstrap replicates of the band ({MIN_BOOT} to {MAX_BOOT}; default {BAND_BOOT}).",
    show_default=False)]
IntervalLevel = Annotated[float | None, typer.Option(
    "--interval", help="Add pi_lower_<target> and pi_upper_<target> columns: a conformal prediction interval "
    "of this level (e.g. 0.9), where a new y will fall (a band covers the mean of y).", show_default=False)]
IntervalMethod = Annotated[str | None, typer.Option(
    help="jackknife+ (default), cv+ or split: how --interval is calibrated.", show_default=False)]
Adaptive = Annotated[bool, typer.Option(
    "--adaptive", help="--interval widens where the residuals are larger (locally weighted).", metavar="")]
TestBoot = Annotated[int, typer.Option(help=f"Bootstrap replicates ({MIN_BOOT} to {MAX_BOOT}).")]
Seed = Annotated[int | None, typer.Option(
    help="Random seed of the bootstrap (default: fresh randomness).", show_default=False)]
Features = Annotated[list[str] | None, typer.Option(
    help="The features to test (comma-separated; default: every --x).", show_default=False)]
Joint = Annotated[bool, typer.Option(
    "--joint", help="Test the features as one group: does the regression depend on any of them?", metavar="")]


@dataclass(frozen=True)
class Uncertainty:
    """What ``predict`` adds to the predictions: standard errors and a band (``level`` None: none)."""

    std: bool = False
    variance: str = "heteroscedastic"
    level: float | None = None
    method: str = "asymptotic"
    simultaneous: bool = False
    n_boot: int = BAND_BOOT
    seed: int | None = None
    interval: float | None = None  # a prediction interval's level (None: none)
    interval_method: str = "jackknife+"
    adaptive: bool = False


def check_n_boot(n_boot: int) -> int:
    """``--n-boot`` as the library takes it; BadInput naming the option below :data:`MIN_BOOT`
    or above :data:`MAX_BOOT` (the library also refuses what would exceed the machine's
    memory or an hour's work, once the data are read).

    Examples
    --------
    >>> check_n_boot(399)
    399
    """
    if n_boot < MIN_BOOT:
        raise BadInput(f"--n-boot {n_boot} is too small; give at least {MIN_BOOT} replicates "
                       "(199 or more for p-values and bands worth reading)")
    if n_boot > MAX_BOOT:
        raise BadInput(f"--n-boot {n_boot} is too large; give at most {MAX_BOOT} replicates "
                       "(999 is usual for bands, 399 for tests)")
    return n_boot


def check_seed(seed: int | None) -> None:
    """BadInput naming ``--seed`` when it is negative (numpy's generators take 0 and up)."""
    if seed is not None and seed < 0:
        raise BadInput(f"--seed {seed} is not valid; give a whole number 0 or larger")


def uncertainty(
    std: bool,
    variance: str | None,
    band: float | None,
    method: str | None,
    simultaneous: bool,
    n_boot: int | None,
    seed: int | None,
    interval: float | None = None,
    interval_method: str | None = None,
    adaptive: bool = False,
) -> Uncertainty:
    """``predict``'s inference options checked before any work, defaults filled in; BadInput
    naming the option and its value, or an option given without the one it qualifies.

    Examples
    --------
    >>> uncertainty(True, None, 0.9, "rbc", False, None, 0)
    Uncertainty(std=True, variance='heteroscedastic', level=0.9, method='rbc', simultaneous=False, \
n_boot=999, seed=0, interval=None, interval_method='jackknife+', adaptive=False)
    """
    if variance is not None and variance not in VARIANCES:
        raise BadInput(f"--variance {variance!r} is not valid; choose {' or '.join(VARIANCES)}")
    if method is not None and method not in BAND_METHODS:
        raise BadInput(f"--band-method {method!r} is not valid; choose one of {', '.join(BAND_METHODS)}")
    if band is not None and not 0.0 < band < 1.0:
        raise BadInput(f"--band {band:g} is not valid; give the band's level in (0, 1), e.g. 0.95 for 95 %")
    if n_boot is not None and (method == "bootstrap" or simultaneous):  # else no replicates are drawn
        check_n_boot(n_boot)
    check_seed(seed)
    if interval_method is not None and interval_method not in INTERVAL_METHODS:
        raise BadInput(f"--interval-method {interval_method!r} is not valid; choose one of "
                       f"{', '.join(INTERVAL_METHODS)}")
    if interval is not None and not 0.0 < interval < 1.0:
        raise BadInput(f"--interval {interval:g} is not valid; give the interval's level in (0, 1), e.g. 0.9")
    if interval is None and (interval_method is not None or adaptive):
        raise BadInput(f"{'--interval-method' if interval_method else '--adaptive'} is an option of the "
                       "prediction interval: give --interval too (its level, e.g. 0.9)")
    if band is None:
        given = [name for name, value in (("--band-method", method), ("--simultaneous", simultaneous or None),
                                          ("--n-boot", n_boot), ("--seed", None if interval else seed))
                 if value is not None]
        if given:  # (--seed also shuffles the folds of --interval-method cv+ or split)
            raise BadInput(f"{given[0]} is an option of the band: give --band too (its level, e.g. 0.95)")
        if variance is not None and not std:
            raise BadInput("--variance is an option of --std and --band: give one of them too")
    return Uncertainty(std, variance or VARIANCES[0], band, method or BAND_METHODS[0], simultaneous,
                       BAND_BOOT if n_boot is None else n_boot, seed, interval,
                       interval_method or INTERVAL_METHODS[0], adaptive)


def predictions(
    est: Any, X: np.ndarray, how: Uncertainty, update: Callable[[int, int | None, str], None]
) -> dict[str, np.ndarray]:
    """The columns ``predict`` adds, by kind (``predicted``, ``std``, ``lower``, ``upper``),
    each (n, n_targets).

    Predictions and standard errors come in blocks of rows (the memory of a block of pairs stays
    bounded); a band is computed over all rows at once, since a simultaneous band covers them
    together and the bootstrap draws one set of replicates for all of them.
    """
    n = X.shape[0]
    step = max(1, int(2e7 // max(1, est.X_fit_.shape[0])))
    means, stds = [], []
    for start in range(0, n, step):
        block = X[start : start + step]
        if how.std:
            mean, sd = est.predict(block, return_std=True, variance=how.variance)
            stds.append(np.reshape(sd, (block.shape[0], -1)))
        else:
            mean = est.predict(block)
        means.append(np.reshape(mean, (block.shape[0], -1)))
        update(min(start + step, n), n, "predicting")
    out = {"predicted": np.concatenate(means)}
    if how.std:
        out["std"] = np.concatenate(stds)
    if how.level is not None:
        update(0, None, f"computing the {how.level:g} band ({how.method})")
        band = est.confidence_band(X, level=how.level, method=how.method,
                                   kind="simultaneous" if how.simultaneous else "pointwise",
                                   n_boot=how.n_boot, random_state=how.seed, variance=how.variance)
        out["lower"], out["upper"] = (np.reshape(a, (n, -1)) for a in (band.lower, band.upper))
    if how.interval is not None:
        if np.ndim(est.y_fit_) != 1:
            raise BadInput("--interval is computed for one target; this model has several: fit one model "
                           "per target")
        update(0, None, f"computing the {how.interval:g} prediction interval ({how.interval_method})")
        lo, hi = est.prediction_interval(X, level=how.interval, method=how.interval_method,
                                         adaptive=how.adaptive, random_state=how.seed)
        out["pi_lower"], out["pi_upper"] = lo[:, None], hi[:, None]
    return out


def feature_groups(xs: list[str], features: list[str] | None, joint: bool) -> list[int | list[int]]:
    """The tests ``test`` asks for, as positions in the feature columns: each feature of
    ``--features`` (default: every ``--x``) alone, or all of them as one group with ``--joint``.

    Examples
    --------
    >>> feature_groups(["age", "bmi", "bp"], ["bp,age"], False)
    [2, 0]
    >>> feature_groups(["age", "bmi", "bp"], None, True)
    [[0, 1, 2]]
    """
    names = _split_names(features) if features else xs
    for name in names:
        if name not in xs:
            raise BadInput(f"--features '{name}' is not one of the feature columns (--x): {', '.join(xs)}")
    if len(set(names)) < len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise BadInput(f"--features names '{twice}' twice; name each feature once")
    where = [xs.index(name) for name in names]
    return [where] if joint else list(where)
