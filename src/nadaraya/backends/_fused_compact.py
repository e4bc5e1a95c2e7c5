"""The fused backend's loop for the kernels of compact support: keys in leaves, one pass a pair.

For the kernels that vanish beyond ``|u| = 1`` (Epanechnikov, tricube, biweight, ...; not in
the log domain) in at most :data:`MAX_FEATURES` features (degree 2: at most
:data:`~nadaraya.backends._fused_moments.MAX_QUADRATIC`), :func:`partials` runs this loop in
place of the general one:

- the keys are put in leaves of :func:`leaf_size` keys by a median split on the feature of the
  widest extent in bandwidths (:func:`leaf_order`), so that each leaf's bounding box is small;
- per leaf and query, a leaf whose box lies beyond the support in some feature
  (``|q - box| / h > 1``, computed as the kernel computes ``|q - k| / h``, so that no key of
  the leaf can weigh) is skipped whole;
- otherwise one generated loop (:func:`compact_source`) computes each pair's weight (the
  product of the features' factors and the sample weight) and, in the same pass, the weight's
  sum, the values' and the unique entries of the moment sums of degree 1 or 2 (every sum in a
  register), and adds them to the query's rows. The kernel's difference ``e = q - k`` is the
  one the sums take, negated: ``fl(q - k) = -fl(k - q)`` exactly, so the sums of odd order are
  negated once at the end. From :data:`~nadaraya.backends._fused_moments.SPLIT_FROM` features
  the sums of order 3 and 4 take a second loop over the weights stored by the first.

The sums carry no shift (the weights are the kernel's values), so each leaf's sums are added
to the query's, and the result is the reference's to rounding (the sums in another order). A
left-out key weighs zero in its query's sums (its sample weight masked, never subtracted).

Examples
--------
>>> import numpy as np
>>> perm, starts = leaf_order(np.random.default_rng(0).uniform(size=(10, 2)), np.ones(2), 4)
>>> sorted(perm.tolist()) == list(range(10)), starts.tolist()
(True, [0, 4, 8, 10])
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support.jit import generated
from nadaraya.backends import _fused_moments
from nadaraya.backends._fused_moments import MAX_QUADRATIC, layout

__all__ = ["MAX_FEATURES", "compact_source", "leaf_order", "leaf_size", "serves"]

_FASTMATH = {"contract", "reassoc", "nnan", "nsz"}
#: the most features of the generated loop (every feature's query and bandwidth in registers)
MAX_FEATURES = 8
#: leaves of at least and at most this many keys (:func:`leaf_size`)
LEAF_MIN, LEAF_MAX = 256, 2048


def serves(kernel_log_domain: bool, d: int, degree: int) -> bool:
    """Whether the compact loop serves a call: a kernel of compact support, at most
    :data:`MAX_FEATURES` features, degree 0 or 1 (degree 2: at most ``MAX_QUADRATIC`` features).

    Examples
    --------
    >>> serves(False, 3, 2), serves(False, 4, 2), serves(True, 1, 0)
    (True, False, False)
    """
    return not kernel_log_domain and 1 <= d <= MAX_FEATURES and (degree <= 1 or (degree == 2 and d <= MAX_QUADRATIC))


def leaf_size(n: int, keys: NDArray[np.float64], h: NDArray[np.float64]) -> int:
    """The keys per leaf: about the keys in one support box ``2h`` (uniform over the keys'
    bounding box), rounded to a power of two within ``LEAF_MIN .. LEAF_MAX``.

    Examples
    --------
    >>> leaf_size(10**5, np.random.default_rng(0).uniform(size=(1000, 2)), np.array([0.01, 0.01]))
    256
    """
    if n == 0:
        return LEAF_MAX
    extent = keys.max(axis=0) - keys.min(axis=0)
    frac = float(np.prod(np.minimum(1.0, 2.0 * h / np.maximum(extent, 1e-300))))
    want = max(n * frac, 1.0)
    return int(min(LEAF_MAX, max(LEAF_MIN, 2 ** round(math.log2(want)))))


def leaf_order(keys: NDArray[np.float64], inv_h: NDArray[np.float64], leaf: int) -> tuple[NDArray[np.int64], ...]:
    """An order of the keys ``(n, d)`` in leaves of ``leaf`` keys (the last may hold fewer),
    each split at the median of the feature of widest extent in bandwidths: the permutation and
    the leaves' starts (with ``n`` at the end)."""
    n = keys.shape[0]
    scaled = keys * inv_h
    perm = np.arange(n, dtype=np.int64)
    starts = []
    todo = [(0, n)]
    while todo:
        a, b = todo.pop()
        if b - a <= leaf:
            if b > a:
                starts.append(a)
            continue
        idx = perm[a:b]
        pts = scaled[idx]
        f = int(np.argmax(pts.max(axis=0) - pts.min(axis=0)))
        left = (-(-(b - a) // leaf) // 2) * leaf
        perm[a:b] = idx[np.argpartition(pts[:, f], left)]
        todo += [(a + left, b), (a, a + left)]
    return perm, np.array(sorted(starts) + [n], dtype=np.int64)


_SOURCE = """
def compact(kind, key, kt, vt, kw, q, i, k0, nb, inv_h, row, weight, value, mom):
    p = vt.shape[0]
    {views}
    v_0 = vt[0, k0 : k0 + nb]
    s = 0.0
    acc0 = 0.0
    {zeros}
    for j in range(nb):
        {diffs}
        w = kw[j] * {terms}
        row[j] = w
        y = v_0[j]
        s += w
        acc0 += w * y
        {body}
    weight[i] += s
    value[i, 0] += acc0
    {stores}
    {second}
    for c in range(1, p):
        vc = vt[c, k0 : k0 + nb]
        acc = 0.0
        {czeros}
        for j in range(nb):
            y = row[j] * vc[j]
            acc += y
            {cdiffs}
            {cbody}
        value[i, c] += acc
        {cstores}
"""

_SECOND = """{zeros}
    for j in range(nb):
        w = row[j]
        {diffs}
        {body}
    {stores}"""


def compact_source(key: int) -> str:
    """Python source of ``compact``, the one-pass loop of a key range for ``d = key % 16``
    features and the moments of degree ``key // 16``: each pair's ``e_a = q_a - k_a``, its
    weight ``w = kw * prod_a term(e_a / h_a)`` (stored in ``row`` for the further value
    columns and the second loop), and per unique moment entry ``a_1 <= .. <= a_t`` (depth-first,
    :func:`~nadaraya.backends._fused_moments.layout`) its product ``t = parent e_(a_t)`` (the
    root's parent is ``w``), ``sum t``, ``sum t v_0`` (``t <= degree``); each sum is added to the
    query's row at its flat position, times ``(-1)^t``. Globals: ``_term``."""
    d, degree = key % 16, key // 16
    nodes = [seq for seq, _ in layout(degree, d)] if degree else []
    plain = {seq: k for k, seq in enumerate(nodes)}
    first = {seq: k for k, seq in enumerate(s for s in nodes if len(s) <= degree)}
    name = lambda seq: "_".join(map(str, seq))  # noqa: E731
    sign = lambda seq: "-" if len(seq) % 2 else ""  # noqa: E731
    at = lambda seq: f"{len(plain)} + {first[seq]} * p"  # noqa: E731  # a value sum's first column
    low = [seq for seq in nodes if len(seq) <= degree]
    parts = [nodes] if d < _fused_moments.SPLIT_FROM or degree < 2 else [low, [s for s in nodes if len(s) > degree]]
    diffs = [f"e_{a} = q_{a} - k_{a}[j]" for a in range(d)]
    texts = []
    for summed in parts:
        needed = sorted({seq[:t] for seq in summed for t in range(1, len(seq) + 1)}, key=nodes.index)
        parent = lambda seq: "w" if len(seq) == 1 else f"t_{name(seq[:-1])}"  # noqa: E731
        body = [f"t_{name(s)} = {parent(s)} * e_{s[-1]}" for s in needed]
        body += [f"s_{name(s)} += t_{name(s)}" for s in summed]
        body += [f"r_{name(s)} += t_{name(s)} * y" for s in summed if len(s) <= degree]
        zeros = [f"s_{name(s)} = 0.0" for s in summed] + [f"r_{name(s)} = 0.0" for s in summed if len(s) <= degree]
        stores = [f"mom[i, {plain[s]}] += {sign(s)}s_{name(s)}" for s in summed]
        stores += [f"mom[i, {at(s)}] += {sign(s)}r_{name(s)}" for s in summed if len(s) <= degree]
        texts.append(("\n    ".join(zeros), "\n        ".join(body), "\n    ".join(stores)))
    second = ""
    if len(texts) == 2:
        z, b, st = texts[1]
        second = _SECOND.format(zeros=z, diffs="\n        ".join(diffs), body=b, stores=st)
    cparent = lambda seq: "y" if len(seq) == 1 else f"t_{name(seq[:-1])}"  # noqa: E731
    z, b, st = texts[0] if texts else ("", "", "")
    return _SOURCE.format(
        views="\n    ".join(f"q_{a} = q[i, {a}]; h_{a} = inv_h[{a}]; k_{a} = kt[{a}, k0 : k0 + nb]"
                            for a in range(d)),
        zeros=z or "pass", diffs="\n        ".join(diffs), body=b or "pass", stores=st or "pass",
        terms=" * ".join(f"_term(kind, e_{a} * h_{a})" for a in range(d)),
        second=second,
        czeros="\n        ".join(f"r_{name(s)} = 0.0" for s in low) or "pass",
        cdiffs="\n            ".join(f"e_{a} = q_{a} - k_{a}[j]" for a in range(d)) if low else "pass",
        cbody="\n            ".join([f"t_{name(s)} = {cparent(s)} * e_{s[-1]}" for s in low]
                                    + [f"r_{name(s)} += t_{name(s)}" for s in low]) or "pass",
        cstores="\n        ".join(f"mom[i, {at(s)} + c] += {sign(s)}r_{name(s)}" for s in low) or "pass",
    )


_GENERATED: dict[int, dict[str, Any]] = {}


def block_compact(kind, key, kt, vt, kw, q, i, k0, nb, inv_h, row, weight, value, mom):  # type: ignore[no-untyped-def]
    """A key range's weights and sums added to query ``i``'s (see :func:`compact_source`);
    ``kind`` and ``key`` compile-time constants; compiled only."""
    raise NotImplementedError("only callable from jitted code")


def _namespace_names() -> dict[str, Any]:
    from nadaraya.backends.fused import _term

    return {"_term": _term}


@numba.extending.overload(block_compact, inline="never", prefer_literal=True, jit_options={"fastmath": _FASTMATH})
def _block_compact(kind, key, kt, vt, kw, q, i, k0, nb, inv_h, row, weight, value, mom):  # type: ignore[no-untyped-def]
    namespace = generated(_GENERATED, key, compact_source, "fused compact loop", _namespace_names())
    return None if namespace is None else namespace["compact"]


def compile_task(kind: int, d: int, degree: int):  # type: ignore[no-untyped-def]
    """The task over queries ``q0:q1`` for one compact kernel, ``d`` features and a degree
    (closure constants: numba compiles and caches one loop per triple)."""
    key = degree * 16 + d

    @numba.njit(cache=True, nogil=True, fastmath=_FASTMATH)
    def task(q, kt, vt, inv_h, key_weight, exclude, starts, lo, hi, q0, q1, weight, value, mom):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        """Add every leaf's sums into the rows of queries ``q0:q1`` (keys in leaf order)."""
        leaves = starts.size - 1
        big = 0
        for b in range(leaves):
            big = max(big, starts[b + 1] - starts[b])
        row = np.empty(big)
        kwb = np.empty(big)
        for b in range(leaves):
            k0 = starts[b]
            nb = starts[b + 1] - k0
            for j in range(nb):
                kwb[j] = key_weight[k0 + j]
            kw = kwb[:nb]
            for i in range(q0, q1):
                far = False
                for f in range(d):
                    qa = q[i, f]
                    dist = lo[f, b] - qa if qa < lo[f, b] else (qa - hi[f, b] if qa > hi[f, b] else 0.0)
                    if dist * inv_h[f] > 1.0:
                        far = True
                        break
                if far:
                    continue
                e = exclude[i] - k0
                excluded = 0 <= e < nb
                if excluded:
                    kwb[e] = 0.0
                block_compact(kind, key, kt, vt, kw, q, i, k0, nb, inv_h, row, weight, value, mom)
                if excluded:
                    kwb[e] = key_weight[k0 + e]

    return task


_TASKS: dict[tuple[int, int, int], Any] = {}
#: below this many queries the keys are not put in leaves (the order costs more than it saves):
#: blocks of ``LEAF_MAX`` keys in their own order
SORT_FROM = 64


def run(kind: int, q: NDArray[np.float64], kt: NDArray[np.float64], vt: NDArray[np.float64],
        inv_h: NDArray[np.float64], key_weight: NDArray[np.float64], exclude: NDArray[np.int64],
        degree: int, width: int) -> tuple[NDArray[np.float64], ...]:
    """The compact loop over queries ``q`` (m, d) and keys ``kt`` (d, n), values ``vt`` (p, n),
    sample weights ``key_weight`` (n,) and left-out key per query ``exclude`` (-1: none): the
    weights' sums (m,), the values' (m, p) and the flat moment sums (m, width)."""
    (m, d), n = q.shape, kt.shape[1]
    if m >= SORT_FROM and n > LEAF_MIN:
        perm, starts = leaf_order(kt.T, inv_h, leaf_size(n, kt.T, 1.0 / inv_h))
        kt, vt, key_weight = (np.ascontiguousarray(a[..., perm]) for a in (kt, vt, key_weight))
        where = np.empty(n, dtype=np.int64)
        where[perm] = np.arange(n, dtype=np.int64)
        exclude = np.where(exclude >= 0, where[np.maximum(exclude, 0)], -1)
    else:
        starts = np.append(np.arange(0, n, LEAF_MAX, dtype=np.int64), n)
    if n:
        lo, hi = (f.reduceat(kt, starts[:-1], axis=1) for f in (np.minimum, np.maximum))
    else:
        lo = hi = np.empty((d, 0))
    weight, value, mom = np.zeros(m), np.zeros((m, vt.shape[0])), np.zeros((m, width))
    if (kind, d, degree) not in _TASKS:
        _TASKS[kind, d, degree] = compile_task(kind, d, degree)
    from nadaraya._support.jit import run_ranges

    run_ranges(_TASKS[kind, d, degree], (q, kt, vt, inv_h, key_weight, exclude, starts, lo, hi), m,
               (weight, value, mom), work=float(m) * n * (d + 1 + vt.shape[0] + width))
    return weight, value, mom
