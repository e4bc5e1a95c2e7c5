"""The fused multi-core backend: one numba loop per kernel, streaming keys in cache-sized blocks.

For each range of queries (one task per range on :func:`nadaraya._support.jit.run_ranges`'s threads,
jitted code that releases the GIL) the keys stream past in blocks of :data:`KEY_BLOCK`; each
query's block of product-kernel terms goes to a small per-task scratch row, never to an (m, n)
matrix, and merges into the query's :class:`~nadaraya.partials.Partials` with the running
maximum of FlashAttention (Dao et al., 2022). Log-domain kernels (gaussian, laplacian,
logistic, constant) use the vectorisable exponential :func:`nadaraya._support.jit.exp_flushed`.

Specialisation: the loop is built per kernel (:func:`_compile`) and, for the gaussian and
laplacian, per number of features up to :data:`MAX_FUSED` (generated source,
:func:`_one_pass_source`, through :func:`nadaraya._support.jit.generated`); both are closure constants,
so each loop compiles only its own kernel's expression, and numba caches it on disk keyed on
them. Beyond ``MAX_FUSED`` features the first ``d - MAX_FUSED`` go through the scratch row.
Kernels of compact support take :mod:`nadaraya.backends._fused_compact` (keys in a tree of boxes,
nodes beyond a query's support skipped, one generated pass a pair) in 1-3 features where the
supports are small; otherwise they write the features' product to the scratch row and sum it.

Per key block and query, log-domain kernels take one pass against an upper bound of the
block's largest term (from the block's largest log sample weight and the query's distance to
the block's bounding box). A block whose sum under that bound is below ``exp(-300)`` is redone
with its exact maximum, so any term flushed to zero is below ``exp(-400)`` of the block's
largest. Hence the partials' ``shift`` is at least the maximum, not equal to it (``shift +
log(weight)`` is what the partials mean); float32 results move the weight's binary exponent
into the shift before rounding, so that no weight underflows. The left-out key of
leave-one-out gets log weight ``-inf``. Distances are exact differences ``(q_j - k_j) / h_j``,
as in the reference backend.

Local polynomial moments (``moments=r``, :mod:`nadaraya.backends._fused_moments`): each key
block's weights, once computed under its shift, also feed the unique entries of the moment sums
(exact differences ``k - q``), which merge with the weight's rescaling; ``moments=0`` compiles
without them. Degree 1 costs per pair ``d`` differences and about ``d (d + 3) / 2 + d p``
multiply-adds on top of the weight: measured 1.2x the plain pass at d = 1 and 1.75-2.0x at d = 5
(one thread; there the weight takes about 33 cycles per 8 pairs and the sums' 25 multiplies at
least 25, at one 512-bit multiply a cycle, so about 1.75x is the floor).

Complexity: O(m n d) time over ``numba.get_num_threads()`` threads (times O(d^(2r)) with
moments of degree r); O(threads KEY_BLOCK d) memory besides the inputs and the partials.

Accuracy: float64 results equal the reference backend's to about 1e-15 relative (the
exponential is within 2 ulp of ``np.exp``; the sums are taken in another order). float32 inputs
are computed in float64 and rounded once at the end.

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

import math
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support import threads as _threads
from nadaraya._support.jit import exp_flushed, generated, run_ranges
from nadaraya.backends import _fused_compact, _fused_moments
from nadaraya.backends._fused_moments import block_moments, block_values, merge_row, scratch
from nadaraya.kernels import Kernel
from nadaraya.partials import Partials

__all__ = ["KEY_BLOCK", "KINDS", "partials", "supports"]

_N_LOG = 4

#: keys per streamed block: the block of keys, its scratch row and its values stay in L1/L2.
KEY_BLOCK = 2048

_FASTMATH = {"contract", "reassoc"}  # FMA and reordered sums (so reductions vectorise); no nnan/ninf
#: the loop also assumes no NaN (inputs are finite, and no expression it keeps makes one), so that
#: LLVM vectorises the running maximum; infinities stay (``-inf`` log weights are meaningful)
_FASTMATH_MAX = {"contract", "reassoc", "nnan", "nsz"}
#: a block summed against an upper bound of its terms is redone exactly if its sum is below this
_REDO = math.exp(-300.0)
_PI_4 = math.pi / 4.0
_PI_2 = math.pi / 2.0


# One feature's factor per kernel: ``log K(u)`` for the log-domain kernels (the first _N_LOG),
# ``K(u)`` for the others. The same formulas as the profiles of :mod:`nadaraya.kernels`
# (tests/backends/test_fused.py checks each against them), written for scalars because numba cannot take
# the array namespace; normalising constants of the log-domain kernels are left out (they cancel).


def _gaussian(u: float) -> float:
    return -0.5 * u * u


def _laplacian(u: float) -> float:
    return -abs(u)


def _logistic(u: float) -> float:
    a = abs(u)
    return -a - 2.0 * math.log1p(math.exp(-a))


def _constant(u: float) -> float:
    return 0.0


def _epanechnikov(u: float) -> float:
    return 0.75 * (1.0 - u * u) if abs(u) <= 1.0 else 0.0


def _boxcar(u: float) -> float:
    return 0.5 if abs(u) <= 1.0 else 0.0


def _triangular(u: float) -> float:
    a = abs(u)
    return 1.0 - a if a <= 1.0 else 0.0


def _biweight(u: float) -> float:
    t = 1.0 - u * u
    return 15.0 / 16.0 * (t * t) if abs(u) <= 1.0 else 0.0


def _triweight(u: float) -> float:
    t = 1.0 - u * u
    return 35.0 / 32.0 * (t * t * t) if abs(u) <= 1.0 else 0.0


def _tricube(u: float) -> float:
    a = abs(u)
    t = 1.0 - a * a * a
    return 70.0 / 81.0 * (t * t * t) if a <= 1.0 else 0.0


def _cosine(u: float) -> float:
    return _PI_4 * math.cos(_PI_2 * u) if abs(u) <= 1.0 else 0.0


def _parzen(u: float) -> float:
    a = abs(u)
    b = 1.0 - a
    outer = 8.0 / 3.0 * (b * b * b) if a <= 1.0 else 0.0
    return 4.0 / 3.0 - 8.0 * a * a + 8.0 * (a * a * a) if a <= 0.5 else outer


_TERMS = (_gaussian, _laplacian, _logistic, _constant, _epanechnikov, _boxcar, _triangular, _biweight,
          _triweight, _tricube, _cosine, _parzen)
#: kernel name -> the constant that selects its expression in the jitted code. The first four
#: are computed in the log domain (their kernels have a log-profile in the registry).
KINDS: dict[str, int] = {f.__name__[1:]: kind for kind, f in enumerate(_TERMS)}
#: compiled as functions that LLVM inlines, except the logistic's, which LLVM leaves as a call
#: (2x slower); numba inlines that one itself (the others' conditional expressions trip numba's
#: SSA checks when inlined through the overload below)
_TERMS_JIT = tuple(numba.njit(fastmath=_FASTMATH_MAX, inline="always" if f is _logistic else "never")(f)
                   for f in _TERMS)


def _term(kind: int, u: float) -> float:
    """One feature's factor: ``log K(u)`` for log-domain kinds, ``K(u)`` for the others.

    In jitted code ``kind`` must be a compile-time constant (the loops' closure constant): only
    that kernel's expression is compiled and inlined, which keeps numba's compile time low (a
    function with every kernel's branch, inlined at each of its call sites, took seconds).

    Examples
    --------
    >>> _term(KINDS["gaussian"], 2.0), _term(KINDS["triangular"], 0.25)
    (-2.0, 0.75)
    """
    return _TERMS[kind](u)


@numba.extending.overload(_term, inline="always", prefer_literal=True)
def _term_compiled(kind, u):  # type: ignore[no-untyped-def]
    if not isinstance(kind, numba.types.IntegerLiteral):
        return None
    term = _TERMS_JIT[kind.literal_value]
    return lambda kind, u: term(u)


_fused_compact.NAMES["_term"] = _term


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


@numba.njit(inline="always", cache=True, fastmath=_FASTMATH_MAX)
def _prefix(kind, q, kt, kw, inv_h, i, k0, nb, buf, f0):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The log weights and the terms of features ``0 .. f0 - 1`` into the scratch row."""
    for j in range(nb):  # (a loop: slice assignment costs numba much more to compile)
        buf[j] = kw[j]
    for f in range(f0):
        _pass_more(kind, True, buf, q[i, f], inv_h[f], kt[f, k0 : k0 + nb], nb)


@numba.njit(inline="always", cache=True, fastmath=_FASTMATH_MAX)
def _stored_exp_sum(kind, src, q, i, kt, f0, k0, inv_h, v0, row, nb):  # type: ignore[no-untyped-def]  # pragma: no cover
    """A key block's log weights stored in ``row``, then their exact maximum ``top`` and the
    weights ``exp(term - top)`` in place: each difference is of two stored numbers, so the
    largest term weighs exactly one however large the log weights (a query far from every
    key, beyond the reach of the one-pass loops, whose two sweeps may round them apart).
    Returns ``top``, the weights' sum and the first output's."""
    for j in range(nb):
        row[j] = src[j]
    for f in range(f0, q.shape[1]):
        _pass_more(kind, True, row, q[i, f], inv_h[f], kt[f, k0 : k0 + nb], nb)
    top = -np.inf
    for j in range(nb):
        top = row[j] if row[j] > top else top
    s = 0.0
    acc0 = 0.0
    for j in range(nb):
        x = row[j] - top
        w = exp_flushed(x) if x > -708.0 else 0.0
        row[j] = w
        s += w
        acc0 += w * v0[j]
    return top, s, acc0


#: the most features whose terms a one-pass loop keeps in registers (``q``, ``1 / h`` of each in
#: two vector registers): more features go through the scratch row first
MAX_FUSED = 8
#: log-domain kinds whose loop is specialised to the number of features (the others take the
#: last feature in the one-pass loop: logistic calls libm's ``log1p``, constant has no terms)
_SPECIALISED = (0, 1)

_ONE_PASS = """
def top_of(kind, nf, src, q, i, kt, f0, k0, inv_h, nb):
    {views}
    top = -np.inf
    for j in range(nb):
        t = {terms}
        top = top if top > t else t
    return top


def exp_sum(kind, nf, src, q, i, kt, f0, k0, inv_h, v0, top, row, nb):
    {views}
    s = 0.0
    acc0 = 0.0
    for j in range(nb):
        w = exp_flushed({terms} - top)
        row[j] = w
        s += w
        acc0 += w * v0[j]
    return s, acc0
"""


def _one_pass_source(nf: int) -> str:
    """Python source of the one-pass loops over a key block for the last ``nf`` features.

    ``top_of`` returns the exact largest term ``src[j] + sum_f term((q_f - k_fj) / h_f)`` of
    the block; ``exp_sum`` writes the weights ``exp(term - top)`` into ``row`` and returns their
    sum and the first output's. Each feature's row of keys is a 1-D view named in the source
    (``k_3[j]`` is a unit-stride load that LLVM vectorises; ``kt[f, k0 + j]`` with ``f`` a loop
    variable compiles to gathers), and its query coordinate and inverse bandwidth are scalars
    held in registers, so a pair costs ``nf`` loads rather than a load and a store of the
    scratch row per feature.
    """
    views = "\n    ".join(
        f"q_{f} = q[i, f0 + {f}]; h_{f} = inv_h[f0 + {f}]; k_{f} = kt[f0 + {f}, k0 : k0 + nb]"
        for f in range(nf)
    )
    terms = " + ".join(["src[j]"] + [f"_term(kind, (q_{f} - k_{f}[j]) * h_{f})" for f in range(nf)])
    return _ONE_PASS.format(views=views, terms=terms)


_GENERATED: dict[int, dict[str, Any]] = {}


def _generated(nf: Any, name: str) -> Any:
    """The generated loop ``name`` for ``nf`` features (see :func:`generated`); else None."""
    names = {"np": np, "_term": _term, "exp_flushed": exp_flushed}
    namespace = generated(_GENERATED, nf, _one_pass_source, "fused one-pass loops", names)
    return None if namespace is None else namespace[name]


def _block_top(kind, nf, src, q, i, kt, f0, k0, inv_h, nb):  # type: ignore[no-untyped-def]
    """The exact largest term of a key block; compiled only (see :func:`_one_pass_source`)."""
    raise NotImplementedError("only callable from jitted code")


def _block_exp_sum(kind, nf, src, q, i, kt, f0, k0, inv_h, v0, top, row, nb):  # type: ignore[no-untyped-def]
    """A key block's weights, their sum and the first output's; compiled only."""
    raise NotImplementedError("only callable from jitted code")


_OVERLOAD = dict(inline="never", prefer_literal=True, jit_options={"fastmath": _FASTMATH_MAX})


@numba.extending.overload(_block_top, **_OVERLOAD)
def _block_top_impl(kind, nf, src, q, i, kt, f0, k0, inv_h, nb):  # type: ignore[no-untyped-def]
    return _generated(nf, "top_of")


@numba.extending.overload(_block_exp_sum, **_OVERLOAD)
def _block_exp_sum_impl(kind, nf, src, q, i, kt, f0, k0, inv_h, v0, top, row, nb):  # type: ignore[no-untyped-def]
    return _generated(nf, "exp_sum")


def _block_exp_linear(kind, nf, src, q, i, kt, f0, k0, inv_h, v0, top, row, nb, p, out):  # type: ignore[no-untyped-def]
    """:func:`_block_exp_sum` with the block's degree-1 moment sums in the same loop (into
    ``out``, see :func:`~nadaraya.backends._fused_moments.exp_linear_source`); compiled only."""
    raise NotImplementedError("only callable from jitted code")


_GENERATED_LINEAR: dict[int, dict[str, Any]] = {}
#: the most features whose degree-1 sums share the exponentials' loop: one thread, 2048 keys,
#: weights then sums / both in one loop, ns a pair: 1.04 / 0.97 at d = 1, 1.22 / 1.25 at d = 2,
#: 2.3 / 2.9 at d = 5 (25 sums then crowd the exponential's registers)
_FUSE_LINEAR = 2


@numba.extending.overload(_block_exp_linear, **_OVERLOAD)
def _block_exp_linear_impl(kind, nf, src, q, i, kt, f0, k0, inv_h, v0, top, row, nb, p, out):  # type: ignore[no-untyped-def]
    names = {"_term": _term, "exp_flushed": exp_flushed}
    namespace = generated(_GENERATED_LINEAR, nf, _fused_moments.exp_linear_source, "exp and moments", names)
    return None if namespace is None else namespace["exp_linear"]


# The compiled task's arguments: q (m, d), kt (d, n) and vt (p, n) float64 C-contiguous; ``key_weight``
# (n,) is ``log sample_weight`` for log-domain kinds and ``sample_weight`` otherwise; ``exclude`` (m,) int64
# key index per query (-1: none); lo, hi (d, blocks) each key block's bounding box and kw_top (blocks,) its
# largest key weight (log-domain kinds); ``walk`` the moment sums' table
# (:func:`~nadaraya.backends._fused_moments.table`); shift (m,), weight (m,), value (m, p), mom (m, width)
# the flat moment sums (width 0 at degree 0).
def _compile(kind: int, nf: int, degree: int = 0, md: int = 0):  # type: ignore[no-untyped-def]
    """The fused loop specialised to one kernel and, for log-domain kernels, to the number of
    features ``nf`` whose terms the one-pass loop computes in registers (the last ``nf``; any
    others go through the scratch row first). ``kind`` and ``nf`` are frozen closure constants,
    so numba folds the other kernels' branches away, and its on-disk cache keys on the values.
    ``degree`` > 0 adds a local polynomial's moment sums from the block's weights (``md``: see
    :func:`~nadaraya.backends._fused_moments.block_moments`; ``fuse``: in the one-pass loop)."""
    log_domain = kind < _N_LOG
    fuse = degree == 1 and kind in _SPECIALISED and 0 < md == nf <= _FUSE_LINEAR

    @numba.njit(cache=True, nogil=True, fastmath=_FASTMATH_MAX)
    def task(q, kt, vt, inv_h, key_weight, exclude, lo, hi, kw_top, walk, q0, q1, shift, weight, value, mom):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        """Accumulate every key into the partials of queries ``q0:q1`` (in place; see above)."""
        d = q.shape[1]
        n = kt.shape[1]
        p = vt.shape[0]
        buf = np.empty(KEY_BLOCK, dtype=np.float64)
        row = np.empty(KEY_BLOCK, dtype=np.float64) if log_domain else buf  # the block's weights
        kwb = np.empty(KEY_BLOCK, dtype=np.float64)  # this task's copy of the block's key weights
        if degree > 0:  # the moment sums' scratch rows and one block's flat sums
            us, ps, msum = scratch(d, degree, mom.shape[1], KEY_BLOCK)
        for k0 in range(0, n, KEY_BLOCK):
            nb = min(n, k0 + KEY_BLOCK) - k0
            b = k0 // KEY_BLOCK
            # 1-D views indexed by the loop counter alone: LLVM then sees unit strides and no
            # negative-index wraparound, and vectorises (``kt[f, k0 + j]`` makes gathers)
            for j in range(nb):
                kwb[j] = key_weight[k0 + j]
            kw = kwb[:nb]
            v0 = vt[0, k0 : k0 + nb]
            tries = 0
            redone = 0
            for i in range(q0, q1):
                e = exclude[i] - k0
                excluded = 0 <= e < nb
                if excluded:  # the left-out key weighs nothing (the bounds stay valid)
                    kwb[e] = -np.inf if log_domain else 0.0
                s = 0.0
                acc0 = 0.0
                stored = False  # the row's weights from stored terms (the moments then from them)
                if log_domain:
                    # an upper bound of the block's terms, from the distance to its bounding box
                    top = kw_top[b]
                    for f in range(d):
                        qa = q[i, f]
                        dist = lo[f, b] - qa if qa < lo[f, b] else (qa - hi[f, b] if qa > hi[f, b] else 0.0)
                        top += _term(kind, dist * inv_h[f])
                    if top != -np.inf:
                        f0 = d - nf  # features before the ones the one-pass loop takes
                        if f0 > 0:
                            _prefix(kind, q, kt, kw, inv_h, i, k0, nb, buf, f0)
                        src = buf[:nb] if f0 > 0 else kw
                        # where the bound keeps failing in this block (sparse keys), go exact at once
                        exact = tries >= 32 and 2 * redone > tries
                        tries += not exact
                        while True:
                            if exact:
                                top = _block_top(kind, nf, src, q, i, kt, f0, k0, inv_h, nb)
                                if top == -np.inf:
                                    break
                            if fuse:
                                s, acc0 = _block_exp_linear(kind, nf, src, q, i, kt, f0, k0, inv_h, v0, top,
                                                            row, nb, p, msum)
                            else:
                                s, acc0 = _block_exp_sum(kind, nf, src, q, i, kt, f0, k0, inv_h, v0, top,
                                                         row, nb)
                            # a bound far above the true maximum may have flushed terms that matter
                            # (and at log weights beyond 1e13 or so, a bound that differs from the
                            # terms by their rounding alone leaves the sum meaningless): redo exactly
                            if exact or _REDO <= s <= nb + 1.0:
                                break
                            exact = True
                            redone += 1
                        if exact and top != -np.inf and not (0.5 <= s <= nb + 1.0):
                            # the two loops rounded the huge log weights of far keys apart:
                            # the terms stored once, their maximum and the weights from those
                            top, s, acc0 = _stored_exp_sum(kind, src, q, i, kt, f0, k0, inv_h, v0, row, nb)
                            stored = True
                    if top == -np.inf:
                        if excluded:
                            kwb[e] = key_weight[k0 + e]
                        continue
                    old = shift[i]
                    if top > old:
                        scale_old = math.exp(old - top)
                        scale_new = 1.0
                        shift[i] = top
                    else:
                        scale_old = 1.0
                        scale_new = math.exp(top - old)
                else:
                    _pass1(kind, False, kw, buf, q[i, 0], inv_h[0], kt[0, k0 : k0 + nb], nb)
                    for f in range(1, d):
                        _pass_more(kind, False, buf, q[i, f], inv_h[f], kt[f, k0 : k0 + nb], nb)
                    for j in range(nb):
                        s += buf[j]
                        acc0 += buf[j] * v0[j]
                    scale_old = 1.0
                    scale_new = 1.0
                if excluded:
                    kwb[e] = key_weight[k0 + e]
                weight[i] = weight[i] * scale_old + s * scale_new
                value[i, 0] = value[i, 0] * scale_old + acc0 * scale_new
                for c in range(1, p):
                    vc = vt[c, k0 : k0 + nb]
                    acc = 0.0
                    for j in range(nb):
                        acc += row[j] * vc[j]
                    value[i, c] = value[i, c] * scale_old + acc * scale_new
                if degree > 0:
                    if not fuse or stored:
                        block_moments(md, row, kt, vt, q, i, k0, nb, us, ps, walk, msum)
                    elif p > 1:
                        block_values(md, row, kt, vt, q, i, k0, nb, msum)
                    merge_row(mom, i, msum, scale_old, scale_new)

    return task


_LOOPS: dict[tuple[int, ...], Any] = {}


def _features_in_registers(kind: int, d: int) -> int:
    """How many features the one-pass loop of ``kind`` takes in registers for ``d`` features."""
    if kind in _SPECIALISED:
        return min(d, MAX_FUSED)
    return 1 if kind < _N_LOG else 0


def _block_bounds(kt: NDArray[np.float64], key_weight: NDArray[np.float64]) -> tuple[Any, Any, Any]:
    """Per key block of :data:`KEY_BLOCK`: the per-feature minimum and maximum (d, blocks) and
    the largest key weight (blocks,)."""
    d, n = kt.shape
    if n == 0:
        return np.empty((d, 0)), np.empty((d, 0)), np.empty(0)
    blocks = -(-n // KEY_BLOCK)
    pad = blocks * KEY_BLOCK - n
    edge = lambda a: np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, pad)], mode="edge")  # noqa: E731
    kb = edge(kt).reshape(d, blocks, KEY_BLOCK)
    kw_top = edge(key_weight).reshape(blocks, KEY_BLOCK).max(axis=1)
    return kb.min(axis=2), kb.max(axis=2), kw_top


def supports(kernel: Kernel, d: int) -> bool:
    """Whether this backend has a compiled loop for ``kernel`` (every registered kernel, any d).

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("tricube"), 7)
    True
    """
    return kernel.name in KINDS and d >= 1


def partials(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    values: NDArray[np.floating],
    *,
    kernel: Kernel,
    bandwidth: NDArray[np.floating],
    sample_weight: NDArray[np.floating] | None = None,
    exclude: NDArray[np.integer] | None = None,
    moments: int = 0,
) -> Partials:
    """Exact partial sums of every query over every key, on all cores.

    Same arguments and result as :func:`nadaraya.backends.reference.partials`. With
    ``moments=r > 0`` each block's weights also feed the moment sums of a local polynomial of
    degree ``r`` (in the order of :func:`nadaraya.backends.reference.moment_shapes`), merged
    under the same shift; ``moments=0`` runs the plain loop.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.array([[1.0], [2.0], [3.0]]); v = np.array([[3.0], [5.0], [4.0]])
    >>> p = partials(np.array([[2.5]]), x, v, kernel=get("gaussian"), bandwidth=np.ones(1))
    >>> round(float(p.finalize()[0, 0]), 2)
    4.27
    >>> p = partials(np.array([[2.5]]), x, v, kernel=get("gaussian"), bandwidth=np.ones(1), moments=1)
    >>> [s.shape for s in p.moments]
    [(1, 1), (1, 1, 1), (1, 1, 1)]
    """
    moments = int(moments)  # checked against CAPABILITIES by nadaraya.backends.compute
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
    d = queries.shape[1]
    degree = int(moments)
    compact = _fused_compact.serves(log_domain, d, degree, m, n=kt.shape[1], p=p)
    if compact and _fused_compact.covers(kt, inv_h) <= _fused_compact.MAX_COVER:  # a tree, one pass a pair
        shift = np.zeros(m)
        weight, value, mom = _fused_compact.run(kind, q, kt, vt, inv_h, key_weight, ex, degree,
                                                _fused_moments.width(degree, d, p))
        return _finish(dtype, shift, weight, value, mom, degree, d, p)
    md = _fused_moments.generated_key(degree, d)
    key = (kind, _features_in_registers(kind, d)) + ((degree, md) if degree else ())
    if key not in _LOOPS:
        _LOOPS[key] = _compile(*key)
    lo, hi, kw_top = _block_bounds(kt, key_weight)
    walk = _fused_moments.table(degree, d, p)
    mom = np.zeros((m, _fused_moments.width(degree, d, p)))
    run_ranges(_LOOPS[key], (q, kt, vt, inv_h, key_weight, ex, lo, hi, kw_top, walk), m,
               (shift, weight, value, mom), work=float(m) * kt.shape[-1] * (d + 1 + p + mom.shape[1]))
    return _finish(dtype, shift, weight, value, mom, degree, d, p)


def _finish(dtype: Any, shift: Any, weight: Any, value: Any, mom: Any, degree: int, d: int,
            p: int) -> Partials:
    """The partials in the inputs' dtype, the flat moment sums expanded."""
    if dtype != np.float64:
        # the weight may be as small as exp(-300) (the shift is an upper bound, not the maximum):
        # move its binary exponent into the shift, exactly, before rounding to float32
        mant, expo = np.frexp(weight)
        shift = np.where(weight > 0, shift + expo * math.log(2.0), shift)
        value = np.ldexp(value, -expo[:, None])
        mom = np.ldexp(mom, -expo[:, None]) if degree else mom
        weight = mant
        with np.errstate(over="ignore"):  # a far query's shift may pass float32's range: -inf,
            shift = shift.astype(dtype)  # and pooling recomputes such queries (FAR_LOG_WEIGHT)
        weight, value, mom = weight.astype(dtype), value.astype(dtype), mom.astype(dtype)
    return Partials(shift, weight, value, _fused_moments.expand(mom, degree, d, p) if degree else ())
