"""What the bootstrap may be asked for: the number of replicates, bounded by memory and time; the seed.

A band's replicates are kept whole (``m x p x n_boot`` single-precision numbers, and for a
simultaneous band the studentised copies beside them); a significance test's are made in
blocks, but each costs a pass of the smoother's rows over the responses. Requests beyond what
the machine holds, or beyond :data:`MAX_WORK` multiply-adds, are refused before any work, with
the numbers that decided it.
"""

from __future__ import annotations

import numbers
import os
from typing import Any

import numpy as np

__all__ = ["MAX_BOOT", "MAX_WORK", "MIN_BOOT", "as_n_boot", "as_random_state", "check_band"]

#: the fewest replicates (a 5 % test needs 19 to reject at all)
MIN_BOOT = 19
#: the most replicates: a Monte Carlo p-value's or quantile's error, about sqrt(p (1 - p) / n_boot),
#: is below 5e-4 there
MAX_BOOT = 1_000_000
#: the most multiply-adds a bootstrap may cost: an hour or more on one core
MAX_WORK = 1e13
#: bytes per replicate and point of a band: the replicate (float32), its magnitude and the
#: studentised copy of a simultaneous band (float64)
BAND_BYTES = 4
SIMULTANEOUS_BYTES = 24


def physical_memory() -> float | None:
    """The machine's memory in bytes, or None where the system does not say."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def as_n_boot(n_boot: Any, *, work_per: float = 0.0, bytes_per: float = 0.0, what: str = "") -> int:
    """``n_boot`` as an int from :data:`MIN_BOOT` to :data:`MAX_BOOT`, its work (``work_per``
    multiply-adds a replicate) at most :data:`MAX_WORK` and its memory (``bytes_per`` a
    replicate) at most half the machine's; a ValueError naming ``n_boot``, its value and what
    decided otherwise. ``what`` says where the work and memory come from (e.g. ``"200 queries x
    5000 training points"``).

    Examples
    --------
    >>> as_n_boot(999)
    999
    >>> as_n_boot(9999999999999)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: n_boot=9999999999999 is too large; give from 19 to 1000000 replicates (999 is usual ...
    """
    if isinstance(n_boot, bool) or not isinstance(n_boot, numbers.Integral):
        raise ValueError(f"n_boot must be an integer from {MIN_BOOT} to {MAX_BOOT}; got {n_boot!r}")
    n = int(n_boot)
    if n < MIN_BOOT:
        raise ValueError(f"n_boot must be an integer of at least {MIN_BOOT}; got {n_boot!r}")
    if n > MAX_BOOT:
        raise ValueError(f"n_boot={n} is too large; give from {MIN_BOOT} to {MAX_BOOT} replicates "
                         "(999 is usual for bands, 399 for tests)")
    where = f" ({what})" if what else ""
    work, memory = n * float(work_per), n * float(bytes_per)
    if work > MAX_WORK:
        raise ValueError(f"n_boot={n} would cost about {work:.2g} multiply-adds{where}, more than the "
                         f"{MAX_WORK:.0e} (an hour or more) a bootstrap may take; give fewer replicates "
                         "or fewer points")
    total = physical_memory()
    if total is not None and memory > total / 2:
        raise ValueError(f"n_boot={n} needs about {memory / 2**30:.3g} GiB for its replicates{where}, more "
                         f"than half this machine's memory ({total / 2**30:.3g} GiB); give fewer replicates "
                         "or fewer points")
    return n


def as_random_state(random_state: Any) -> np.random.Generator:
    """A NumPy generator from ``random_state`` (None, an int of 0 or more, a SeedSequence, a
    Generator or a legacy RandomState); a ValueError naming ``random_state`` otherwise.

    Examples
    --------
    >>> as_random_state("abc")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: random_state='abc' is not valid; give None, an integer of 0 or more, or a numpy ...
    """
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(2**32))
    if not isinstance(random_state, str | bytes | float | complex):  # numpy would read text as bytes
        try:
            return np.random.default_rng(random_state)
        except (TypeError, ValueError):
            pass
    raise ValueError(f"random_state={random_state!r} is not valid; give None, an integer of 0 or more, "
                     "or a numpy Generator (or RandomState)")


def check_band(
    model: Any, X: Any, level: Any, method: str, kind: str, n_boot: Any, random_state: Any
) -> tuple[float, float, np.random.Generator | None]:
    """The arguments of ``confidence_band`` that a band of ``method`` and ``kind`` uses, checked
    before any work: ``level`` (any real number in (0, 1), NumPy's included, whose normal quantile
    is finite where the band takes it), ``n_boot`` (its bounds only where the band bootstraps:
    the bootstrap and simultaneous bands; elsewhere its type) and ``random_state``. Returns the
    level as a float, the normal quantile ``z`` of a pointwise asymptotic or rbc band (NaN for
    the others) and the generator (None where nothing is drawn)."""
    from scipy.stats import norm

    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0 < float(level) < 1:
        raise ValueError(f"level must be a number in (0, 1), e.g. 0.95; got {level!r}")
    level = float(level)
    z = float("nan")
    if method in ("asymptotic", "rbc") and kind == "pointwise":
        z = float(norm.ppf(1.0 - (1.0 - level) / 2))
        if not np.isfinite(z):
            raise ValueError(f"level={level!r} is too close to 1: the normal quantile of a band at it is "
                             "not finite in float64 (the band would be infinite); give a level of at most "
                             "1 - 1e-15")
    boots = method == "bootstrap" or kind == "simultaneous"
    if boots:
        m, n = X.shape[0], model.X_fit_.shape[0]
        p = 1 if np.ndim(model.y_fit_) == 1 else model.y_fit_.shape[1]
        as_n_boot(n_boot, work_per=float(m) * n * p,
                  bytes_per=float(m) * p * (SIMULTANEOUS_BYTES if kind == "simultaneous" else BAND_BYTES),
                  what=f"{m} queries x {n} training points x {p} outputs")
        return level, z, as_random_state(random_state)
    if isinstance(n_boot, bool) or not isinstance(n_boot, numbers.Integral):  # unused, but not a count
        raise ValueError(f"n_boot must be an integer from {MIN_BOOT} to {MAX_BOOT}; got {n_boot!r}")
    if not isinstance(random_state, np.random.RandomState):  # checked, nothing drawn
        as_random_state(random_state)
    return level, z, None
