"""The fused backend's moment sums of local polynomial fits: one key block's sums from its weights.

The fused loop (:mod:`nadaraya.backends.fused`) computes a key block's weights ``w_j`` for one
query under the block's shift into a scratch row; :func:`block_moments` then takes that row and
returns the block's moment sums (see :func:`nadaraya.backends.reference.moment_shapes`), which
the loop merges with the same rescaling as the weight and the values. Each pair's difference
``u = k - q`` is the exact difference of the data (never expanded about a centre), in the
data's units.

Only the unique entries of the symmetric sums are computed, in a flat row per query: the
nondecreasing feature sequences ``a_1 <= ... <= a_t`` (``t = 1 .. 2r``) in depth-first order
(:func:`layout`), then, for ``t <= r``, one entry per value column. :func:`expand` mirrors
them into the full tensors at the end.

Three ways to sum a block:

- degree 1 with at most :data:`MAX_GENERATED` features: one loop generated per number of
  features (:func:`_linear_source`) holding each feature's query coordinate and every sum in
  registers, so a pair costs its ``d`` differences and one multiply-add per unique entry;
- degree 2 with at most :data:`MAX_QUADRATIC` features: the same, generated from the walk
  (:func:`_quadratic_source`): each unique entry's product ``w u_a1 ... u_at`` is its parent's
  times one difference, a register per product and per sum (:func:`generated_key` names it);
  the walk's subtrees under each first feature go to loops of at most :data:`MAX_LIVE` sums
  (:func:`loop_parts`), so no product is computed twice and few sums leave the registers;
- otherwise (degree 3, or more features): the differences of each feature go to a scratch row,
  and the depth-first walk keeps one scratch row of products per depth (``w u_a1 ... u_at``),
  so each unique entry costs one pass of a multiply and an add over the block.

Examples
--------
>>> [s for s, _ in layout(1, 2)]
[(0,), (0, 0), (0, 1), (1,), (1, 1)]
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support.jit import generated

__all__ = ["MAX_GENERATED", "MAX_LIVE", "MAX_QUADRATIC", "block_moments", "block_values", "exp_linear_source",
           "expand", "generated_key", "layout", "loop_parts", "merge_row", "scratch", "table", "width"]

_FASTMATH = {"contract", "reassoc"}  # reordered sums (so they vectorise) and FMA
#: the most features whose degree-1 sums are generated with every sum in registers
MAX_GENERATED = 8
#: the most features whose degree-2 sums are generated with every sum in registers (3 features:
#: 34 plain sums and 9 with the values)
MAX_QUADRATIC = 3
#: :func:`generated_key` of the degree-2 loops: this plus the number of features
_QUADRATIC_KEY = 64


def generated_key(degree: int, d: int) -> int:
    """The compile-time constant ``md`` of :func:`block_moments` for a degree and ``d`` features:
    ``d`` for the generated degree-1 loop, :data:`_QUADRATIC_KEY` + ``d`` for the degree-2 one,
    0 for the depth-first walk.

    Examples
    --------
    >>> generated_key(1, 2), generated_key(2, 2) > MAX_GENERATED, generated_key(2, 4), generated_key(3, 1)
    (2, True, 0, 0)
    """
    if degree == 1 and d <= MAX_GENERATED:
        return d
    if degree == 2 and d <= MAX_QUADRATIC:
        return _QUADRATIC_KEY + d
    return 0


def layout(degree: int, d: int) -> list[tuple[tuple[int, ...], bool]]:
    """The unique moment entries in depth-first order: each feature sequence ``a_1 <= ... <= a_t``
    (``t = 1 .. 2 degree``) and whether it also has sums with the values (``t <= degree``).

    Examples
    --------
    >>> layout(1, 1)
    [((0,), True), ((0, 0), False)]
    """
    out: list[tuple[tuple[int, ...], bool]] = []

    def walk(prefix: tuple[int, ...], start: int) -> None:
        for a in range(start, d):
            seq = (*prefix, a)
            out.append((seq, len(seq) <= degree))
            if len(seq) < 2 * degree:
                walk(seq, a)

    walk((), 0)
    return out


_Where = dict[tuple[int, ...], int]


@functools.lru_cache(maxsize=64)
def _positions(degree: int, d: int, p: int) -> tuple[_Where, _Where, int]:
    """Flat positions: of each sequence's plain sum, of its first value column's sum; the total."""
    nodes = layout(degree, d)
    plain = {seq: k for k, (seq, _) in enumerate(nodes)}
    with_values = [seq for seq, v in nodes if v]
    first = {seq: len(nodes) + k * p for k, seq in enumerate(with_values)}
    return plain, first, len(nodes) + len(with_values) * p


def table(degree: int, d: int, p: int) -> NDArray[np.int64]:
    """The depth-first walk for the jitted loop: per node its depth, its last feature, the flat
    position of its plain sum and of its first value column's sum (``-1``: none).

    Examples
    --------
    >>> table(1, 1, 2).tolist()
    [[1, 0, 0, 2], [2, 0, 1, -1]]
    """
    plain, first, _ = _positions(degree, d, p)
    rows = [(len(seq), seq[-1], plain[seq], first.get(seq, -1)) for seq, _ in layout(degree, d)]
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def width(degree: int, d: int, p: int) -> int:
    """How many unique entries a query's flat row of moment sums holds.

    Examples
    --------
    >>> width(1, 2, 1), width(2, 1, 3)
    (7, 10)
    """
    return _positions(degree, d, p)[2]


@functools.lru_cache(maxsize=64)
def _gathers(degree: int, d: int, p: int) -> tuple[NDArray[np.int64], ...]:
    """Per moment (in the order of ``moment_shapes``) the flat position of every full entry."""
    plain, first, _ = _positions(degree, d, p)
    out = []
    for j in range(1, 2 * degree + 1):
        idx = [plain[tuple(sorted(a))] for a in itertools.product(range(d), repeat=j)]
        out.append(np.array(idx, dtype=np.int64).reshape((d,) * j))
    for j in range(1, degree + 1):
        idx = [first[tuple(sorted(a))] + c for *a, c in itertools.product(*[range(d)] * j, range(p))]
        out.append(np.array(idx, dtype=np.int64).reshape((d,) * j + (p,)))
    return tuple(out)


def expand(flat: NDArray[np.floating], degree: int, d: int, p: int) -> tuple[NDArray[np.floating], ...]:
    """The full moment tensors (symmetric entries repeated) from the flat rows (m, width).

    Examples
    --------
    >>> flat = np.arange(5.0)[None, :]  # d = 1, p = 2: u, u^2, then u v for two columns
    >>> [a.tolist() for a in expand(flat, 1, 1, 2)]
    [[[0.0]], [[[1.0]]], [[[2.0, 3.0]]]]
    """
    return tuple(flat[:, g] for g in _gathers(degree, d, p))


# --- the jitted sums of a key block ---------------------------------------------------------


@numba.njit(inline="always", cache=True)
def scratch(d, degree, width, block):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """One task's scratch: a row of differences per feature, a row of products per depth, and
    one block's flat sums."""
    return np.empty((d, block)), np.empty((2 * degree + 1, block)), np.empty(width)


@numba.njit(inline="always", cache=True)
def merge_row(mom, i, msum, scale_old, scale_new):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Merge a block's flat sums into query ``i``'s, with the weight's own rescaling."""
    for t in range(msum.size):
        mom[i, t] = mom[i, t] * scale_old + msum[t] * scale_new


def block_moments(md, row, kt, vt, q, i, k0, nb, us, ps, walk, out):  # type: ignore[no-untyped-def]
    """A key block's flat moment sums into ``out``; compiled only (see :func:`_block_moments`).

    ``md`` (a compile-time constant): the number of features of the generated degree-1 loop,
    or 0 for the depth-first walk; ``row`` the block's weights; ``us`` (d, block) and ``ps``
    (2 degree + 1, block) scratch rows; ``walk`` the :func:`table`.
    """
    raise NotImplementedError("only callable from jitted code")


def _walk(md, row, kt, vt, q, i, k0, nb, us, ps, walk, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The depth-first walk over the unique entries (any degree, any number of features)."""
    d = q.shape[1]
    p = vt.shape[0]
    for a in range(d):
        ka = kt[a, k0 : k0 + nb]
        ua = us[a]
        qa = q[i, a]
        for j in range(nb):
            ua[j] = ka[j] - qa
    p0 = ps[0]
    for j in range(nb):
        p0[j] = row[j]
    for node in range(walk.shape[0]):
        t = walk[node, 0]
        prev = ps[t - 1]
        cur = ps[t]
        ua = us[walk[node, 1]]
        s = 0.0
        for j in range(nb):
            x = prev[j] * ua[j]
            cur[j] = x
            s += x
        out[walk[node, 2]] = s
        first = walk[node, 3]
        if first >= 0:
            for c in range(p):
                vc = vt[c, k0 : k0 + nb]
                acc = 0.0
                for j in range(nb):
                    acc += cur[j] * vc[j]
                out[first + c] = acc


_LINEAR = """
def linear(md, row, kt, vt, q, i, k0, nb, us, ps, walk, out):
    p = vt.shape[0]
    {views}
    v_0 = vt[0, k0 : k0 + nb]
    {zeros}
    for j in range(nb):
        w = row[j]
        y = v_0[j]
        {diffs}
        {body}
    {stores}
    {columns}


def values(md, row, kt, vt, q, i, k0, nb, out):
    p = vt.shape[0]
    {views}
    {columns}
"""

_EXP_LINEAR = """
def exp_linear(kind, nf, src, q, i, kt, f0, k0, inv_h, v0, top, row, nb, p, out):
    {views}
    s = 0.0
    acc0 = 0.0
    {zeros}
    for j in range(nb):
        {diffs}
        w = exp_flushed({terms} - top)
        row[j] = w
        y = v0[j]
        s += w
        acc0 += w * y
        {body}
    {stores}
    return s, acc0
"""

_COLUMNS = """for c in range(1, p):
        vc = vt[c, k0 : k0 + nb]
        {zeros}
        for j in range(nb):
            y = row[j] * vc[j]
            {body}
        {stores}"""


def _linear_parts(d: int, sign: str) -> dict[str, str]:
    """The pieces of a generated degree-1 loop over ``d`` features: accumulators, the per-pair
    body (``t_a = w e_a``, ``sum t_a``, ``sum t_a e_b`` for ``a <= b``, ``sum t_a y``) and the
    stores of the sums to their flat positions (``p`` value columns), the odd ones times ``sign``
    (``-`` where ``e = q - k``, the negated difference)."""
    plain, first, _ = _positions(1, d, 1)
    n_plain = len(plain)
    pairs = [(a, b) for a in range(d) for b in range(a, d)]
    names = [f"s_{a}" for a in range(d)] + [f"s_{a}_{b}" for a, b in pairs] + [f"r_{a}" for a in range(d)]
    body = (
        [f"t_{a} = w * e_{a}" for a in range(d)]
        + [f"s_{a} += t_{a}" for a in range(d)]
        + [f"s_{a}_{b} += t_{a} * e_{b}" for a, b in pairs]
        + [f"r_{a} += t_{a} * y" for a in range(d)]
    )
    stores = (
        [f"out[{plain[(a,)]}] = {sign}s_{a}" for a in range(d)]
        + [f"out[{plain[(a, b)]}] = s_{a}_{b}" for a, b in pairs]
        + [f"out[{n_plain} + {first[(a,)] - n_plain} * p] = {sign}r_{a}" for a in range(d)]
    )
    columns = _COLUMNS.format(
        zeros="\n        ".join(f"r_{a} = 0.0" for a in range(d)),
        body="\n            ".join(f"r_{a} += y * (k_{a}[j] - q_{a})" for a in range(d)),
        stores="\n        ".join(f"out[{n_plain} + {first[(a,)] - n_plain} * p + c] = r_{a}"
                                 for a in range(d)),
    )
    return {"zeros": "\n    ".join(f"{name} = 0.0" for name in names), "body": "\n        ".join(body),
            "stores": "\n    ".join(stores), "columns": columns}


def _linear_source(d: int) -> str:
    """Python source of the degree-1 sums of a key block from its weights ``row``, for ``d``
    features, every sum a scalar: ``linear`` (all of them) and ``values`` (only those with the
    value columns after the first). Per pair ``u_a = k_a - q_a``, ``t_a = w u_a``, then
    ``sum t_a``, ``sum t_a u_b`` (``a <= b``) and ``sum t_a v_0``; each further value column
    takes one more loop, ``sum (w v_c) u_a``."""
    views = "\n    ".join(f"q_{a} = q[i, {a}]; k_{a} = kt[{a}, k0 : k0 + nb]" for a in range(d))
    diffs = "\n        ".join(f"e_{a} = k_{a}[j] - q_{a}" for a in range(d))
    return _LINEAR.format(views=views, diffs=diffs, **_linear_parts(d, ""))


def exp_linear_source(d: int) -> str:
    """Python source of ``exp_linear``: the fused backend's one-pass weights of a key block (as
    its ``exp_sum``, all ``d`` features in registers, ``f0 = 0``) and, in the same loop, the
    degree-1 sums with the first value column. The difference ``e = q - k`` that the kernel's
    term takes is the one the sums take: ``fl(q - k) = -fl(k - q)`` exactly, so the odd sums
    are negated once at the end. Its globals: ``_term``, ``exp_flushed``."""
    views = "\n    ".join(f"q_{a} = q[i, f0 + {a}]; h_{a} = inv_h[f0 + {a}]; "
                           f"k_{a} = kt[f0 + {a}, k0 : k0 + nb]" for a in range(d))
    diffs = "\n        ".join(f"e_{a} = q_{a} - k_{a}[j]" for a in range(d))
    terms = " + ".join(["src[j]"] + [f"_term(kind, e_{a} * h_{a})" for a in range(d)])
    parts = _linear_parts(d, "-")
    del parts["columns"]
    return _EXP_LINEAR.format(views=views, diffs=diffs, terms=terms, **parts)


_QUADRATIC = """
def quadratic(md, row, kt, vt, q, i, k0, nb, us, ps, walk, out):
    p = vt.shape[0]
    {views}
    v_0 = vt[0, k0 : k0 + nb]
    {loops}
    for c in range(1, p):
        vc = vt[c, k0 : k0 + nb]
        {czeros}
        for j in range(nb):
            y = row[j] * vc[j]
            {cdiffs}
            {cbody}
        {cstores}
"""

_LOOP = """{zeros}
    for j in range(nb):
        w = row[j]
        y = v_0[j]
        {diffs}
        {body}
    {stores}
"""

#: from this many features the compact loops (:mod:`nadaraya.backends._fused_compact`) take the
#: degree-2 sums in two loops over the block (the sums of depth up to 2 with the values, then
#: those of depth 3 and 4): fewer live registers each
SPLIT_FROM = 3
#: the most sums one generated degree-2 loop holds (of 32 vector registers; the others hold the
#: differences, the products and the loads). In 3 features (43 sums) one thread, 2048 keys,
#: cycles per 8 pairs: 52 in two loops by depth (34 products, 9 of them twice), 46 in two by
#: first feature (24 and 19 sums, each product once), 61 in one loop (sums spilled)
MAX_LIVE = 24


def loop_parts(degree: int, d: int) -> list[list[tuple[int, ...]]]:
    """The unique entries each generated loop over a block sums: the walk's subtrees under each
    first feature (an entry's parent is in its own subtree, so no product is computed twice), in
    order, packed into loops of at most :data:`MAX_LIVE` sums (those with the value column count);
    a subtree that alone holds more takes a loop of its own (none does in degree 2 up to
    :data:`MAX_QUADRATIC` features: the largest, in 3, holds 24).

    Examples
    --------
    >>> [len(part) for part in loop_parts(2, 3)], [len(part) for part in loop_parts(2, 2)]
    ([20, 14], [14])
    """
    parts: list[list[tuple[int, ...]]] = []
    live = 0
    for a in range(d):
        subtree = [seq for seq, _ in layout(degree, d) if seq[0] == a]
        size = len(subtree) + sum(len(seq) <= degree for seq in subtree)
        if not parts or live + size > MAX_LIVE:
            parts.append([])
            live = 0
        parts[-1] += subtree
        live += size
    return parts


def _quadratic_source(d: int, degree: int = 2) -> str:
    """Python source of the sums of a key block of ``degree`` (2) from its weights ``row``, for
    ``d`` features, every sum a scalar, in the depth-first walk's order (:func:`layout`): per
    pair ``u_a = k_a - q_a``, each entry's product ``t_s = t_parent u_last`` (the parent of a
    first-depth entry is ``w``), ``sum t_s``, and ``sum t_s v_0`` for ``t <= degree``; a loop
    over the block per part of :func:`loop_parts`, with the differences of the features its
    entries name; each further value column takes one more loop, with ``w v_c`` at the root."""
    plain, first, _ = _positions(degree, d, 1)
    nodes = [seq for seq, _ in layout(degree, d)]
    name = lambda seq: "_".join(map(str, seq))  # noqa: E731
    parent = lambda seq: "w" if len(seq) == 1 else f"t_{name(seq[:-1])}"  # noqa: E731
    low = [seq for seq in nodes if len(seq) <= degree]
    n_plain = len(plain)
    at = lambda s: f"out[{n_plain} + {first[s] - n_plain} * p"  # noqa: E731  # a value sum's first column
    loops = []
    for summed in loop_parts(degree, d):
        needed = sorted({seq[:t] for seq in summed for t in range(1, len(seq) + 1)}, key=nodes.index)
        diffs = "\n        ".join(f"e_{a} = k_{a}[j] - q_{a}" for a in sorted({a for s in summed for a in s}))
        values = [seq for seq in summed if len(seq) <= degree]
        body = [f"t_{name(s)} = {parent(s)} * e_{s[-1]}" for s in needed]
        body += [f"s_{name(s)} += t_{name(s)}" for s in summed]
        body += [f"r_{name(s)} += t_{name(s)} * y" for s in values]
        zeros = [f"s_{name(s)} = 0.0" for s in summed] + [f"r_{name(s)} = 0.0" for s in values]
        loops.append(_LOOP.format(
            zeros="\n    ".join(zeros),
            diffs=diffs, body="\n        ".join(body),
            stores="\n    ".join([f"out[{plain[s]}] = s_{name(s)}" for s in summed]
                                  + [f"{at(s)}] = r_{name(s)}" for s in values])))
    cparent = lambda seq: "y" if len(seq) == 1 else f"t_{name(seq[:-1])}"  # noqa: E731
    cbody = [f"t_{name(s)} = {cparent(s)} * e_{s[-1]}" for s in low]
    cbody += [f"r_{name(s)} += t_{name(s)}" for s in low]
    return _QUADRATIC.format(
        views="\n    ".join(f"q_{a} = q[i, {a}]; k_{a} = kt[{a}, k0 : k0 + nb]" for a in range(d)),
        loops="\n    ".join(loops),
        czeros="\n        ".join(f"r_{name(s)} = 0.0" for s in low),
        cdiffs="\n            ".join(f"e_{a} = k_{a}[j] - q_{a}" for a in range(d)),
        cbody="\n            ".join(cbody),
        cstores="\n        ".join(f"{at(s)} + c] = r_{name(s)}" for s in low),
    )


_GENERATED: dict[int, dict[str, Any]] = {}
_GENERATED_QUADRATIC: dict[int, dict[str, Any]] = {}


@numba.extending.overload(block_moments, inline="never", prefer_literal=True,
                          jit_options={"fastmath": _FASTMATH})
def _block_moments(md, row, kt, vt, q, i, k0, nb, us, ps, walk, out):  # type: ignore[no-untyped-def]
    if not isinstance(md, numba.types.IntegerLiteral):
        return None
    if md.literal_value == 0:
        return _walk
    if md.literal_value > _QUADRATIC_KEY:
        d = numba.types.IntegerLiteral(md.literal_value - _QUADRATIC_KEY)
        namespace = generated(_GENERATED_QUADRATIC, d, _quadratic_source, "fused degree-2 moments", {})
        return None if namespace is None else namespace["quadratic"]
    namespace = generated(_GENERATED, md, _linear_source, "fused degree-1 moments", {})
    return None if namespace is None else namespace["linear"]


def block_values(md, row, kt, vt, q, i, k0, nb, out):  # type: ignore[no-untyped-def]
    """The degree-1 sums with the value columns after the first, of ``md`` features (generated,
    a compile-time constant); compiled only."""
    raise NotImplementedError("only callable from jitted code")


@numba.extending.overload(block_values, inline="never", prefer_literal=True,
                          jit_options={"fastmath": _FASTMATH})
def _block_values(md, row, kt, vt, q, i, k0, nb, out):  # type: ignore[no-untyped-def]
    namespace = generated(_GENERATED, md, _linear_source, "fused degree-1 moments", {})
    return None if namespace is None else namespace["values"]
