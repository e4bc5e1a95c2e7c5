"""The fused backend's loop for the kernels of compact support: keys in leaves, one pass a pair.

For the kernels that vanish beyond ``|u| = 1`` (Epanechnikov, tricube, biweight, ...; not in
the log domain) in at most :data:`MAX_FEATURES` features (degree 2: at most
:data:`~nadaraya.backends._fused_moments.MAX_QUADRATIC`), from :data:`SORT_FROM` queries on,
:func:`nadaraya.backends.fused.partials` runs this loop (:func:`run`) in place of the general one:

- the keys are put in a tree of boxes, each node split at the median of the feature of widest
  extent in bandwidths, down to leaves of :data:`LEAF` keys (:func:`leaf_order`);
- per query, the tree is walked from the root, and a node whose box lies beyond the support in
  some feature (``|q - box| / h > 1``, computed as the kernel computes ``|q - k| / h``, so that
  no key of the node can weigh) is skipped whole;
- otherwise one generated loop (:func:`compact_source`) computes each pair's weight (the
  product of the features' factors and the sample weight) and, in the same pass, the weight's
  sum, the values' and the unique entries of the moment sums of degree 1 or 2 (every sum in a
  register), and adds them to the query's rows. The kernel's difference ``e = q - k`` is the
  one the sums take, negated: ``fl(q - k) = -fl(k - q)`` exactly, so the sums of odd order are
  negated once at the end. From :data:`~nadaraya.backends._fused_moments.SPLIT_FROM` features
  the sums of order 3 and 4 take a second loop over the weights stored by the first.
  From degree :data:`GATHER_FROM` the loop runs once a buffer, over the keys of a query's leaves
  copied into it (a leaf's keys ascend in one feature: those at either end beyond the support in
  it, 8 at a time, are not copied; a copied left-out key's weight is set to zero).

The sums carry no shift (the weights are the kernel's values), so each leaf's sums are added
to the query's, and the result is the reference's to rounding (the sums in another order). A
left-out key weighs zero in its query's sums (its sample weight masked, never subtracted).

Examples
--------
>>> import numpy as np
>>> perm, nodes, lo, hi = leaf_order(np.random.default_rng(0).uniform(size=(10, 2)), np.ones(2), 4)
>>> sorted(perm.tolist()) == list(range(10)), nodes[:3].tolist()
(True, [[0, 10, 1, 2], [0, 4, -1, 0], [4, 10, 3, 4]])
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

__all__ = ["GATHERED", "GATHER_FROM", "LEAF", "MAX_COVER", "MAX_FEATURES", "QUERIES_PER_LEVEL", "SORT_FROM",
           "TRIM", "compact_source", "covers", "fewest_queries", "leaf_order", "run", "serves"]

_FASTMATH = {"contract", "reassoc", "nnan", "nsz"}
#: the most features of the tree (measured in 1-3; in 5 and 8 features, with supports over most
#: keys, the general loop was 1.5-2.7x faster)
MAX_FEATURES = 3
#: the largest share of the keys' bounding box that one support box may cover
#: (``prod min(1, 2 h / extent)``): above it few nodes are skipped, and the leaves' calls cost
#: more than they save (3-D, support over the whole box: 2x the general loop; 2 % of it: 5-10x less)
MAX_COVER = 0.05
#: the share of the keys at each end of a feature that :func:`covers` leaves out of its extent
TRIM = 0.01
#: the lowest degree whose task gathers the keys of a query's leaves into one buffer (of at most
#: :data:`GATHERED` keys; beyond the support in a leaf's sorted feature, 8 at a time, skipped) and
#: runs the generated loop once over them: the loop's fixed cost (its sums' reduction and stores)
#: is then paid once a query. 3-D Epanechnikov, h = 0.1, n = m = 2e4, one thread: degree 2 in
#: 0.084-0.092 s, against 0.109-0.119 s leaf by leaf; degree 0 and 1 gained nothing (0.039 s took 0.045 s)
GATHER_FROM = 2
GATHERED = 4096
#: a key is skipped from ``|q - k| / h > _CUT`` in that feature (computed as the kernel computes its
#: ``|u|``, so 1 would do; the hair above it is slack)
_CUT = 1.0 + 2.0**-30
#: keys skipped at a time (a multiple of the vector width)
_STEP = 8
#: keys per leaf of the tree (:func:`leaf_order`)
LEAF = 64
#: the fewest queries that pay for the tree (it costs about ``n d log2(n / LEAF)`` steps; the general
#: loop ``m n d``): fewer take the general loop
SORT_FROM = 64
#: and at least this many queries per level of the tree (``log2(n / LEAF)``): its build, rebuilt per
#: call, costs as much as about 80 queries of the general loop per level (3-D Epanechnikov, h = 0.02,
#: one thread: break-even near 1,150-1,200 queries at n = 1e6 and 4e6, where 64 queries took 6-18x
#: the general loop's time; 2026-12-06 review)
QUERIES_PER_LEVEL = 80.0


def fewest_queries(n: int) -> float:
    """The fewest queries for which the tree pays, for ``n`` keys (:data:`SORT_FROM`, and
    :data:`QUERIES_PER_LEVEL` per level of the tree).

    Examples
    --------
    >>> fewest_queries(100), round(fewest_queries(2000)), round(fewest_queries(10**6))
    (64.0, 397, 1115)
    """
    return max(float(SORT_FROM), QUERIES_PER_LEVEL * math.log2(max(n, 1) / LEAF))


def covers(kt: NDArray[np.float64], inv_h: NDArray[np.float64]) -> float:
    """The share of the keys' ``(d, n)`` box that one support box covers: per feature, twice the
    bandwidth over the range of the central keys (from the :data:`TRIM` quantile to ``1 - TRIM``,
    widened by ``1 / (1 - 2 TRIM)``), so that a few outliers do not shrink the share (and send
    wide supports to the tree, which then visits most leaves).

    Examples
    --------
    >>> covers(np.array([[0.0, 1.0], [0.0, 4.0]]), np.array([4.0, 1.0]))
    0.25
    >>> x = np.linspace(0.0, 1.0, 1000)[None, :]
    >>> round(covers(x, np.array([5.0])), 3), round(covers(np.append(x, [[1e6]], axis=1), np.array([5.0])), 3)
    (0.4, 0.4)
    """
    if kt.shape[1] == 0:
        return 1.0
    kt = kt[:, :: max(1, kt.shape[1] // 4096)]  # the quantiles of every k-th key: at most 8191 of them
    n = kt.shape[1]
    a = int(TRIM * (n - 1))
    if a > 0:
        ends = np.partition(kt, (a, n - 1 - a), axis=1)
        extent = (ends[:, n - 1 - a] - ends[:, a]) * (n - 1) / (n - 1 - 2 * a)
    else:
        extent = kt.max(axis=1) - kt.min(axis=1)
    extent = extent * inv_h
    return float(np.prod(np.minimum(1.0, 2.0 / np.maximum(extent, 1e-300))))


def serves(kernel_log_domain: bool, d: int, degree: int, m: int, n: int = 0, p: int = 1) -> bool:
    """Whether the compact loop serves a call: a kernel of compact support, at most
    :data:`MAX_FEATURES` features, degree 0 to 2, at least :func:`fewest_queries` of ``n`` keys,
    at least one value column (the generated loops carry the first; and, see :func:`covers`,
    supports over at most :data:`MAX_COVER` of the keys' box).

    Examples
    --------
    >>> serves(False, 3, 2, 100), serves(False, 4, 1, 100), serves(True, 1, 0, 100), serves(False, 1, 0, 5)
    (True, False, False, False)
    >>> serves(False, 2, 1, 500, n=10**6), serves(False, 2, 1, 500, n=2000), serves(False, 2, 1, 500, p=0)
    (False, True, False)
    """
    degree_served = degree <= 1 or (degree == 2 and d <= MAX_QUADRATIC)
    return (not kernel_log_domain and 1 <= d <= MAX_FEATURES and degree_served and p >= 1
            and m >= fewest_queries(n))


def leaf_order(keys: NDArray[np.float64], inv_h: NDArray[np.float64], leaf: int) -> tuple[NDArray[Any], ...]:
    """The keys ``(n, d)`` in a tree of boxes: each node splits its keys at the median of the
    feature of widest extent in bandwidths, so that its left child holds a multiple of ``leaf``
    keys, down to leaves of at most ``leaf`` keys, each leaf's keys in ascending order of its own
    feature of widest extent. Returns the order of the keys (leaves and nodes hold contiguous
    ranges of it), the nodes ``(N, 4)`` (first key, end, left and right child; a leaf: ``-1`` and
    the feature its keys ascend in; the root first) and their boxes' lower and upper corners
    ``(d, N)``."""
    n, d = keys.shape
    kt = np.ascontiguousarray(keys.T, dtype=np.float64)
    scaled = kt * np.asarray(inv_h, dtype=np.float64)[:, None]
    perm = np.arange(n, dtype=np.int64)
    size = 2 * max(1, -(-n // leaf)) + 1
    nodes = np.full((size, 4), -1, dtype=np.int64)
    lo, hi = np.zeros((d, size)), np.zeros((d, size))
    count = _order(kt, scaled, int(leaf), perm, nodes, lo, hi)
    return perm, nodes[:count], lo[:, :count].copy(), hi[:, :count].copy()


@numba.njit(cache=True)
def _select(scaled, f, perm, a, b, k):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Reorder ``perm[a:b]`` so that ``perm[k]`` holds the key of rank ``k - a`` in feature ``f``
    and no key before it is larger, none after it smaller (quickselect, median of three)."""
    lo, hi = a, b - 1
    while hi > lo:
        mid = (lo + hi) // 2
        x, y, z = scaled[f, perm[lo]], scaled[f, perm[mid]], scaled[f, perm[hi]]
        pivot = max(min(x, y), min(max(x, y), z))
        i, j = lo, hi
        while i <= j:
            while scaled[f, perm[i]] < pivot:
                i += 1
            while scaled[f, perm[j]] > pivot:
                j -= 1
            if i <= j:
                perm[i], perm[j] = perm[j], perm[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return


@numba.njit(cache=True)
def _order(kt, scaled, leaf, perm, nodes, lo, hi):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The tree of :func:`leaf_order`, built in place (``perm``, ``nodes``, the boxes ``lo`` and
    ``hi`` in the keys' units); returns the number of nodes."""
    d, n = scaled.shape
    todo = np.empty(nodes.shape[0], dtype=np.int64)
    nodes[0, 0], nodes[0, 1] = 0, n
    todo[0] = 0
    top, count = 1, 1
    while top > 0:
        top -= 1
        node = todo[top]
        a, b = nodes[node, 0], nodes[node, 1]
        best, f = -1.0, 0
        for g in range(d):
            kl, kh, sl, sh = np.inf, -np.inf, np.inf, -np.inf
            for t in range(a, b):
                x = kt[g, perm[t]]
                kl, kh = min(kl, x), max(kh, x)
                x = scaled[g, perm[t]]
                sl, sh = min(sl, x), max(sh, x)
            lo[g, node], hi[g, node] = kl, kh
            if sh - sl > best:
                best, f = sh - sl, g
        if b - a <= leaf:  # a leaf: its keys in ascending order of feature f (insertion sort)
            nodes[node, 3] = f
            for t in range(a + 1, b):
                key, x = perm[t], kt[f, perm[t]]
                u = t
                while u > a and kt[f, perm[u - 1]] > x:
                    perm[u] = perm[u - 1]
                    u -= 1
                perm[u] = key
            continue
        left = (-(-(b - a) // leaf) // 2) * leaf
        _select(scaled, f, perm, a, b, a + left)
        for child, (ca, cb) in enumerate(((a, a + left), (a + left, b))):
            nodes[count, 0], nodes[count, 1] = ca, cb
            nodes[node, 2 + child] = count
            todo[top] = count
            top += 1
            count += 1
    return count


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
    high = [s for s in nodes if len(s) > degree]
    parts = [nodes] if d < _fused_moments.SPLIT_FROM or degree < 2 else [low, high]
    diffs = [f"e_{a} = q_{a} - k_{a}[j]" for a in range(d)]
    texts = []
    for summed in parts:
        needed = sorted({seq[:t] for seq in summed for t in range(1, len(seq) + 1)}, key=nodes.index)
        parent = lambda seq: "w" if len(seq) == 1 else f"t_{name(seq[:-1])}"  # noqa: E731
        body = [f"t_{name(s)} = {parent(s)} * e_{s[-1]}" for s in needed]
        body += [f"s_{name(s)} += t_{name(s)}" for s in summed]
        body += [f"r_{name(s)} += t_{name(s)} * y" for s in summed if len(s) <= degree]
        zeros = [f"s_{name(s)} = 0.0" for s in summed]
        zeros += [f"r_{name(s)} = 0.0" for s in summed if len(s) <= degree]
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


#: the generated loop's globals: ``_term`` (one feature's factor), set by :mod:`nadaraya.backends.fused`
NAMES: dict[str, Any] = {}


@numba.extending.overload(block_compact, inline="never", prefer_literal=True,
                          jit_options={"fastmath": _FASTMATH})
def _block_compact(kind, key, kt, vt, kw, q, i, k0, nb, inv_h, row, weight, value, mom):  # type: ignore[no-untyped-def]
    namespace = generated(_GENERATED, key, compact_source, "fused compact loop", NAMES)
    return None if namespace is None else namespace["compact"]


@numba.njit(inline="always", cache=True)
def _copy(dst, src, nb):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``dst[:nb] = src[:nb]`` (1-D views: a vector loop)."""
    for j in range(nb):
        dst[j] = src[j]


def compile_task(kind: int, d: int, degree: int):  # type: ignore[no-untyped-def]
    """The task over queries ``q0:q1`` for one compact kernel, ``d`` features and a degree
    (closure constants: numba compiles and caches one loop per triple)."""
    key = degree * 16 + d
    gather, gathered = degree >= GATHER_FROM, GATHERED

    @numba.njit(cache=True, nogil=True, fastmath=_FASTMATH)
    def task(q, kt, vt, inv_h, key_weight, exclude, nodes, lo, hi, q0, q1, weight, value, mom):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        """Add the sums of every leaf that meets a query's support into the rows of queries
        ``q0:q1`` (keys in the tree's order; nodes beyond the support skipped whole)."""
        p = vt.shape[0]
        big = 1
        for node in range(nodes.shape[0]):
            big = max(big, nodes[node, 1] - nodes[node, 0]) if nodes[node, 2] < 0 else big
        # at most GATHERED keys, and about 1 MiB a task with many value columns (embeddings)
        cap = max(big, min(gathered, (1 << 17) // (p + d + 2))) if gather else big
        row = np.empty(cap)
        kwb = np.empty(cap)
        kb = np.empty((d, cap if gather else 0))  # (C-contiguous, as kt and vt)
        vb = np.empty((p, cap if gather else 0))
        todo = np.empty(nodes.shape[0] + 1, dtype=np.int64)
        for i in range(q0, q1):
            todo[0] = 0
            top = 1 if nodes.shape[0] > 0 else 0
            held = 0  # keys gathered for query i
            while top > 0:
                top -= 1
                node = todo[top]
                far = False
                for f in range(d):
                    qa = q[i, f]
                    if (lo[f, node] - qa) * inv_h[f] > 1.0 or (qa - hi[f, node]) * inv_h[f] > 1.0:
                        far = True
                        break
                if far:
                    continue
                if nodes[node, 2] >= 0:
                    todo[top] = nodes[node, 3]
                    todo[top + 1] = nodes[node, 2]
                    top += 2
                    continue
                k0, k1 = nodes[node, 0], nodes[node, 1]
                if gather:  # the keys ascend in feature f: skip those beyond the support at either end,
                    f = nodes[node, 3]  # 8 at a time (the vector loop then takes no scalar remainder)
                    qa, ha = q[i, f], inv_h[f]
                    while k1 - k0 > _STEP and (qa - kt[f, k0 + _STEP - 1]) * ha > _CUT:
                        k0 += _STEP
                    while k1 - k0 > _STEP and (qa - kt[f, k1 - _STEP]) * ha < -_CUT:
                        k1 -= _STEP
                nb = k1 - k0
                e = exclude[i] - k0
                if gather:  # the leaf's keys copied after query i's others: one loop over them all
                    if held + nb > cap:  # the buffer full: its sums added to query i's
                        block_compact(kind, key, kb, vb, kwb[:held], q, i, 0, held, inv_h, row, weight, value,
                                      mom)
                        held = 0
                    # (1-D views indexed by the loop counter: no negative-index wraparound, vectorised)
                    _copy(kwb[held : held + nb], key_weight[k0:k1], nb)
                    if 0 <= e < nb:  # the left-out key's weight masked
                        kwb[held + e] = 0.0
                    for a in range(d):
                        _copy(kb[a, held : held + nb], kt[a, k0:k1], nb)
                    for c in range(p):
                        _copy(vb[c, held : held + nb], vt[c, k0:k1], nb)
                    held += nb
                    continue
                if 0 <= e < nb:  # the left-out key's weight masked in a copy
                    for j in range(nb):
                        kwb[j] = key_weight[k0 + j]
                    kwb[e] = 0.0
                    kw = kwb[:nb]
                else:
                    kw = key_weight[k0 : k0 + nb]
                block_compact(kind, key, kt, vt, kw, q, i, k0, nb, inv_h, row, weight, value, mom)
            if gather and held > 0:
                block_compact(kind, key, kb, vb, kwb[:held], q, i, 0, held, inv_h, row, weight, value, mom)

    return task


_TASKS: dict[tuple[int, int, int], Any] = {}
def run(kind: int, q: NDArray[np.float64], kt: NDArray[np.float64], vt: NDArray[np.float64],
        inv_h: NDArray[np.float64], key_weight: NDArray[np.float64], exclude: NDArray[np.int64],
        degree: int, width: int) -> tuple[NDArray[np.float64], ...]:
    """The compact loop over queries ``q`` (m, d) and keys ``kt`` (d, n), values ``vt`` (p, n),
    sample weights ``key_weight`` (n,) and left-out key per query ``exclude`` (none outside 0..n-1): the
    weights' sums (m,), the values' (m, p) and the flat moment sums (m, width)."""
    (m, d), n = q.shape, kt.shape[1]
    perm, nodes, lo, hi = leaf_order(kt.T, inv_h, LEAF)
    kt, vt, key_weight = (np.ascontiguousarray(a[..., perm]) for a in (kt, vt, key_weight))
    where = np.empty(n, dtype=np.int64)
    where[perm] = np.arange(n, dtype=np.int64)
    # an index outside 0..n-1 leaves no key out, as in the general loop and the reference (both
    # public: nadaraya.backends.compute passes any integer through)
    inside = (exclude >= 0) & (exclude < n)
    exclude = np.where(inside, where[np.where(inside, exclude, 0)] if n else -1, -1).astype(np.int64)
    weight, value, mom = np.zeros(m), np.zeros((m, vt.shape[0])), np.zeros((m, width))
    if (kind, d, degree) not in _TASKS:
        _TASKS[kind, d, degree] = compile_task(kind, d, degree)
    from nadaraya._support.jit import run_ranges

    run_ranges(_TASKS[kind, d, degree], (q, kt, vt, inv_h, key_weight, exclude, nodes, lo, hi), m,
               (weight, value, mom), work=float(m) * n * (d + 1 + vt.shape[0] + width))
    return weight, value, mom
