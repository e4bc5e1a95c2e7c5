"""Wild-bootstrap replicates of a linear smoother: multipliers, one matrix product per block, quantiles.

With the bandwidth fixed, a local polynomial fit is a linear smoother ``f(x) = sum_i a_i(x) y_i``.
A wild-bootstrap replicate on responses ``fit + e * v`` deviates from the fit by
``sum_i a_i(x) e_i v_i``: all replicates at once are the smoother's rows times the residuals,
times the matrix of multipliers. :func:`replicates` computes that product in blocks, in single
precision (the replicates are Monte Carlo draws whose quantiles carry an error of order
``n_boot^-1/2``; single precision, a relative error of about 1e-6, halves the time and the
memory of the products without changing a band visibly).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support.config import get_config
from nadaraya.local import job as _job
from nadaraya.local.smoother import blocks

__all__ = ["multipliers", "quantiles", "replicates"]

# P(low) of the two-point laws, in units of 2^-16
TWO_POINT = {"mammen": round(65536 * (math.sqrt(5.0) + 1) / (2 * math.sqrt(5.0))), "rademacher": 32768}
KINDS = (*TWO_POINT, "gaussian")

# the most replicates drawn at once (their multipliers, n x COLUMNS in single precision, stay in
# cache), and the MiB of smoother rows made at once (blocks this small reuse the memory freed by
# the block before, where large ones would each be fresh pages from the system)
COLUMNS = 256
ROWS = 4.0
# a key whose weight in every row of a block of queries is below this fraction of the row's
# largest is left out of that block's product: below single precision's resolution
NEGLIGIBLE = 2.0**-32


def multipliers(
    rng: np.random.Generator, n: int, b: int, kind: str = "mammen", out: NDArray[np.float32] | None = None
) -> NDArray[np.float32]:
    """Wild-bootstrap multipliers of mean 0 and variance 1, (n, b), in single precision: Mammen's
    two-point law (third moment 1), Rademacher's (+-1) or standard normal (``"gaussian"``).

    The two-point laws come from 16 random bits per multiplier: the low value with probability
    ``P = t / 2^16`` (Rademacher: ``t = 2^15``, exactly 1/2; Mammen: ``t`` the nearest integer
    to ``2^16 (sqrt 5 + 1) / (2 sqrt 5)``, so ``P`` is Mammen's to within ``2^-17``), the two
    values ``-sqrt((1 - P) / P)`` and ``sqrt(P / (1 - P))``, so that the mean is 0 and the
    variance 1 exactly (Mammen's third moment is then 1 to within 1e-4). Drawn one replicate
    (column) after the other, so that blocks of columns drawn in turn from one generator give
    the same numbers as one draw of all of them. ``out``, a C-ordered (b, n) single-precision
    array, receives them (the result is its transpose).

    Examples
    --------
    >>> v = multipliers(np.random.default_rng(0), 20000, 1)
    >>> bool(abs(v.mean()) < 0.03 and abs(v.var() - 1) < 0.05)
    True
    >>> a = multipliers(np.random.default_rng(1), 5, 4); g = np.random.default_rng(1)
    >>> bool((np.hstack([multipliers(g, 5, 1), multipliers(g, 5, 3)]) == a).all())
    True
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not valid; choose one of {', '.join(map(repr, KINDS))}")
    if kind == "gaussian":
        return rng.standard_normal((b, n), dtype=np.float32, out=out).T
    threshold = TWO_POINT[kind]
    p_low = threshold / 65536.0
    low, high = -math.sqrt((1.0 - p_low) / p_low), math.sqrt(p_low / (1.0 - p_low))
    words = -(-n // 4)  # whole 64-bit draws per replicate: four multipliers each
    bits = rng.bit_generator.random_raw((b, words)).view(np.uint16)
    out = np.empty((b, n), dtype=np.float32) if out is None else out
    _two_point(bits, np.uint16(threshold), np.float32(low), np.float32(high), out)
    return out.T


@numba.njit(cache=True, nogil=True)
def _two_point(bits, threshold, low, high, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = low if bits[i, j] < threshold else high


def key_order(job: _job.Job) -> NDArray[np.intp] | None:
    """The order in which :func:`replicates` gives the keys their multipliers: sorted (stably)
    along the first continuous column, or ``None`` (their own order) when the job has
    categorical columns or no continuous one."""
    if job.cat is not None or job.call.keys.shape[1] == 0:
        return None
    return np.argsort(job.call.keys[:, 0], kind="stable")


def _sorted(job: _job.Job) -> tuple[_job.Job, NDArray[np.intp] | None, NDArray[np.intp] | None]:
    """The job with its keys and queries sorted along the first continuous column, and the two
    orders (``None`` when the job has categorical columns or no continuous one): with sorted
    keys, the keys that matter to a block of sorted queries are one contiguous range."""
    call = job.call
    keys = key_order(job)
    if keys is None:
        return job, None, None
    queries = np.argsort(call.queries[:, 0], kind="stable")
    sw = None if call.sample_weight is None else call.sample_weight[keys]
    call = dataclasses.replace(
        call, keys=call.keys[keys], values=call.values[keys], sample_weight=sw, queries=call.queries[queries]
    )
    return dataclasses.replace(job, call=call), keys, queries


def replicates(
    job: _job.Job, E: NDArray[np.float64], rng: np.random.Generator, n_boot: int, kind: str,
    empty: str | None = None,
) -> NDArray[np.float32]:
    """Deviations of ``n_boot`` replicates at the queries of ``job``, (m, p, n_boot), in single
    precision: the smoother applied to ``E * v`` (wild multipliers ``v``, (n, n_boot), drawn
    by :func:`multipliers`; row ``r`` of them goes to key ``key_order(job)[r]``: any fixed
    assignment gives independent multipliers, and this one lets sorted keys meet them in
    contiguous ranges).

    The smoother's rows come in blocks of queries (:func:`nadaraya.local.smoother.blocks`), scaled
    by the residuals once (kept when they fit in half the working memory). With the keys and
    queries sorted along the first continuous column, each block keeps only the range of keys
    whose weight reaches ``NEGLIGIBLE`` times a row's largest in one of its rows. The
    multipliers come in blocks of at most ``COLUMNS`` replicates, drawn in order (so the result
    does not depend on the block sizes), and meet the rows in one matrix product per block.
    With ``empty`` (the model's ``empty=``), a query answered by the far limit or a fill gets
    that answer's rows (:func:`nadaraya.local.smoother.blocks`). Single precision holds ``E`` to
    about 1e-7 of its largest entry: pass ``E`` brought near magnitude one (a power of two).
    """
    n, p = E.shape
    m = job.call.queries.shape[0]
    budget = float(get_config()["working_memory"])  # MiB: half for the rows, a quarter for the values
    width = max(1, min(n_boot, COLUMNS, int(budget * 2**20 // (4 * 4 * n))))
    job, keys, query_order = _sorted(job)
    if keys is not None:
        E = E[keys]

    def scaled(rows_mib: float) -> Iterator[tuple[int, int, int, int, list[NDArray[np.float32]]]]:
        for q0, q1, rows in blocks(job, memory=rows_mib, empty=empty):  # rows (E * v) = (rows * E) v
            lo, hi = _span(rows) if keys is not None else (0, n)
            yield q0, q1, lo, hi, [
                np.multiply(rows[:, lo:hi], E[lo:hi, c], out=np.empty((q1 - q0, hi - lo), np.float32),
                            casting="same_kind")
                for c in range(p)
            ]

    keep = m * n * p * 4 <= budget * 2**20 / 2 and width < n_boot  # kept for every block of columns
    cached = list(scaled(min(budget / 2, ROWS))) if keep else None
    out = np.empty((m, p, n_boot), dtype=np.float32)
    scratch = np.empty((width, n), dtype=np.float32)  # one buffer for every block's multipliers
    for b0 in range(0, n_boot, width):
        b1 = min(n_boot, b0 + width)
        v = multipliers(rng, n, b1 - b0, kind, scratch[: b1 - b0])  # (n, b), rows in the sorted keys' order
        for q0, q1, lo, hi, rows_e in cached if cached is not None else scaled(budget / 2):
            for c in range(p):
                np.matmul(rows_e[c], v[lo:hi], out=out[q0:q1, c, b0:b1])
    if query_order is not None:
        out[query_order] = out.copy()
    return out


def _span(rows: NDArray[np.float64]) -> tuple[int, int]:
    """The range of columns holding every entry of ``rows`` at or above ``NEGLIGIBLE`` times its
    row's largest magnitude (all columns where a row is not finite)."""
    size = np.abs(rows)
    top = size.max(axis=1, keepdims=True)
    if not np.all(np.isfinite(top)):
        return 0, rows.shape[1]
    live = np.flatnonzero((size >= NEGLIGIBLE * top).any(axis=0))
    if live.size == 0:
        return 0, 0
    return int(live[0]), int(live[-1]) + 1


def quantiles(
    dev: NDArray[np.floating], probs: tuple[float, ...], copy: bool = True
) -> list[NDArray[np.float64]]:
    """``np.quantile(dev, prob, axis=-1)`` for each of ``probs`` (its default, linear
    interpolation), from one sort of the last axis (a vectorised sort: faster than the
    selection ``np.quantile`` runs once per order statistic it needs); ``copy=False`` sorts
    ``dev`` in place.

    Examples
    --------
    >>> d = np.random.default_rng(0).normal(size=(3, 999))
    >>> bool(np.allclose(quantiles(d, (0.025,))[0], np.quantile(d, 0.025, axis=-1), atol=1e-15))
    True
    """
    s = np.sort(dev, axis=-1) if copy else dev
    if not copy:
        s.sort(axis=-1)
    out = []
    for prob in probs:
        pos = (s.shape[-1] - 1) * prob
        lo = math.floor(pos)
        low, high = s[..., lo].astype(np.float64), s[..., min(lo + 1, s.shape[-1] - 1)].astype(np.float64)
        out.append(low + (pos - lo) * (high - low))
    return out
