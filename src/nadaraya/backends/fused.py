"""The fused multi-core backend: one numba loop per kernel, streaming keys in cache-sized blocks.

For each range of queries (one task per range, run by a pool of threads on jitted code that
releases the GIL, ``numba.get_num_threads()`` of them) the keys stream past in
blocks of :data:`KEY_BLOCK` that stay in the L1/L2 cache; each query's block of product-kernel
terms goes to a small per-task scratch row, never to an (m, n) matrix, and merges into the
query's :class:`~nadaraya.partials.Partials` with the running maximum of FlashAttention.
Log-domain kernels (gaussian, laplacian, logistic, constant) use the vectorisable exponential
of :mod:`nadaraya.backends._numba_exp`, which is what makes the loop run at SIMD speed.

Specialisation: the loop is built per kernel by a small factory in which the kernel's number
is a frozen closure constant, so each kernel gets its own machine code with its expression
inlined and the other branches folded away, and nothing is passed into jitted code as a
function. Compiled code is cached on disk (``cache=True``; numba keys the cache on the closure
constant): the first call of a kernel in a fresh environment compiles (about 4 s here), later
processes load it. Rows of keys and values are taken as 1-D views indexed by the loop counter,
so LLVM sees unit strides and vectorises (``kt[f, k0 + j]`` compiles to gathers).

Per key block and query: the features' terms go to the scratch row (in d = 1 the same pass takes
the row's maximum; in d > 1 a vectorised reduction follows), then one pass takes the
exponentials, the weights and the first output. Exponentials below ``exp(-708)`` of the block's
largest are flushed to 0 rather than computed as subnormals (a microcode assist per far key,
which made W1 up to 2x slower; the sums change by less than ``KEY_BLOCK * 2**-1022`` relative).

Distances are exact differences ``(q_j - k_j) / h_j``, as in the reference backend. The
``|q|^2 + |k|^2 - 2 q.k`` form computed as a matrix product was considered for the Gaussian in
d > 1 and rejected: its rounding error in ``u^2`` is about ``eps |q / h|^2`` even on centred
data, which breaks the 1e-12 agreement with the reference as soon as the data span more than a
few tens of bandwidths, and for the small d where this backend is used it saves only the
``d`` subtractions per pair, not the exponential that dominates.

Accuracy: float64 results equal the reference backend's to about 1e-15 relative (the
exponential is within 2 ulp of ``np.exp``, and the sums are taken in another order). float32
inputs are computed in float64 and rounded once at the end, so they are at least as accurate
as the float32 reference (and run at float64 speed).

Examples
--------
>>> import numpy as np
>>> from nadaraya.kernels import get
>>> from nadaraya.backends import fused, reference
>>> rng = np.random.default_rng(0)
>>> x = rng.uniform(size=(50, 2)); v = rng.normal(size=(50, 1))
>>> a = fused.partials(x, x, v, kernel=get("gaussian"), bandwidth=np.array([0.1, 0.2]))
>>> b = reference.partials(x, x, v, kernel=get("gaussian"), bandwidth=np.array([0.1, 0.2]))
>>> bool(np.allclose(a.finalize(), b.finalize(), rtol=1e-12, atol=0))
True
"""

from __future__ import annotations

import itertools
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from .. import _threads
from ..kernels import Kernel
from ..partials import Partials
from ._numba_exp import exp_fast

__all__ = ["KEY_BLOCK", "KINDS", "partials", "supports"]

#: kernel name -> the constant that selects its expression in the jitted code. The first four
#: are computed in the log domain (their kernels have a log-profile in the registry).
KINDS: dict[str, int] = {
    "gaussian": 0,
    "laplacian": 1,
    "logistic": 2,
    "constant": 3,
    "epanechnikov": 4,
    "boxcar": 5,
    "triangular": 6,
    "biweight": 7,
    "triweight": 8,
    "tricube": 9,
    "cosine": 10,
    "parzen": 11,
}
_N_LOG = 4

#: keys per streamed block: the block of keys, its scratch row and its values stay in L1/L2.
KEY_BLOCK = 2048

_FASTMATH = {"contract", "reassoc"}  # FMA and reordered sums (so reductions vectorise); no nnan/ninf
#: the loop also assumes no NaN (inputs are finite, and no expression it keeps makes one), so that
#: LLVM vectorises the running maximum; infinities stay (``-inf`` log weights are meaningful)
_FASTMATH_MAX = {"contract", "reassoc", "nnan", "nsz"}
#: exponentials below ``exp(_FLUSH)`` of a block's largest are taken as 0 (see ``_exp_flushed``)
_FLUSH = -708.0
_PI_4 = math.pi / 4.0
_PI_2 = math.pi / 2.0


@numba.njit(inline="always", cache=True, fastmath=_FASTMATH)
def _term(kind: int, u: float) -> float:  # pragma: no cover - compiled
    """One feature's factor: ``log K(u)`` for log-domain kinds, ``K(u)`` for the others.

    The same formulas as the profiles of :mod:`nadaraya.kernels` (tests/test_fused.py checks
    each against them), written for scalars because numba cannot take the array namespace.
    """
    a = abs(u)
    if kind == 0:
        return -0.5 * u * u
    if kind == 1:
        return -a
    if kind == 2:
        return -a - 2.0 * math.log1p(exp_fast(-a))
    if kind == 3:
        return 0.0
    inside = a <= 1.0
    if kind == 4:
        return 0.75 * (1.0 - u * u) if inside else 0.0
    if kind == 5:
        return 0.5 if inside else 0.0
    if kind == 6:
        return 1.0 - a if inside else 0.0
    if kind == 7:
        t = 1.0 - u * u
        return 15.0 / 16.0 * (t * t) if inside else 0.0
    if kind == 8:
        t = 1.0 - u * u
        return 35.0 / 32.0 * (t * t * t) if inside else 0.0
    if kind == 9:
        t = 1.0 - a * a * a
        return 70.0 / 81.0 * (t * t * t) if inside else 0.0
    if kind == 10:
        return _PI_4 * math.cos(_PI_2 * u) if inside else 0.0
    # kind == 11, parzen
    b = 1.0 - a
    outer = 8.0 / 3.0 * (b * b * b) if inside else 0.0
    return 4.0 / 3.0 - 8.0 * a * a + 8.0 * (a * a * a) if a <= 0.5 else outer


@numba.njit(cache=True, fastmath=_FASTMATH_MAX)
def _block_max(buf: NDArray[np.float64], nb: int) -> float:  # pragma: no cover - compiled
    """``max(buf[:nb])``, vectorised: the scratch row holds no NaN, so ``nnan`` is true here."""
    top = -np.inf
    for j in range(nb):
        top = top if top > buf[j] else buf[j]
    return top


@numba.njit(inline="always", cache=True, fastmath=_FASTMATH)
def _exp_flushed(x: float) -> float:  # pragma: no cover - compiled
    """``exp(x)``, or 0 where the result would be subnormal (``x < _FLUSH``).

    Computing a subnormal result costs a microcode assist of ~100 cycles on x86, and in a
    streamed block most far keys land there (``exp_fast`` clamps its argument to -745.1 and
    computes 2**-1074 before selecting 0): up to 2x slower overall. The flushed terms are below
    ``2**-1022`` of the block's largest, which is 1, so the sums change by less than
    ``KEY_BLOCK * 2**-1022`` relative.
    """
    y = exp_fast(x if x > _FLUSH else 0.0)
    return y if x > _FLUSH else 0.0


@numba.njit(inline="always", cache=True, fastmath=_FASTMATH_MAX)
def _pass1(kind: int, log_domain: bool, src, dst, qa, ha, ka, nb):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``dst = src (+ or *) term(a)`` over one key block; returns ``max(dst)`` from the same pass."""
    top = -np.inf
    for j in range(nb):
        ta = _term(kind, (qa - ka[j]) * ha)
        t = src[j] + ta if log_domain else src[j] * ta
        dst[j] = t
        top = top if top > t else t
    return top


@numba.njit(inline="always", cache=True, fastmath=_FASTMATH)
def _pass_more(kind: int, log_domain: bool, buf, qa, ha, ka, nb):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``buf (+ or *)= term(a)`` over one key block, in place."""
    for j in range(nb):
        ta = _term(kind, (qa - ka[j]) * ha)
        buf[j] = buf[j] + ta if log_domain else buf[j] * ta


def _compile(kind: int):  # type: ignore[no-untyped-def]
    """The fused loop specialised to one kernel: ``kind`` is a frozen closure constant, so
    numba folds the other kernels' branches away, and its on-disk cache keys on the value."""
    log_domain = kind < _N_LOG

    @numba.njit(cache=True, nogil=True, fastmath=_FASTMATH_MAX)
    def task(q, kt, vt, inv_h, key_weight, exclude, q0, q1, shift, weight, value):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        """Accumulate every key into the partials of queries ``q0:q1`` (updated in place).

        q (m, d), kt (d, n) and vt (p, n) float64 C-contiguous; ``key_weight`` (n,) is
        ``log sample_weight`` for log-domain kinds and ``sample_weight`` otherwise; ``exclude``
        (m,) int64 key index per query (-1: none); shift (m,), weight (m,), value (m, p).
        """
        d = q.shape[1]
        n = kt.shape[1]
        p = vt.shape[0]
        buf = np.empty(KEY_BLOCK, dtype=np.float64)
        for k0 in range(0, n, KEY_BLOCK):
            nb = min(n, k0 + KEY_BLOCK) - k0
            # 1-D views indexed by the loop counter alone: LLVM then sees unit strides and no
            # negative-index wraparound, and vectorises (``kt[f, k0 + j]`` makes gathers)
            kw = key_weight[k0 : k0 + nb]
            v0 = vt[0, k0 : k0 + nb]
            for i in range(q0, q1):
                # the features into the scratch row; in d = 1 the one pass (reading the key
                # weights, writing the row) also takes the row's maximum: a pass fewer. (A maximum
                # in a pass updating the row in place, or in the exp pass, does not vectorise.)
                if d == 1:
                    top = _pass1(kind, log_domain, kw, buf, q[i, 0], inv_h[0], kt[0, k0 : k0 + nb], nb)
                else:
                    buf[:nb] = kw
                for f in range(1 if d == 1 else 0, d):
                    _pass_more(kind, log_domain, buf, q[i, f], inv_h[f], kt[f, k0 : k0 + nb], nb)
                if d > 1:
                    top = _block_max(buf, nb)
                e = exclude[i] - k0
                if 0 <= e < nb:
                    if log_domain and buf[e] == top:  # the maximum was the excluded key's
                        buf[e] = -np.inf
                        top = _block_max(buf, nb)
                    buf[e] = -np.inf if log_domain else 0.0
                s = 0.0
                acc0 = 0.0  # the first output, summed in the same pass as the weights
                if log_domain:
                    if top == -np.inf:
                        continue
                    for j in range(nb):
                        w = _exp_flushed(buf[j] - top)
                        buf[j] = w
                        s += w
                        acc0 += w * v0[j]
                    old = shift[i]
                    if top > old:
                        scale_old = math.exp(old - top)
                        scale_new = 1.0
                        shift[i] = top
                    else:
                        scale_old = 1.0
                        scale_new = math.exp(top - old)
                else:
                    for j in range(nb):
                        s += buf[j]
                        acc0 += buf[j] * v0[j]
                    scale_old = 1.0
                    scale_new = 1.0
                weight[i] = weight[i] * scale_old + s * scale_new
                value[i, 0] = value[i, 0] * scale_old + acc0 * scale_new
                for c in range(1, p):
                    vc = vt[c, k0 : k0 + nb]
                    acc = 0.0
                    for j in range(nb):
                        acc += buf[j] * vc[j]
                    value[i, c] = value[i, c] * scale_old + acc * scale_new

    return task


_LOOPS: dict[int, Any] = {}


def supports(kernel: Kernel, d: int) -> bool:
    """Whether this backend has a compiled loop for ``kernel`` (every registered kernel, any d).

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("tricube"), 7)
    True
    """
    return kernel.name in KINDS and d >= 1


_POOL: tuple[ThreadPoolExecutor, int] | None = None  # the pool and its number of threads
_POOL_LOCK = threading.Lock()
_CHUNKS = 4


def _run(task: Any, args: tuple[Any, ...], m: int, outputs: tuple[Any, ...]) -> None:
    """Run ``task`` over contiguous ranges of queries on ``numba.get_num_threads()`` threads.

    The jitted task releases the GIL (``nogil=True``), so Python threads run it on all cores.
    This replaces a ``prange`` loop: numba's parallel compiler added about 1.7 s to each
    kernel's first compilation, which the 5 s budget could not afford.
    """
    global _POOL
    threads = max(1, min(numba.get_num_threads(), -(-m // 64)))
    if threads == 1:
        task(*args, 0, m, *outputs)
        return
    with _POOL_LOCK:
        if _POOL is None or _POOL[1] < threads:
            _POOL = (ThreadPoolExecutor(max_workers=threads, thread_name_prefix="nadaraya-fused"), threads)
        pool = _POOL[0]
    chunks = _CHUNKS * threads  # a few ranges per thread, so that a slow thread does not hold the rest
    edges = np.linspace(0, m, min(m, chunks) + 1).astype(np.int64)
    futures = [pool.submit(task, *args, int(a), int(b), *outputs) for a, b in itertools.pairwise(edges)]
    for f in futures:
        f.result()


def partials(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    values: NDArray[np.floating],
    *,
    kernel: Kernel,
    bandwidth: NDArray[np.floating],
    sample_weight: NDArray[np.floating] | None = None,
    exclude: NDArray[np.integer] | None = None,
) -> Partials:
    """Exact partial sums of every query over every key, on all cores.

    Same arguments and result as :func:`nadaraya.backends.reference.partials`.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.array([[1.0], [2.0], [3.0]]); v = np.array([[3.0], [5.0], [4.0]])
    >>> p = partials(np.array([[2.5]]), x, v, kernel=get("gaussian"), bandwidth=np.ones(1))
    >>> round(float(p.finalize()[0, 0]), 2)
    4.27
    """
    if not supports(kernel, queries.shape[1]):
        raise ValueError(
            f"kernel={kernel.name!r} has no compiled loop in the fused backend; "
            f"it supports: {', '.join(KINDS)}"
        )
    _threads.configure()
    dtype = queries.dtype
    m, n, p = queries.shape[0], keys.shape[0], values.shape[1]
    log_domain = kernel.log_domain
    f64 = np.float64
    q = np.ascontiguousarray(queries, dtype=f64)
    kt = np.ascontiguousarray(keys.T, dtype=f64)
    vt = np.ascontiguousarray(values.T, dtype=f64)
    inv_h = 1.0 / np.asarray(bandwidth, dtype=f64)
    if sample_weight is None:
        key_weight = np.full(n, 0.0 if log_domain else 1.0)
    elif log_domain:
        with np.errstate(divide="ignore"):
            key_weight = np.log(np.asarray(sample_weight, dtype=f64))
    else:
        key_weight = np.ascontiguousarray(sample_weight, dtype=f64)
    ex = np.full(m, -1, dtype=np.int64) if exclude is None else np.ascontiguousarray(exclude, dtype=np.int64)
    shift = np.full(m, -np.inf if log_domain else 0.0)
    weight = np.zeros(m)
    value = np.zeros((m, p))
    kind = KINDS[kernel.name]
    if kind not in _LOOPS:
        _LOOPS[kind] = _compile(kind)
    _run(_LOOPS[kind], (q, kt, vt, inv_h, key_weight, ex), m, (shift, weight, value))
    if dtype != f64:
        return Partials(shift.astype(dtype), weight.astype(dtype), value.astype(dtype))
    return Partials(shift, weight, value)
