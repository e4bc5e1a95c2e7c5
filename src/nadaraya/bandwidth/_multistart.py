"""A wider per-column search: a coordinate sweep on a grid per column, polish from several
starts, and the test that a column left smoothed out is no better kept.

The criterion of a per-feature search has local minima, and the basin L-BFGS-B starts in
decides where it stops. These steps widen the search at a cost of passes linear in the
number of columns:

- :func:`sweep`: cyclic coordinate descent on a fixed grid per column (log-spaced
  bandwidths, evenly spaced lambdas), each column's grid scored with the others held (or
  walked outwards from the column's value until the score has risen ``patience`` times in a
  row), until a round moves nothing (at most ``rounds``);
- :func:`best_of`: a local optimiser from several starts, the best kept;
- :class:`Memo`: the criterion, which scores no bandwidth twice (the local polishes that run
  on it, L-BFGS-B and Levenberg-Marquardt, are in :mod:`nadaraya.bandwidth._polish`);
- :func:`explore_smooth`, :func:`explore_kinked`: the per-feature search's starts, polishes
  and sweep, for a smooth criterion and for a compact kernel's;
- :func:`settle`: each column at its smoothing-out end is scored against the best finite
  value of its own profile (a grid, then Brent's refinement around the best grid point): it
  stays smoothed out only where no finite value scores lower.

Every function takes the criterion as ``f(h) -> float`` (one exact leave-one-out pass) and
keeps a point only where it scores no higher than the best so far, so none of them can make
the search's result worse.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from nadaraya.bandwidth.optimise import brent

__all__ = [
    "Memo",
    "best_of",
    "better",
    "distinct",
    "explore_kinked",
    "explore_smooth",
    "log_grid",
    "profile",
    "profile_each",
    "settle",
    "smooth_out",
    "sweep",
]

#: the upper bound of a bandwidth in units of its feature's range: the Gaussian's weights vary
#: by 5e-9 over the range there, so the criterion is that of h = inf to about that
_OUT = 1e4

#: scores this close (relative) are equal: a bandwidth a few ulps from its end scores the same
_TIE = 1e-12
#: the least relative gain for which a sweep moves a column
_GAIN = 1e-9
#: after the tight polish, a sweep's grid points within this factor of a column's bandwidth
#: (inside the polished minimum's basin) count as risen: they cost no level of the pass
_NEAR = 2.0
#: and those within the first factor where the Gauss-Newton model at the polished point (its
#: gradient and matrix, along that column alone) predicts a rise above the second number
#: times the score: on a steep enough wall of the polished minimum's basin
_MODEL = (4.0 * (1 + 1e-9), 1e-2)

Criterion = Callable[[NDArray[np.float64]], float]
#: ``column(h, cols, values)``: the criterion at ``h`` with column ``cols[l]`` set to ``values[l]``
Column = Callable[[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64]], NDArray[np.float64]]
Polish = Callable[[NDArray[np.float64]], tuple[NDArray[np.float64], float]]
#: a polish that also takes a tolerance of :data:`TOLERANCES` (``"tight"`` by default)
TolerantPolish = Callable[..., tuple[NDArray[np.float64], float]]


def log_grid(lower: float, cap: float, ratio: float = 2.0) -> NDArray[np.float64]:
    """Bandwidths ``lower * ratio**k`` up to ``cap`` (``cap`` included), ascending.

    Examples
    --------
    >>> log_grid(1.0, 5.0).tolist()
    [1.0, 2.0, 4.0, 5.0]
    """
    k = max(0, math.floor(math.log(cap / lower) / math.log(ratio) + 1e-9))
    out = lower * ratio ** np.arange(k + 1.0)
    return out if out[-1] >= cap * (1 - 1e-9) else np.append(out, cap)


def sweep(
    f: Criterion,
    h: NDArray[np.float64],
    score: float,
    grids: Sequence[NDArray[np.float64]],
    rounds: int = 2,
    columns: Sequence[int] | NDArray[np.intp] | None = None,
    patience: int | None = None,
    also: Sequence[tuple[int, float]] = (),
    near: float = 1.0,
    risen: Callable[[int, float], bool] | None = None,
) -> tuple[NDArray[np.float64], float, bool]:
    """Cyclic coordinate descent on a grid per column: each column (of ``columns``, default
    all) moves to the best value of its grid (the others held) where that scores lower by
    more than a relative 1e-9. Returns ``(h, score, moved)``.

    ``also``: changes ``(column, value)`` of ``h`` that a later step will score, scored with
    the sweep's first steps (in the same pass where ``f`` is a :class:`Memo` that scores
    columns at once; there a point scored only by the gradient's pass, ``h`` itself where
    ``also`` holds ``(j, h[j])``, is scored again exactly).

    With ``patience``, each column's grid (ascending) is walked outwards from its value, each
    way until the score has risen ``patience`` times in a row. With ``near`` > 1 as well (for
    ``h`` a polished minimum, whose profiles rise on either side of it), the grid points within
    a factor ``near`` of a column's value count as risen without a pass, and so do those for
    which ``risen(column, value)`` holds (a model of the profile that predicts a rise there).

    Examples
    --------
    >>> f = lambda h: float((h[0] - 2.0) ** 2 + (h[1] + 1.0) ** 2)
    >>> g = np.arange(-3.0, 4.0)
    >>> h, s, moved = sweep(f, np.zeros(2), f(np.zeros(2)), [g, g])
    >>> h.tolist(), s, moved
    ([2.0, -1.0], 0.0, True)
    """
    h = np.array(h, dtype=np.float64)
    moved = False
    for _ in range(rounds):
        moved_now = False
        order = list(range(len(grids)) if columns is None else columns)
        if isinstance(f, Memo) and f.column is not None and patience is not None:
            # every column's first steps both ways in one pass (the least each walk takes;
            # a column after one that moves is scored again at the new point)
            first = []
            for j in order:
                for way in _ways(grids[j], h[j]):
                    skip = _near(way, h[j], near, patience, risen, j)
                    first += [(j, float(v)) for v in way[skip:patience]]
            f.batch(h, first + list(also), exact=True)
        for j in order:
            grid = np.asarray(grids[j], dtype=np.float64)
            best_v, best_s = h[j], score
            ways = [grid[grid != h[j]]] if patience is None else _ways(grid, h[j])
            for way in ways:
                last, rises, pos = score, 0, 0
                if patience is not None:
                    # the points next to a minimum, taken as risen
                    rises = pos = _near(way, h[j], near, patience, risen, j)
                end = patience  # the first chunk ends where the first steps above did
                while pos < way.size:
                    chunk = way[pos:] if patience is None else way[pos : max(end, pos + 1)]
                    end = pos + chunk.size + (patience or 0)
                    pos += chunk.size
                    for v, s in zip(chunk, profile(f, h, j, chunk)):
                        if s < best_s:
                            best_v, best_s = v, s
                        rises = rises + 1 if s > last else 0
                        last = s
                        if patience is not None and rises >= patience:
                            pos = way.size
                            break
            # a move must gain more than rounding: on a plateau (a feature smoothed out) the
            # scores differ in their last bits, and chasing those costs sweeps and polishes
            if best_s < score - _GAIN * abs(score):
                h[j], score, moved_now = best_v, best_s, True
        moved |= moved_now
        if not moved_now:
            break
    return h, score, moved


def _ways(grid: NDArray[np.float64] | Sequence[float], v: float) -> list[NDArray[np.float64]]:
    """A column's grid walked outwards from ``v``: the points below it (descending), above it."""
    grid = np.asarray(grid, dtype=np.float64)
    return [grid[grid < v][::-1], grid[grid > v]]


def _near(way: NDArray[np.float64], v: float, near: float, patience: int,
          risen: Callable[[int, float], bool] | None = None, j: int = 0) -> int:
    """How many of the first points of ``way`` lie within a factor ``near`` of ``v``, or are
    predicted risen by ``risen(j, point)`` (fewer than ``patience``)."""
    k = 0
    while k < min(way.size, patience - 1) and (
        (near > 1 and max(way[k] / v, v / way[k]) < near) or (risen is not None and risen(j, float(way[k])))
    ):
        k += 1
    return k


def profile(f: Criterion, h: NDArray[np.float64], j: int, values: Sequence[float] | NDArray[np.float64]
            ) -> list[float]:
    """``f`` at ``h`` with column ``j`` set to each of ``values``, the others held: through
    :meth:`Memo.batch` where ``f`` is a :class:`Memo` (one pass where its objective scores a
    column's values at once), else one call of ``f`` per value.

    Examples
    --------
    >>> profile(lambda h: float(h.sum()), np.array([1.0, 2.0]), 1, [0.0, 5.0])
    [1.0, 6.0]
    """
    return profile_each(f, h, [(j, float(v)) for v in values])


def best_of(
    polish: Polish, starts: Sequence[NDArray[np.float64]], h: NDArray[np.float64], score: float
) -> tuple[NDArray[np.float64], float]:
    """The local optimiser ``polish(start) -> (h, score)`` from each start; the best point
    of them and ``(h, score)`` (duplicate starts are run once)."""
    seen: list[NDArray[np.float64]] = []
    for start in starts:
        if any(np.array_equal(start, s) for s in seen):
            continue
        seen.append(start)
        h1, s1 = polish(start)
        if s1 <= score:
            h, score = h1, s1
    return h, score


def settle(
    f: Criterion,
    h: NDArray[np.float64],
    score: float,
    candidates: Sequence[int] | NDArray[np.intp],
    upper: NDArray[np.float64],
    grids: Sequence[NDArray[np.float64]],
    log: Sequence[bool] | NDArray[np.bool_],
    tol: float = 1e-3,
    refine_moves: bool = True,
) -> tuple[NDArray[np.float64], float, NDArray[np.bool_], bool]:
    """Decide, for each column of ``candidates``, between its smoothing-out end ``upper[j]``
    and the best finite value of its profile (others held): the grid ``grids[j]`` (ascending,
    below ``upper[j]``), then Brent's refinement (on ``log`` h where ``log[j]``) between the
    best grid point's neighbours. The column goes to the lower of the two; it is smoothed
    out only where the end scores no higher than every finite value tried. Without
    ``refine_moves`` (for a caller that polishes a moved point itself), Brent runs only where
    the grid's best does not beat the end already, where it may decide the column.

    Returns ``(h, score, smoothed, moved)``: ``smoothed[j]`` for the columns left at their
    end, ``moved`` where ``h`` changed.
    """
    h = np.array(h, dtype=np.float64)
    smoothed = np.zeros(h.size, dtype=bool)
    moved = False
    if isinstance(f, Memo) and f.column is not None:
        # every candidate's end and grid in one pass (a column after one that moves is scored
        # again at the new point)
        f.batch(h, [(j, float(v)) for j in candidates for v in np.append(upper[j], grids[j]) if v != h[j]])
    for j in candidates:

        def at(v: float, j: int = j) -> float:
            trial = h.copy()
            trial[j] = v
            return f(trial)

        at_end = bool(np.isclose(h[j], upper[j], rtol=1e-9, atol=0.0))
        grid = np.asarray(grids[j], dtype=np.float64)
        # the end and the grid in one profile (one pass where ``f`` scores a column at once)
        values = np.append(upper[j], grid)
        scored = dict(zip(values[values != h[j]].tolist(), profile(f, h, j, values[values != h[j]])))
        s_up, *vals = (score if v == h[j] else scored[v] for v in values.tolist())
        k = int(np.argmin(vals))
        v_best, s_best = float(grid[k]), float(vals[k])
        decided = not refine_moves and s_best < s_up
        if 0 < k < grid.size - 1 and math.isfinite(s_best) and not decided:
            warp = (np.log if log[j] else np.asarray)(grid[k - 1 : k + 2].astype(np.float64))
            back: Callable[[float], float] = math.exp if log[j] else float
            x, s_ref, _ = brent(
                lambda u, back=back: at(back(u)),
                (float(warp[0]), float(warp[1]), float(warp[2])),
                (float(vals[k - 1]), s_best, float(vals[k + 1])),
                tol,
            )
            if s_ref < s_best:
                v_best, s_best = back(x), s_ref
        if s_best < s_up:
            if s_best < score or at_end:
                h[j], score, moved = v_best, s_best, True
        elif at_end or s_up <= score + _TIE * abs(score):
            moved |= h[j] != upper[j]
            h[j], score = upper[j], s_up
            smoothed[j] = True
    return h, score, smoothed, moved


def smooth_out(
    f: Criterion,
    h: NDArray[np.float64],
    score: float,
    upper: NDArray[np.float64],
    span: NDArray[np.float64],
) -> tuple[NDArray[np.float64], float, bool]:
    """Each feature whose bandwidth is at least its range (where the criterion has
    flattened out; the others shape the weights, and an optimiser that stopped there found
    them useful) tried at its upper bound, kept where no worse: ``(h, score, moved)``."""
    moved = False
    todo = [j for j in range(h.size) if span[j] <= h[j] < upper[j]]
    together = isinstance(f, Memo) and f.column is not None
    while todo:
        # the features left, each at its end, in one pass where ``f`` is a :class:`Memo`
        # whose objective scores them at once (else one at a time); the first no worse is
        # kept, and those after it are tried again from there
        chunk = todo if together else todo[:1]
        scores = profile_each(f, h, [(j, float(upper[j])) for j in chunk])
        kept = next((k for k, s_trial in enumerate(scores) if s_trial <= score), None)
        if kept is None:
            if together:
                break
            todo = todo[1:]
            continue
        h = h.copy()
        h[todo[kept]] = upper[todo[kept]]
        score, moved = scores[kept], True
        todo = todo[kept + 1 :]
    return h, score, moved


def profile_each(f: Criterion, h: NDArray[np.float64], changes: Sequence[tuple[int, float]]) -> list[float]:
    """``f`` at ``h`` with column ``j`` set to ``v``, for each ``(j, v)`` of ``changes``:
    through :meth:`Memo.batch` where ``f`` is a :class:`Memo`, else one call per change.

    Examples
    --------
    >>> profile_each(lambda h: float(h.sum()), np.array([1.0, 2.0]), [(0, 3.0), (1, 0.0)])
    [5.0, 1.0]
    """
    if isinstance(f, Memo):
        return f.batch(h, changes)
    out = []
    for j, v in changes:
        trial = np.array(h, dtype=np.float64)
        trial[j] = v
        out.append(float(f(trial)))
    return out


class Memo:
    """The criterion with a record of every bandwidth it scored: a bandwidth scored before (a
    polish's start, a grid point a sweep or a profile has visited) costs no pass again.
    ``value_grad`` is the criterion with its gradient along ``log h`` (one pass) where the
    objective gives it, else None; :meth:`__call__` then takes the value from it."""

    def __init__(
        self,
        f: Criterion,
        value_grad: Callable[[NDArray[np.float64]], tuple[float, NDArray[np.float64]]] | None = None,
        *,
        values_by_gradient: bool = True,
        column: Column | None = None,
        graded: bool = False,
    ) -> None:
        self.f, self.value_grad = f, value_grad
        #: ``column(h, cols, values)``: the criterion at ``h`` with column ``cols[l]`` set to
        #: ``values[l]``, every ``l`` in one pass (where the objective has one), else None
        self.column = column
        #: ``column(h, cols, values, gradient=True)`` also gives ``value_grad(h)``'s results,
        #: from the same pass: ``(scores, those)``
        self.graded = graded
        #: False where the gradient's pass costs more than the value's: :meth:`__call__` then
        #: takes the value's pass, and only :meth:`with_gradient` the gradient's
        self.values_by_gradient = values_by_gradient
        self.values: dict[bytes, float] = {}
        self.grads: dict[bytes, NDArray[np.float64]] = {}
        #: the Gauss-Newton matrix of each bandwidth whose ``value_grad`` gave one (a third item)
        self.curvatures: dict[bytes, NDArray[np.float64]] = {}
        #: the bandwidths scored by an exact pass (``f`` or ``column``, each with its own
        #: shifts), not by the gradient's pass (which borrows its shifts)
        self.exact: set[bytes] = set()

    def __call__(self, h: NDArray[np.float64]) -> float:
        key = np.asarray(h, dtype=np.float64).tobytes()
        if key not in self.values:
            if self.value_grad is not None and self.values_by_gradient:
                return self.with_gradient(h)[0]
            self.values[key] = float(self.f(h))
            self.exact.add(key)
        return self.values[key]

    def batch(self, h: NDArray[np.float64], changes: Sequence[tuple[int, float]], exact: bool = False,
              gradient: bool = False) -> list[float]:
        """The criterion at ``h`` with column ``j`` set to ``v``, for each ``(j, v)`` of
        ``changes``: those not scored before in one pass of ``column`` where there is one,
        else one by one. With ``exact`` (and a ``column``), those scored only by the
        gradient's pass are scored again in that pass. With ``gradient`` (and a ``graded``
        column), :meth:`with_gradient` at ``h`` is taken from that pass too."""
        trials = []
        for j, v in changes:
            trial = np.array(h, dtype=np.float64)
            trial[j] = v
            trials.append(trial)
        todo: dict[bytes, int] = {}
        for k, trial in enumerate(trials):
            key = trial.tobytes()
            fresh = key not in self.values or (exact and self.column is not None and key not in self.exact)
            if fresh and key not in todo:
                todo[key] = k
        here = np.array(h, dtype=np.float64)
        graded = gradient and self.graded and self.column is not None and here.tobytes() not in self.grads
        if self.column is not None and (todo or graded):
            ks = list(todo.values())
            cols = np.array([changes[k][0] for k in ks], dtype=np.int64)
            values = np.array([trials[k][changes[k][0]] for k in ks], dtype=np.float64)
            if graded:
                scores, (value, grad, *more) = self.column(here, cols, values, gradient=True)
                self._graded(here, value, grad, more)
                self.exact.add(here.tobytes())
            else:
                scores = self.column(here, cols, values)
            for key, sc in zip(todo, scores):
                self.values[key] = float(sc)
                self.exact.add(key)
        return [self(t) for t in trials]

    def with_gradient(self, h: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        assert self.value_grad is not None
        key = np.asarray(h, dtype=np.float64).tobytes()
        if key not in self.grads:
            value, grad, *more = self.value_grad(h)
            self._graded(np.asarray(h, dtype=np.float64), value, grad, more)
        return self.values[key], self.grads[key]

    def _graded(self, h: NDArray[np.float64], value: float, grad: NDArray[np.float64], more: list) -> None:
        """Records ``value_grad(h)``'s results (a Gauss-Newton matrix the third where given)."""
        key = h.tobytes()
        self.values[key], self.grads[key] = float(value), np.asarray(grad, dtype=np.float64)
        if more and more[0] is not None:
            self.curvatures[key] = np.asarray(more[0], dtype=np.float64)


def distinct(
    starts: list[NDArray[np.float64]], grids: list[NDArray[np.float64]]
) -> list[NDArray[np.float64]]:
    """The starts less those whose nearest point on the sweep's grids (in log h) is that of an
    earlier one: they lead to one basin."""
    out: list[NDArray[np.float64]] = []
    cells: list[list[int]] = []
    for h in starts:
        cell = [int(np.argmin(np.abs(np.log(g / v)))) for g, v in zip(grids, h)]
        if cell not in cells:
            out.append(h)
            cells.append(cell)
    return out


def better(
    a: tuple[NDArray[np.float64], float], b: tuple[NDArray[np.float64], float]
) -> tuple[NDArray[np.float64], float]:
    """The lower-scoring of two ``(h, score)``; ``a`` on a tie."""
    return a if a[1] <= b[1] else b


def explore_smooth(
    f: Criterion,
    polish: TolerantPolish,
    h_grid: NDArray[np.float64],
    s_grid: float,
    h_rot: NDArray[np.float64],
    grids: list[NDArray[np.float64]],
    upper: NDArray[np.float64],
    span: NDArray[np.float64],
) -> tuple[NDArray[np.float64], float]:
    """The per-feature search's starts and polish where the criterion is smooth (no compact
    kernel): a loose polish (``polish(h0, "loose")``: L-BFGS-B, or Levenberg-Marquardt where the
    caller has CV's Gauss-Newton matrix) from the grid's best point, from there with the features
    smoothed out whose removal alone is no worse, and from Scott's rule (where a local
    search from the rule of thumb, as statsmodels' and np's, ends), starts in one cell of the
    sweep's grids run once; then tightly from the best end, its features past their range
    tried smoothed out first (L-BFGS-B would crawl along their flat profiles). A coordinate
    sweep (each feature within its range to the best point of its grid, the others held,
    walked outwards until the score has risen twice) leaves a basin where one feature's grid
    holds a lower score (the points within a factor :data:`_NEAR` of the polished point
    counted as risen), and L-BFGS-B polishes what it finds; the features past their range
    are settled afterwards on their own profiles."""
    # each feature tried smoothed out, all in one pass where ``f`` scores columns at once; the
    # polish scores their union, which it starts from
    todo = np.flatnonzero(h_grid < upper)
    trials = [(int(j), float(upper[j])) for j in todo]
    if isinstance(f, Memo):  # with the first start's gradient, where the pass gives it
        f.batch(h_grid, trials, gradient=True)
    drops = profile_each(f, h_grid, trials)
    h_out = np.where(np.isin(np.arange(h_grid.size), todo[np.array(drops) <= s_grid]), upper, h_grid)
    ends = [polish(h0, "loose") for h0 in distinct([h_grid, h_out, h_rot], grids)]
    h, sc = better(min(ends, key=lambda e: e[1]), (h_grid, s_grid))
    h, sc, _ = smooth_out(f, h, sc, upper, span)
    h, sc = better(polish(h), (h, sc))
    # the profiles of the features smoothed out, which settle scores next, in the sweep's pass
    # and ``h`` itself, exactly: where the sweep moves nothing, the search's reported score
    # needs no pass of its own
    flat = [(int(j), float(v)) for j in np.flatnonzero(h >= upper) for v in grids[j] if v != h[j]]
    flat.append((0, float(h[0])))
    h, sc, moved = sweep(f, h, sc, grids, rounds=1, columns=np.flatnonzero(h < span), patience=2, also=flat,
                         near=_NEAR, risen=_model_risen(f, h, sc))
    if moved:
        h, sc = better(polish(h), (h, sc))
    return h, sc


def _model_risen(f: Criterion, h: NDArray[np.float64], score: float) -> Callable[[int, float], bool] | None:
    """``risen(j, v)``: whether the Gauss-Newton model at ``h`` (where the memo holds its
    gradient and matrix) predicts column ``j`` at ``v``, within a factor ``_MODEL[0]`` of
    ``h[j]``, above ``score`` by more than ``_MODEL[1] |score|``; None without a model."""
    key = np.asarray(h, dtype=np.float64).tobytes()
    if not isinstance(f, Memo) or key not in f.curvatures or key not in f.grads:
        return None
    g, H = f.grads[key], f.curvatures[key]

    def risen(j: int, v: float) -> bool:
        t = math.log(v / h[j])
        return abs(t) <= math.log(_MODEL[0]) and g[j] * t + 0.5 * H[j, j] * t * t > _MODEL[1] * abs(score)

    return risen


def explore_kinked(
    f: Criterion,
    polish: TolerantPolish,
    h_grid: NDArray[np.float64],
    s_grid: float,
    h_rot: NDArray[np.float64],
    grids: list[NDArray[np.float64]],
) -> tuple[NDArray[np.float64], float]:
    """The per-feature search's starts and polish for a compact kernel, whose criterion has
    kinks where L-BFGS-B's finite differences stall: a coordinate sweep from the better of
    the grid's best point and Scott's rule, L-BFGS-B from the sweep's point, the rule and the
    grid's point, then whole sweeps (up to two rounds) and L-BFGS-B where they moved."""
    s_rot = f(h_rot)
    h, sc = (h_rot, s_rot) if s_rot < s_grid else (h_grid, s_grid)
    h, sc, _ = sweep(f, h, sc, grids, rounds=1)
    h, sc = best_of(polish, [h, h_rot, h_grid], h, sc)
    h, sc, moved = sweep(f, h, sc, grids)
    if moved:
        h, sc = best_of(polish, [h], h, sc)
    return h, sc
