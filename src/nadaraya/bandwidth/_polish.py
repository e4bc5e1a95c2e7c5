"""The per-feature search's local polishes on ``log h``: L-BFGS-B, and Levenberg-Marquardt.

:func:`lbfgsb` runs on any criterion (with its gradient where the memo has one), loosely or
tightly. :func:`gauss_newton` runs on CV, a weighted sum of squared leave-one-out residuals
``r_i = y_i - pred_i(h)``: its Gauss-Newton matrix ``2 sum_i w_i J_i J_i^T`` (``J_i`` the
gradient of ``pred_i`` along ``log h``) comes from the gradient pass's moments at no extra
pass (:meth:`nadaraya.bandwidth._objective._Objective.with_gradient`). It leaves out the
residuals' own curvature ``-2 sum_i w_i r_i grad^2 pred_i``, which counts near a minimum
(there Gauss-Newton converges only linearly) and little far from one, where its steps reach in
two or three passes what L-BFGS-B's first steps (the gradient's length, then its secant
updates) reach in five to eight.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya.bandwidth._multistart import Memo

__all__ = ["AHEAD", "LEAD", "LOOSE_STEPS", "SETTLED", "TOLERANCES", "gauss_newton", "lbfgsb"]


#: L-BFGS-B's tolerances (the score scaled to order one): ``"tight"`` stops when a step gains
#: less than 1e-10 or the projected gradient is below 1e-6, or (:data:`SETTLED`) when a step
#: moves every ``log h`` by less than 5e-3 and gains less than a relative 3e-7: the bandwidths
#: are then within about a relative 5e-3 of the minimum, and the score within about 3e-7 of
#: its least (L-BFGS-B's gains shrink tenfold or more a step there); ``"loose"`` only finds
#: the basin a start leads to (three steps on a smooth criterion)
TOLERANCES = {
    "tight": {"ftol": 1e-10, "gtol": 1e-6, "maxiter": 200},
    "loose": {"ftol": 1e-4, "gtol": 1e-3, "maxiter": 3},
}
#: the tight polish's last step: at most this in every ``log h``, and a relative gain below
#: the second number
SETTLED = (5e-3, 3e-7)
#: the tight polish also stops at a point whose Gauss-Newton step (where the memo holds the
#: matrix) is below the first number in every ``log h`` and predicts a relative gain below the
#: second: Gauss-Newton leaves out the residuals' curvature and can predict a few times too
#: little, hence a tenth of :data:`SETTLED`'s bounds
AHEAD = (5e-4, 3e-8)


class _Settled:
    """L-BFGS-B's callback that stops the tight polish at a step that settles it (:data:`SETTLED`),
    or, with ``predict(x) -> (step, gain) | None``, at a point whose predicted step would."""

    def __init__(self, unit: NDArray[np.float64] | float = 1.0,
                 predict: Callable[[NDArray[np.float64]], tuple[float, float] | None] | None = None) -> None:
        self.last: tuple[NDArray[np.float64], float] | None = None
        self.fired = self.predicted = False
        self.unit = unit  # L-BFGS-B's variable is ``unit * log h``
        self.predict = predict

    def __call__(self, intermediate_result: Any) -> None:
        u = np.array(intermediate_result.x, dtype=np.float64)
        x, fun = u / self.unit, float(intermediate_result.fun)
        last, self.last = self.last, (x, fun)
        ahead = None if self.predict is None else self.predict(u)
        if ahead is not None and ahead[0] < AHEAD[0] and ahead[1] < AHEAD[1] * abs(fun):
            self.fired = self.predicted = True
            raise StopIteration
        if last is None:
            return
        step, gain = float(np.max(np.abs(x - last[0]), initial=0.0)), last[1] - fun
        if step < SETTLED[0] and gain < SETTLED[1] * abs(fun):
            self.fired = True
            raise StopIteration


def _start(
    h0: NDArray[np.float64], upper: NDArray[np.float64], lo: NDArray[np.float64], hi: NDArray[np.float64]
) -> tuple[NDArray[np.bool_], NDArray[np.float64], NDArray[np.float64],
           Callable[[NDArray[np.float64]], NDArray[np.float64]]]:
    """A polish's start from ``h0``: ``(free, v0, start, at)``, with ``free`` the columns below their
    upper bound ``upper`` (the others are held), ``v0`` their ``log h`` clipped to ``[lo, hi]``,
    ``start`` the bandwidth there and ``at(v)`` the bandwidth at the free columns' ``log h``
    ``v``: the start exactly as given where ``v`` is ``v0`` (``exp(log h)`` may differ from
    ``h`` in its last bit), so that a start scored before costs no pass.

    Examples
    --------
    >>> import numpy as np
    >>> free, v0, start, at = _start(np.array([0.3, 1e4]), np.array([1e4, 1e4]),
    ...                              np.log([0.01, 0.01]), np.log([10.0, 10.0]))
    >>> free.tolist(), at(v0) is start, bool(np.isclose(at(v0 + np.log(2.0))[0], 0.6)), float(at(v0)[1])
    ([True, False], True, True, 10000.0)
    """
    h0 = np.asarray(h0, dtype=np.float64)
    free = h0 < upper
    v0 = np.clip(np.log(h0[free]), lo[free], hi[free])
    start = h0.copy()
    start[free] = np.where(v0 == np.log(h0[free]), h0[free], np.exp(v0))

    def at(v: NDArray[np.float64]) -> NDArray[np.float64]:
        if np.array_equal(v, v0):
            return start
        h = h0.copy()
        h[free] = np.exp(v)
        return h

    return free, v0, start, at


def lbfgsb(
    memo: Memo, scale: float, lower: NDArray[np.float64], cap: NDArray[np.float64], upper: NDArray[np.float64]
) -> Any:
    """L-BFGS-B on ``log h`` within ``[lower, cap]``, on the criterion ``memo`` divided by
    ``scale``: with the analytic gradient where ``memo`` has it, finite differences otherwise.
    Returns ``run(h0, tolerance="tight") -> (h, score, scipy's result)``; the columns of ``h0``
    on their upper bound ``upper`` (smoothed out) are held there, the others start clipped to
    ``[lower, cap]``. Where the memo holds the start's Gauss-Newton matrix (a tight run),
    L-BFGS-B runs on ``log h`` scaled by the square root of its diagonal, and also stops at a
    point whose Gauss-Newton step is settled (:data:`AHEAD`)."""
    from scipy.optimize import minimize

    lo, hi = np.log(lower), np.log(cap)

    def run(h0: NDArray[np.float64], tolerance: str = "tight") -> tuple[NDArray[np.float64], float, Any]:
        free, v0, start, at = _start(h0, upper, lo, hi)

        # L-BFGS-B's first step is the gradient itself: on ``u = D log h``, with ``D^2`` the
        # Gauss-Newton matrix's diagonal at the start where the memo has it, that step is a
        # diagonal Gauss-Newton step in ``log h``
        curv = memo.curvatures.get(start.tobytes()) if tolerance == "tight" else None
        unit = np.ones(v0.size)
        if curv is not None:
            diag = np.diag(curv)[free] / scale
            if diag.size and np.isfinite(diag).all() and diag.max() > 0:
                unit = np.sqrt(np.maximum(diag, 1e-6 * diag.max()))
        u0 = v0 * unit

        if memo.value_grad is not None:

            def fun(u: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
                f, g = memo.with_gradient(at(v0 if np.array_equal(u, u0) else u / unit))
                return f / scale, g[free] / scale / unit

            jac: Any = True
        else:

            def fun(v: NDArray[np.float64]) -> float:  # type: ignore[misc]
                return memo(at(v)) / scale

            jac = None
        if not free.any():
            from scipy.optimize import OptimizeResult

            done = OptimizeResult(x=v0, success=True, message="CONVERGENCE: NO FREE COLUMN")
            return start, memo(start), done
        # the criterion is inf where some window is empty (compact kernels, or AICc past its
        # pole): L-BFGS-B's finite differences there are inf - inf, which it steps back from
        def ahead(u: NDArray[np.float64]) -> tuple[float, float] | None:
            """The Gauss-Newton step at ``u`` (in log h) and the gain its model predicts,
            where the memo holds the matrix and no column is on a bound."""
            h = at(v0 if np.array_equal(u, u0) else u / unit)
            key = h.tobytes()
            if key not in memo.curvatures or key not in memo.grads:
                return None
            v = np.log(h[free])
            if ((v <= lo[free]) | (v >= hi[free])).any():
                return None
            g, H = memo.grads[key][free] / scale, memo.curvatures[key][np.ix_(free, free)] / scale
            try:
                step = np.linalg.solve(H, -g)
            except np.linalg.LinAlgError:
                return None
            gain = -float(g @ step + 0.5 * step @ H @ step)
            return (float(np.max(np.abs(step))), gain) if np.isfinite(step).all() else None

        settled = _Settled(unit, ahead) if tolerance == "tight" else None
        with np.errstate(invalid="ignore"):
            res = minimize(fun, u0, jac=jac, method="L-BFGS-B",
                           bounds=list(zip(lo[free] * unit, hi[free] * unit)),
                           options=TOLERANCES[tolerance], callback=settled)
        if settled is not None and settled.fired:
            res.success, res.message = True, "CONVERGENCE: A STEP BELOW 5E-3 IN LOG H GAINED BELOW 3E-7"
            if settled.predicted:
                res.message = "CONVERGENCE: THE GAUSS-NEWTON STEP LEFT IS BELOW 5E-4 IN LOG H AND 3E-8"
        x = np.asarray(res.x, dtype=np.float64)
        h = at(v0 if np.array_equal(x, u0) else x / unit)
        return h, memo(h), res

    return run


#: Levenberg-Marquardt's damping at the start, its least, and its factors up (a step that scores
#: higher) and down (one that scores lower); the most steps rejected in a row; the longest step
#: in any ``log h`` (a feature with little effect has a small Gauss-Newton diagonal)
_DAMP = (1e-3, 1e-9, 8.0, 3.0)
_REJECTS = 8
_LONGEST = 2.0
#: accepted steps of a loose Levenberg-Marquardt run, and the most passes of a tight one
LOOSE_STEPS = 2
#: a ``"lead"`` run (ahead of a tight L-BFGS-B) takes the steps longer than this in some
#: ``log h``, and stops (no pass) at the first that is not: its long steps cross a flat profile
#: (a feature of no use on its way to being smoothed out) in a pass or two, where L-BFGS-B's
#: first steps, the gradient's length, crawl; near a minimum L-BFGS-B converges faster
LEAD = 0.25
_MOST = 200


def gauss_newton(
    memo: Memo, scale: float, lower: NDArray[np.float64], cap: NDArray[np.float64], upper: NDArray[np.float64]
) -> Any:
    """Levenberg-Marquardt on ``log h`` within ``[lower, cap]``, on the criterion ``memo``
    divided by ``scale``, with the Gauss-Newton matrix of CV (a sum of squared leave-one-out
    residuals) that ``memo``'s gradient pass gives (:attr:`Memo.curvatures`): each step solves
    ``(H + lam diag H) s = -g`` on the columns not held at a bound by their gradient, and is
    kept only where it scores lower (else ``lam`` grows and the step is tried again shorter).
    Returns ``run(h0, tolerance="tight")`` as :func:`lbfgsb` does: ``"loose"`` stops after
    :data:`LOOSE_STEPS` steps that scored lower, ``"lead"`` before a step shorter than
    :data:`LEAD` in every ``log h``, each also where ``"tight"`` stops: where a step settles it
    (:data:`SETTLED`), gains less than 1e-10 (relative), or the gradient is below 1e-6."""
    from scipy.optimize import OptimizeResult

    lo, hi = np.log(lower), np.log(cap)

    def run(h0: NDArray[np.float64], tolerance: str = "tight") -> tuple[NDArray[np.float64], float, Any]:
        free, v0, _, at = _start(h0, upper, lo, hi)
        a, b = lo[free], hi[free]

        def score(v: NDArray[np.float64]) -> tuple[float, NDArray[np.float64], NDArray[np.float64] | None]:
            h = at(v)
            value, grad = memo.with_gradient(h)
            curv = memo.curvatures.get(h.tobytes())
            sub = None if curv is None else curv[np.ix_(free, free)] / scale
            return value / scale, grad[free] / scale, sub

        v, steps, message = v0, 0, "NO FREE COLUMN"
        if free.any():
            f, g, H = score(v)
            damp, rejects, passes = _DAMP[0], 0, 1
            message = "NOT CONVERGED"
            while math.isfinite(f) and passes < _MOST:
                # a column at a bound whose gradient points out of the box is held there
                move = ~(((v <= a) & (g > 0)) | ((v >= b) & (g < 0)))
                if not move.any() or np.max(np.abs(g[move])) < 1e-6:
                    message = "CONVERGENCE: GRADIENT BELOW 1E-6"
                    break
                if H is None or not np.isfinite(H).all():
                    H = np.eye(v.size)
                M = H[np.ix_(move, move)]
                diag = np.maximum(np.diag(M), 1e-12 * max(float(np.max(np.diag(M))), 1e-300))
                try:
                    step = np.linalg.solve(M + np.diag(damp * diag + 1e-300), -g[move])
                except np.linalg.LinAlgError:
                    step = -g[move] / diag
                longest = float(np.max(np.abs(step)))
                if tolerance == "lead" and longest < LEAD:
                    message = "STOP: THE NEXT STEP IS LOCAL"
                    break
                if longest > _LONGEST:
                    step *= _LONGEST / longest
                trial = v.copy()
                trial[move] = np.clip(v[move] + step, a[move], b[move])
                if np.array_equal(trial, v):
                    message = "CONVERGENCE: STEP AT THE BOUNDS"
                    break
                f1, g1, H1 = score(trial)
                passes += 1
                if not f1 < f:
                    rejects += 1
                    damp *= _DAMP[2]
                    if rejects >= _REJECTS:
                        message = "CONVERGENCE: NO STEP SCORES LOWER"
                        break
                    continue
                moved, gain = float(np.max(np.abs(trial - v))), f - f1
                v, f, g, H = trial, f1, g1, H1
                damp, rejects, steps = max(damp / _DAMP[3], _DAMP[1]), 0, steps + 1
                if tolerance == "loose" and steps >= LOOSE_STEPS:
                    message = "STOP: LOOSE STEPS DONE"
                    break

                if tolerance != "loose" and moved < SETTLED[0] and gain < SETTLED[1] * abs(f):
                    message = "CONVERGENCE: A STEP BELOW 5E-3 IN LOG H GAINED BELOW 3E-7"
                    break
                if tolerance != "loose" and gain <= 1e-10 * max(abs(f), 1.0):
                    message = "CONVERGENCE: REL_REDUCTION_OF_F <= 1E-10"
                    break
        h = at(v)
        done = OptimizeResult(x=v, success=message.startswith(("CONVERGENCE", "STOP")),
                              message=message, nit=steps)
        return h, memo(h), done

    return run
