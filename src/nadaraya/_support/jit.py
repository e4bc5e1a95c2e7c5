"""The numba plumbing shared by the backends and the bandwidth passes.

- :func:`generated`: loops generated as Python source per number of features (a compile-time
  constant), run once per number and kept;
- :func:`run_ranges`: one pool of Python threads running a jitted task that releases the GIL
  over contiguous ranges of rows; :func:`threads_for` keeps small passes on one thread;
- :func:`exp_flushed`, :func:`exp_fast` (float64) and :func:`exp_fast32` (float32):
  exponentials written with only arithmetic, ``floor``, integer conversion and bit casts, all
  inlined (``inline="always"``), so that a numba loop calling them compiles to SIMD code
  (libm's ``exp`` stops LLVM from vectorising the loop).

Method of the exponentials (Cody and Waite): ``x = n ln2 + r`` with ``n = round(x / ln2)`` and
``|r| <= ln2 / 2``, ``ln2`` split into a high part with trailing zero bits and a low correction
so that ``n ln2`` is exact; ``exp(r)`` by a polynomial, evaluated in Estrin's form (float64) or
Horner's (float32); then the factor ``2**n``. In float64 the polynomial has degree 11, with the
coefficients of the Chebyshev fit of ``exp`` on ``[-ln2/2, ln2/2]`` (:data:`_P`; relative
error 1.7e-17 with the coefficients rounded to float64); in float32 it is the degree-7 Taylor
polynomial (truncation below 4e-9). :func:`exp_fast` builds ``2**n`` as two factors so that
results in the subnormal range are right too; :func:`exp_flushed` needs no clamping and no
second factor (``n >= -1021`` there), and adds ``n`` to the exponent bits of the polynomial's
value with one integer addition.

Accuracy, against ``np.exp`` over the whole range (tests/backends/test_fused.py):

- float64: relative error at most 4.5e-16 (2 ulp) wherever the result is a normal number;
  subnormal results (``-745.1 < x < -708.4``) within 1 unit of the smallest subnormal;
  ``exp_fast(x) == 0`` for ``x < -745.2`` and for ``-inf``; ``inf`` for ``x > 709.78`` and
  ``inf``; NaN stays NaN. :func:`exp_flushed` has the same relative error for
  ``-708 < x < 709`` and is 0 for ``x <= -708`` and ``-inf``.
- float32: relative error below 3e-7 (about 2.5 ulp) for normal results, 0 below ``-103.98``,
  ``inf`` above ``88.73``, NaN stays NaN.
- Inlined into loops compiled with reassociation (the fused backend's), the argument reduction
  ``(x - n hi) - n lo`` may be reassociated, and the float64 relative error grows with ``|x|``:
  at most ``4.5e-16 + 5e-17 |x|`` (2.4e-14 measured at ``x = -706``). The fused loops call it on
  log weights relative to the largest, ``x <= 0``, so every term stays within ``4.5e-16`` of the
  largest term ``e^0``: the sums keep their accuracy.

numba is imported here: import this module only where numba runs.

Examples
--------
>>> import numba, numpy as np
>>> from nadaraya._support.jit import exp_fast
>>> f = numba.njit(lambda x: exp_fast(x))
>>> bool(abs(f(1.0) - np.e) < 1e-15), f(-np.inf), f(np.inf)
(True, 0.0, inf)
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic

__all__ = ["FLUSH", "SERIAL_WORK", "exp_fast", "exp_fast32", "exp_flushed", "generated", "run_ranges",
           "threads_for"]


# --- code generation and threads ------------------------------------------------------

def generated(
    cache: dict[int, dict[str, Any]], nf: Any, source: Callable[[int], str], label: str, names: dict[str, Any]
) -> dict[str, Any] | None:
    """The namespace of the Python source ``source(nf)``, run once per number of features with
    ``names`` as its globals and kept in ``cache``, where ``nf`` is a compile-time constant
    (numba types a closure constant as an integer literal); else None (numba then tries the
    other overloads). For the loops generated per number of features.

    Examples
    --------
    >>> ns = generated({}, numba.types.IntegerLiteral(2), lambda k: f"K = {k}", "demo", {})
    >>> ns["K"]
    2
    """
    if not isinstance(nf, numba.types.IntegerLiteral):
        return None
    k = nf.literal_value
    if k not in cache:
        namespace = {"__name__": __name__, **names}
        exec(compile(source(k), f"<{label}, {k} features>", "exec"), namespace)
        cache[k] = namespace
    return cache[k]



_POOL: tuple[ThreadPoolExecutor, int] | None = None  # the pool and its number of threads
_POOL_LOCK = threading.Lock()
_CHUNKS = 4


def run_ranges(task: Any, args: tuple[Any, ...], m: int, outputs: tuple[Any, ...], grain: int = 64,
               work: float | None = None) -> None:
    """Run ``task(*args, a, b, *outputs)`` over contiguous ranges ``a:b`` of ``range(m)`` on
    ``numba.get_num_threads()`` threads (one shared pool; the bandwidth passes and the
    windowed backend use it too), at least ``grain`` items per thread (1 for items that are
    each a lot of work).

    The jitted task releases the GIL (``nogil=True``), so Python threads run it on all cores,
    with no ``prange`` (and none of numba's parallel compilation). Ranges must write disjoint
    outputs. ``work`` (pairs times operations, when the caller knows it): below
    :data:`SERIAL_WORK` the task runs on the calling thread, as :func:`threads_for` would.

    Examples
    --------
    >>> import numpy as np
    >>> out = np.zeros(200)
    >>> def task(a, b, out):
    ...     out[a:b] = np.arange(a, b)
    >>> run_ranges(task, (), 200, (out,))
    >>> bool((out == np.arange(200)).all())
    True
    """
    global _POOL
    threads = max(1, min(numba.get_num_threads(), -(-m // grain)))
    if threads == 1 or (work is not None and work < SERIAL_WORK):
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


#: below this much work (pairs times operations) a pass runs on one thread: waking the thread
#: pool costs more than it saves (tens of milliseconds on a busy machine)
SERIAL_WORK = 4e6


@contextlib.contextmanager
def threads_for(work: float) -> Iterator[None]:
    """Run the enclosed passes on one numba thread when ``work`` is small.

    Examples
    --------
    >>> with threads_for(100):
    ...     numba.get_num_threads()
    1
    """
    if work >= SERIAL_WORK:
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(old)



# --- float64 -------------------------------------------------------------------------
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # 32 significant bits: n * _LN2_HI is exact for |n| < 2**21
_LN2_LO = 1.90821492927058770002e-10
_X_MAX = 709.782712893384  # log(DBL_MAX)
_X_MIN = -745.1332191019412  # log of the smallest subnormal / 2: below it, exp rounds to 0
#: :func:`exp_flushed` returns 0 at and below this argument (``exp(-708)`` is above the smallest
#: normal number, ``2**-1022 = exp(-708.4)``)
FLUSH = -708.0
#: coefficients 0 .. 11 of the Chebyshev fit of ``exp(r)`` on ``[-ln2/2, ln2/2]``, computed with
#: ``mpmath.chebyfit(mpmath.exp, [-a, a], 12)`` at 40 digits (``a = ln2/2``) and rounded to
#: float64: relative error 3.2e-18 with exact coefficients, 1.7e-17 with these (c0 = c1 = 1 exactly)
_P = (1.0, 1.0, 0.5000000000000019, 0.1666666666666668, 0.0416666666664881, 0.008333333333319601,
      0.0013888888952314775, 0.00019841269890047113, 2.4801485482328494e-05, 2.755724091857897e-06,
      2.763263963904103e-07, 2.5110037605963777e-08)
_P2, _P3, _P4, _P5, _P6, _P7, _P8, _P9, _P10, _P11 = _P[2:]

# --- float32 -------------------------------------------------------------------------
_F = np.float32
_LOG2E_F = _F(1.4426950408889634)
_LN2_HI_F = _F(0.693145751953125)  # 16 significant bits
_LN2_LO_F = _F(1.428606765330187e-06)
_X_MAX_F = _F(88.72283)
_X_MIN_F = _F(-103.97208)
_HALF_F = _F(0.5)
_ONE_F = _F(1.0)
_ZERO_F = _F(0.0)
_INF_F = _F(np.inf)
_CF = tuple(_F(1.0 / float(np.prod(np.arange(1, k + 1, dtype=np.float64)))) for k in range(7, 1, -1))
_F7, _F6, _F5, _F4, _F3, _F2 = _CF


def _bitcast(source: Any, target: Any) -> Any:
    """An intrinsic that reinterprets the bits of a ``source`` number as a ``target`` number
    of the same width (an LLVM bitcast, which vectorises)."""

    @intrinsic
    def cast(typingctx: Any, value: Any) -> Any:
        if value != source:
            return None

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.bitcast(args[0], context.get_value_type(target))

        return target(source), codegen

    return cast


_bits_to_float64 = _bitcast(types.int64, types.float64)
_bits_to_float32 = _bitcast(types.int32, types.float32)
_float64_to_bits = _bitcast(types.float64, types.int64)


@numba.njit(inline="always", cache=True)
def _reduced(x: float) -> tuple[float, float]:  # pragma: no cover - compiled
    """``(t, exp(r))`` with ``x = t ln2 + r``, ``t`` an integer and ``|r| <= ln2 / 2``."""
    t = np.floor(x * _LOG2E + 0.5)
    r = (x - t * _LN2_HI) - t * _LN2_LO
    # Estrin's scheme: a dependency chain of 5 operations instead of Horner's 11 (1.5x faster here)
    r2 = r * r
    r4 = r2 * r2
    b0 = (1.0 + r) + (_P2 + _P3 * r) * r2
    b1 = (_P4 + _P5 * r) + (_P6 + _P7 * r) * r2
    b2 = (_P8 + _P9 * r) + (_P10 + _P11 * r) * r2
    return t, (b0 + b1 * r4) + b2 * (r4 * r4)


@numba.njit(inline="always", cache=True)
def exp_flushed(x: float) -> float:  # pragma: no cover - compiled
    """``exp(x)`` for ``x < 709``, or 0 where ``x <= FLUSH`` (vectorisable, see the module docstring).

    The flush exists for speed: computing a subnormal result costs a microcode assist of about
    100 cycles on x86, and in a streamed block of keys most far keys would land there. It also
    makes ``2**t`` a normal number, so it is added to the exponent bits of ``exp(r)`` (in
    ``[0.7, 1.5)``) with one integer addition, and needs no clamping. No check for ``x >= 709``
    (the fused loops' arguments are at most a rounding error above 0): the result is then wrong.

    Examples
    --------
    >>> import numba, numpy as np
    >>> f = numba.njit(lambda x: exp_flushed(x))
    >>> bool(abs(f(-700.5) / np.exp(-700.5) - 1) < 1e-15), f(-708.0), f(-np.inf)
    (True, 0.0, 0.0)
    """
    t, p = _reduced(x if x > FLUSH else 0.0)
    y = _bits_to_float64(_float64_to_bits(p) + (np.int64(t) << 52))
    return y if x > FLUSH else 0.0


@numba.njit(inline="always", cache=True)
def exp_fast(x: float) -> float:  # pragma: no cover - compiled
    """``exp(x)`` for a float64, vectorisable inside numba loops (see the module docstring).

    Examples
    --------
    >>> import numba, numpy as np
    >>> f = numba.njit(lambda x: exp_fast(x))
    >>> bool(abs(f(-700.5) / np.exp(-700.5) - 1) < 1e-15)
    True
    """
    # clamp first so that the integer conversion below is always defined (NaN -> _X_MIN)
    xc = x if x > _X_MIN else _X_MIN
    xc = xc if xc < _X_MAX else _X_MAX
    t, p = _reduced(xc)
    n = np.int64(t)  # in [-1075, 1024]
    n1 = n >> 1
    n2 = n - n1  # each in [-538, 512]: 2**n1 and 2**n2 are normal numbers
    s1 = _bits_to_float64((n1 + 1023) << 52)
    s2 = _bits_to_float64((n2 + 1023) << 52)
    y = (p * s1) * s2
    y = y if x > _X_MIN else 0.0
    y = y if x < _X_MAX else np.inf
    return y if x == x else x


@numba.njit(inline="always", cache=True)
def exp_fast32(x: np.float32) -> np.float32:  # pragma: no cover - compiled
    """``exp(x)`` for a float32, vectorisable inside numba loops (see the module docstring).

    Examples
    --------
    >>> import numba, numpy as np
    >>> f = numba.njit(lambda x: exp_fast32(x))
    >>> bool(abs(f(np.float32(1.0)) - np.e) < 1e-6)
    True
    """
    xc = x if x > _X_MIN_F else _X_MIN_F
    xc = xc if xc < _X_MAX_F else _X_MAX_F
    t = np.floor(xc * _LOG2E_F + _HALF_F)
    r = (xc - t * _LN2_HI_F) - t * _LN2_LO_F
    p = _F7
    p = p * r + _F6
    p = p * r + _F5
    p = p * r + _F4
    p = p * r + _F3
    p = p * r + _F2
    p = p * r + _ONE_F
    p = p * r + _ONE_F
    n = np.int64(t)  # in [-150, 128]
    n1 = n >> 1  # numba widens int32 arithmetic to int64; narrow again for the bit cast
    n2 = n - n1
    s1 = _bits_to_float32(np.int32((n1 + 127) << 23))
    s2 = _bits_to_float32(np.int32((n2 + 127) << 23))
    y = (p * s1) * s2
    y = y if x > _X_MIN_F else _ZERO_F
    y = y if x < _X_MAX_F else _INF_F
    return y if x == x else x
