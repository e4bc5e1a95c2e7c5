"""One-dimensional minimisers from a known bracket (safeguarded Halley steps, Brent's method) and
the scans of a log grid that give them their brackets."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["brent", "fill_in", "halley", "parabola_vertex", "rival_minima"]


def parabola_vertex(xs: tuple[float, float, float], fs: tuple[float, float, float]) -> float:
    """The abscissa of the vertex of the parabola through ``(xs[i], fs[i])``; NaN where the
    outer values are not finite or the three points are collinear.

    Examples
    --------
    >>> parabola_vertex((0.0, 1.0, 3.0), (4.0, 1.0, 1.0))
    2.0
    """
    (a, b, c), (fa, fb, fc) = xs, fs
    if not (math.isfinite(fa) and math.isfinite(fc)):
        return math.nan
    num = (b - a) ** 2 * (fb - fc) - (b - c) ** 2 * (fb - fa)
    den = (b - a) * (fb - fc) - (b - c) * (fb - fa)
    return b - 0.5 * num / den if den != 0.0 else math.nan


_GOLDEN = 0.3819660112501051  # (3 - sqrt 5) / 2


def halley(
    f: Any, xs: tuple[float, float, float], fs: tuple[float, float, float], tol: float, max_eval: int = 30
) -> tuple[float, float, bool]:
    """Safeguarded Halley minimisation from a bracket whose three values are known already.

    ``xs = (a, b, c)`` ascending with ``f(b) <= f(a), f(c)``; ``f(x)`` returns the value and
    its first three derivatives. The first point is the vertex of the parabola through the
    three (``b`` when it is not inside). Each evaluation shrinks the bracket on the side its
    slope points away from. The next point is Halley's step for a zero of the slope,
    ``-2 f' f'' / (2 f''^2 - f' f''')`` (cubic convergence), where the curvature is positive
    and the step goes downhill and stays inside the bracket; Newton's ``-f' / f''`` where only
    Halley's fails; else the midpoint towards the descent side. Stops when a step is shorter
    than ``tol`` (the minimiser is then within about that of the point, which has been
    evaluated) or the bracket is narrower than ``2 tol``. From the vertex of the grid's
    parabola this takes two or three evaluations. Returns the best point seen, its value and
    whether it converged.

    Examples
    --------
    >>> import math
    >>> f = lambda x: (math.cosh(x - 0.3), math.sinh(x - 0.3), math.cosh(x - 0.3), math.sinh(x - 0.3))
    >>> x, fx, ok = halley(f, (-1.0, 0.0, 1.0), (f(-1.0)[0], f(0.0)[0], f(1.0)[0]), 1e-6)
    >>> round(x, 4), ok
    (0.3, True)
    """
    (a, b, c), fb = xs, fs[1]
    x = parabola_vertex(xs, fs)
    x = x if a < x < c else b
    best_x, best_f = b, fb
    for _ in range(max_eval):
        fx, g1, g2, g3 = f(x)
        if fx < best_f:
            best_x, best_f = x, fx
        if g1 > 0:
            c = x
        else:
            a = x
        step = math.nan
        if g2 > 0:
            den = 2.0 * g2 * g2 - g1 * g3
            halley = -2.0 * g1 * g2 / den if den > 0 else math.nan
            step = halley if a < x + halley < c and halley * g1 <= 0 else -g1 / g2
        if math.isfinite(step) and abs(step) < tol:
            return best_x, best_f, True
        if c - a <= 2.0 * tol:
            return best_x, best_f, True
        if math.isfinite(step) and a < x + step < c:
            x = x + step
        else:
            x = 0.5 * (x + (a if g1 > 0 else c))
    return best_x, best_f, False


#: ``brent(..., settled=g)`` stops without probing only where the bracket is within this many
#: ``tol`` of the best point on each side
_SETTLED = 10.0


def brent(
    f: Any, xs: tuple[float, float, float], fs: tuple[float, float, float], tol: float, max_eval: int = 40,
    settled: float = 0.0,
) -> tuple[float, float, bool]:
    """Brent's minimisation from a bracket whose three values are known already.

    ``xs = (a, b, c)`` ascending with ``f(b) <= f(a), f(c)`` (the best grid point and its
    neighbours), so no evaluation is spent on the bracket. Each step is the vertex of the
    parabola through the three points, safeguarded by a golden-section step into the larger
    side when the vertex falls outside the bracket, and kept ``tol`` inside its ends; a vertex
    within ``tol`` of ``b`` is replaced by a probe ``tol`` away from ``b`` on the larger side,
    so that the bracket shrinks on both sides. Stops when ``c - a <= 2 tol``, or when that
    probe would land on an end of the bracket (after probes on both sides, rounding can leave the
    bracket a few ulps wider than ``2 tol``): the minimiser is then within ``tol`` of ``b`` (for
    a function unimodal on the bracket); a last parabola step inside that bracket is kept when it
    scores lower. With ``settled`` > 0, it also stops, at ``b``, where the vertex is within
    ``tol`` of ``b``, ``a`` and ``c`` are within ``_SETTLED * tol`` of it and the parabola
    promises less than ``settled`` below ``f(b)`` at its vertex: for a smooth function the
    vertex of three points that close is the minimiser to far below ``tol`` (its error is of
    the order of ``(b - a)(c - b)`` times the ratio of the third derivative to the second),
    so the probes on both sides and the last step would gain no more than that.
    Returns ``(x, f(x), converged)``.
    """
    (a, b, c), (fa, fb, fc) = xs, fs
    for _ in range(max_eval):
        x = parabola_vertex((a, b, c), (fa, fb, fc))
        right = (c - b) >= (b - a)
        probe = a < x < c and abs(x - b) < tol
        if probe and settled > 0 and max(b - a, c - b) <= _SETTLED * tol:
            curve = ((fa - fb) / (a - b) - (fc - fb) / (c - b)) / (a - c)  # the parabola's x^2 term
            if curve * (x - b) ** 2 <= settled:
                return b, fb, True
        if c - a <= 2.0 * tol or (probe and not a < (b + tol if right else b - tol) < c):
            # one last parabola step inside the final bracket: the score to (nearly) its
            # minimum, not only the bandwidth to tol
            if a < x < c and x != b:
                fx = f(x)
                if fx < fb:
                    return x, fx, True
            return b, fb, True
        if not a < x < c:
            x = b + _GOLDEN * (c - b) if right else b - _GOLDEN * (b - a)
        elif probe:
            x = b + tol if right else b - tol
        else:
            x = min(max(x, a + tol), c - tol)
        fx = f(x)
        if fx < fb:
            if x > b:
                a, fa = b, fb
            else:
                c, fc = b, fb
            b, fb = x, fx
        elif x > b:
            c, fc = x, fx
        else:
            a, fa = x, fx
    return b, fb, False


def fill_in(
    f: Any, ts: NDArray[np.float64], values: NDArray[np.float64], margin: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """A ratio-2 grid ``ts`` (descending) and its ``values``, with the geometric midpoint of
    each step next to a point within ``margin`` of the least value added, scored by ``f``:
    the ratio-``sqrt 2`` grid wherever a basin may hold the minimum (a basin narrower than a
    factor 2 next to a near-best point is not missed, and the best point's neighbours are
    ``sqrt 2`` away), the coarse one elsewhere. Steps narrower than 1.9 are not split.

    Examples
    --------
    >>> import numpy as np
    >>> ts = 2.0 ** np.arange(4.0, -5.0, -2.0)
    >>> t, v = fill_in(lambda t: np.log(t) ** 2, ts, np.log(ts) ** 2, 1.0)
    >>> np.log2(t).tolist()
    [4.0, 2.0, 1.0, 0.0, -1.0, -2.0, -4.0]
    """
    best = float(np.min(values))
    near = np.flatnonzero(values <= best + margin)
    pairs = {(i - 1, i) for i in near if i > 0} | {(i, i + 1) for i in near if i + 1 < ts.size}
    pairs = {(i, j) for i, j in pairs if ts[i] > 1.9 * ts[j]}
    if not pairs:
        return ts, values
    mids = np.array([math.sqrt(ts[i] * ts[j]) for i, j in sorted(pairs)])
    scored = np.array([f(t) for t in mids])
    order = np.argsort(-np.concatenate([ts, mids]), kind="stable")
    return np.concatenate([ts, mids])[order], np.concatenate([values, scored])[order]


def rival_minima(xs: NDArray[np.float64], fs: NDArray[np.float64], best: int) -> list[int]:
    """The interior local minima of a grid ``(xs, fs)`` (``xs`` monotone) other than ``best``
    whose basin may hold a lower minimum than ``best``'s, best first: those where the parabola
    through the point and its two neighbours falls below ``fs[best]`` by twice its drop below
    the point. A coarse grid samples a basin as far as half a step from its minimum, so of two
    basins whose minima nearly tie it may rank them wrongly; each rival is worth a refinement.

    Examples
    --------
    >>> import numpy as np
    >>> rival_minima(np.arange(7.0), np.array([5.0, 1.0, 3.0, 1.1, 1.3, 9.0, 9.0]), 1)
    [3]
    >>> rival_minima(np.arange(7.0), np.array([5.0, 1.0, 3.0, 1.1, 3.0, 9.0, 9.0]), 1)
    []
    """
    out = []
    for i in range(1, fs.size - 1):
        f0, fa, fc = float(fs[i]), float(fs[i + 1]), float(fs[i - 1])
        if i == best or not (f0 <= fa and f0 <= fc) or not math.isfinite(fa + fc):
            continue
        x = parabola_vertex((float(xs[i + 1]), float(xs[i]), float(xs[i - 1])), (fa, f0, fc))
        drop = 0.0
        if math.isfinite(x):  # the parabola's fall from f0 to its vertex
            a, c = float(xs[i + 1] - xs[i]), float(xs[i - 1] - xs[i])
            drop = ((fa - f0) / a - (fc - f0) / c) / (a - c) * (x - float(xs[i])) ** 2
        if f0 - 2.0 * drop < fs[best]:
            out.append(i)
    return sorted(out, key=lambda i: float(fs[i]))
