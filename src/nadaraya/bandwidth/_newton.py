"""Levenberg-Marquardt on the Gauss-Newton matrix of CV: the per-feature search's loose polishes.

CV is a weighted sum of squared leave-one-out residuals ``r_i = y_i - pred_i(h)``: its
Gauss-Newton matrix ``2 sum_i w_i J_i J_i^T`` (``J_i`` the gradient of ``pred_i`` along
``log h``) comes from the gradient pass's moments at no extra pass
(:meth:`nadaraya.bandwidth._objective._Objective.with_gradient`). It leaves out the residuals'
own curvature ``-2 sum_i w_i r_i grad^2 pred_i``, which counts near a minimum (there
Gauss-Newton converges only linearly) and little far from one, where its steps reach in three
passes what L-BFGS-B's first steps (the gradient's length, then its secant updates) reach in
five to eight.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya.bandwidth._multistart import SETTLED, Memo

__all__ = ["LEAD", "LOOSE_STEPS", "gauss_newton"]


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
        h0 = np.asarray(h0, dtype=np.float64)
        free = h0 < upper
        v0 = np.clip(np.log(h0[free]), lo[free], hi[free])
        start = h0.copy()
        start[free] = np.where(v0 == np.log(h0[free]), h0[free], np.exp(v0))
        a, b = lo[free], hi[free]

        def at(v: NDArray[np.float64]) -> NDArray[np.float64]:
            if np.array_equal(v, v0):  # the start exactly as given (see lbfgsb)
                return start
            h = h0.copy()
            h[free] = np.exp(v)
            return h

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
