"""What the windowed backend's loops share: memory budgets, sweep thresholds, query blocks, pair weights."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from nadaraya._support.config import get_config
from nadaraya.kernels import Kernel

#: windows with at most this many keys are summed pair by pair rather than from moments
DIRECT_MAX_KEYS = 16


#: a prefix-moment window whose weight sum is below ``2**-12`` of the worst-case size of the
#: terms of the expansion (which is known per kernel) is summed directly instead
_LOSS = 2.0**-12


#: bytes of moment tables per parallel task (a run of keys whose tables stay in a core's cache)
_TABLE_BYTES = 2**19


#: bytes of scratch per (query, key) pair in the direct sums
_PAIR_BYTES = 96


def _working_bytes() -> int:
    return int(float(get_config()["working_memory"]) * 2**20)


def _pair_weights(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    kernel: Kernel,
    inv_h: NDArray[np.floating],
    qi: NDArray[np.intp],
    ki: NDArray[np.intp],
) -> NDArray[np.float64]:
    """The product of the kernel's profiles over the features for the pairs ``(qi, ki)``, with
    ``u`` made in the data's dtype exactly as the reference makes it; float64."""
    w = np.ones(qi.size)
    for j in range(queries.shape[1]):
        u = queries[qi, j] - keys[ki, j]
        u *= inv_h[j]
        w *= kernel.profile(u.astype(np.float64))
    return w


def _blocks(counts: NDArray[np.integer], max_pairs: int) -> list[tuple[int, int]]:
    """Consecutive query blocks of at most ``max_pairs`` pairs (at least one query each)."""
    ends = np.cumsum(counts)
    blocks = []
    start, done = 0, 0
    while start < counts.size:
        stop = int(np.searchsorted(ends, done + max_pairs, side="right"))
        stop = max(stop, start + 1)
        blocks.append((start, stop))
        done = int(ends[stop - 1])
        start = stop
    return blocks


def _sweep_threshold(coef: NDArray[np.float64]) -> float:
    """The direct-sum threshold of the sweep: moments about the query's cell centre, so
    ``|t| <= 3/2`` and ``|Q| <= 1/2`` (the other way round from :func:`route`'s)."""
    nf = coef.shape[0]
    qgrid = np.linspace(-0.5, 0.5, 101)
    powers = qgrid[:, None] ** np.arange(nf)[None, :]
    return float(np.max(np.abs(powers @ coef.T) @ (1.5 ** np.arange(nf)))) * _LOSS


def _tree_blocks(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    bandwidth: NDArray[np.floating],
    pair_bytes: int = _PAIR_BYTES,
) -> Iterator[tuple[int, int, NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]]:
    """d > 1: blocks of queries ``b0:b1`` (their pairs within ``pair_bytes`` each of the working
    memory) with their candidate pairs, a superset of each window: ``(b0, b1, local, ki, indptr)``,
    the pairs grouped by query (``indptr``), ``local`` the query of each within the block.
    Blocks without a pair are skipped."""
    from scipy.spatial import cKDTree

    k64 = keys.astype(np.float64)
    centre = 0.5 * (k64.min(axis=0) + k64.max(axis=0))
    scale = 1.0 / bandwidth.astype(np.float64)
    with np.errstate(over="ignore"):
        # x / h may overflow (a bandwidth near 1e-300): clipped, a far point stays far from
        # every window (the radius below grows with |zk|, so the candidates stay a superset)
        zk = np.clip((k64 - centre) * scale, -1e300, 1e300)
        zq = np.clip((queries.astype(np.float64) - centre) * scale, -1e300, 1e300)
    # a superset of the reference's window: its test |(q - k) * inv_h| <= 1 is made in the
    # data's dtype; the profile then decides each pair exactly as there
    radius = 1.0 + 8.0 * float(np.finfo(queries.dtype).eps) + 8.0 * np.finfo(np.float64).eps * (
        float(np.abs(zk).max()) + 1.0
    )
    tree = cKDTree(zk)
    counts = tree.query_ball_point(zq, radius, p=np.inf, return_length=True)
    max_pairs = max(1, _working_bytes() // pair_bytes)
    for b0, b1 in _blocks(counts, max_pairs):
        cnt = counts[b0:b1]
        total = int(cnt.sum())
        if total == 0:
            continue
        lists = tree.query_ball_point(zq[b0:b1], radius, p=np.inf)
        ki = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.intp, count=total)
        indptr = np.concatenate([[0], np.cumsum(cnt)]).astype(np.intp)
        local = np.repeat(np.arange(b1 - b0), cnt)
        yield b0, b1, local, ki, indptr
