"""Moment sums about a box's centre, in bandwidths, moved to each query and laid out as tensors.

A series about a box's centre (:mod:`nadaraya.backends._taylor_nd`) sums ``M_beta = sum_i w_i
u_i^beta g_i`` for every multi-index ``beta`` (``u``: a key's offset from the centre, in
bandwidths per feature; ``g`` = 1 or a value column). A local fit needs the moments about the
query, at ``a`` from the centre: ``sum_i w_i (u_i - a)^gamma g_i = sum_{beta <= gamma}
prod_k C(gamma_k, beta_k) (-a_k)^(gamma_k - beta_k) M_beta``, times ``h^gamma`` for the raw
units of ``(x - q)``, and as the symmetric tensors of
:func:`nadaraya.backends.reference.moment_shapes` (entry ``(i_1 .. i_j)`` is the multi-index that
counts each feature among them).
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
from numpy.typing import NDArray

__all__ = ["about_queries", "tree"]


@functools.lru_cache(maxsize=64)
def tree(d: int, degree: int) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...], tuple[int, ...]]:
    """The multi-indices of ``d`` features with total degree up to ``degree``, by degree, each
    one more in feature ``dim`` than its ``parent`` (an earlier one), the features from the
    parent's last on: the order of :func:`nadaraya.backends._taylor_nd.multi_indices`.

    Examples
    --------
    >>> tree(2, 2)
    (((0, 0), (1, 0), (0, 1), (2, 0), (1, 1), (0, 2)), (-1, 0, 0, 1, 1, 2), (0, 0, 1, 0, 1, 1))
    """
    out, parent, dim, start = [(0,) * d], [-1], [0], 0
    for _ in range(degree):
        end = len(out)
        for i in range(start, end):
            for k in range(dim[i], d):
                a = list(out[i])
                a[k] += 1
                out.append(tuple(a))
                parent.append(i)
                dim.append(k)
        start = end
    return tuple(out), tuple(parent), tuple(dim)


def _shifted(sums: NDArray[np.float64], a: NDArray[np.float64], d: int, degree: int) -> NDArray[np.float64]:
    """``sums[:, beta, ...]`` about the centre to the same about the queries at ``a`` (m, d)."""
    index = {al: i for i, al in enumerate(tree(d, degree)[0])}
    powers = [[np.ones(a.shape[0])] for _ in range(d)]
    for k in range(d):
        for _ in range(degree):
            powers[k].append(powers[k][-1] * -a[:, k])
    out = np.zeros_like(sums)
    for gamma, gi in index.items():
        for beta in itertools.product(*(range(g + 1) for g in gamma)):
            coef = float(math.prod(math.comb(g, b) for g, b in zip(gamma, beta, strict=True)))
            factor = coef * math.prod(powers[k][gamma[k] - beta[k]] for k in range(d))
            factor = factor.reshape((-1,) + (1,) * (sums.ndim - 2))
            out[:, gi] += factor * sums[:, index[beta]]
    return out


def about_queries(weighted: NDArray[np.float64], valued: NDArray[np.float64], a: NDArray[np.float64],
                  bandwidth: NDArray[np.float64], degree: int) -> list[NDArray[np.float64]]:
    """The moment tensors of a local fit of ``degree`` about each query, in the order of
    :func:`nadaraya.backends.reference.moment_shapes`, from the sums about the box centres:
    ``weighted`` (m, T) over the multi-indices up to ``2 degree`` (:func:`tree`) and ``valued``
    (m, V, p) over those up to ``degree``; ``a`` (m, d): each query's offset from its box's
    centre, in bandwidths.

    Examples
    --------
    >>> import numpy as np
    >>> u = np.array([[0.5, -1.0], [2.0, 0.25]])  # two keys about a centre, unit weights
    >>> mono = np.array([[np.prod(x ** np.array(al)) for al in tree(2, 2)[0]] for x in u])
    >>> a = np.array([[0.1, 0.2]])
    >>> tensors = about_queries(mono.sum(0)[None], (mono[:, :3].sum(0))[None, :, None], a, np.ones(2), 1)
    >>> np.allclose(tensors[1][0], sum(np.outer(x - a[0], x - a[0]) for x in u))
    True
    """
    m, d = a.shape
    weighted = _shifted(weighted, a, d, 2 * degree)
    valued = _shifted(valued, a, d, degree)
    index = {al: i for i, al in enumerate(tree(d, 2 * degree)[0])}
    h = np.asarray(bandwidth, dtype=np.float64)
    tensors = []
    for source, top in ((weighted, 2 * degree), (valued, degree)):
        for j in range(1, top + 1):
            cells = list(itertools.product(range(d), repeat=j))
            gammas = [tuple(cell.count(k) for k in range(d)) for cell in cells]
            scale = np.array([math.prod(h[k] ** g[k] for k in range(d)) for g in gammas])
            picked = source[:, [index[g] for g in gammas]]
            picked = picked * scale.reshape((1, -1) + (1,) * (source.ndim - 2))
            tensors.append(picked.reshape((m,) + (d,) * j + source.shape[2:]))
    return tensors
