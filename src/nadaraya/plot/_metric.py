"""The figure of a learned metric: the data on its two strongest directions beside two raw features."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["learned_map", "metric"]


def learned_map(model: Any, X: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The map ``A`` (k, d) of a fitted MLKR (or of the first step of a Pipeline that has
    ``components_``) and ``X`` as that step sees it (the earlier steps' transforms applied)."""
    X = np.asarray(X, dtype=np.float64)
    steps = getattr(model, "steps", None)
    if steps is None:
        steps = [("model", model)]
    for _, step in steps:
        A = getattr(step, "components_", None)
        if A is not None:
            return np.asarray(A, dtype=np.float64), X
        if step is None or step == "passthrough":
            continue
        if not hasattr(step, "transform"):
            break
        X = np.asarray(step.transform(X), dtype=np.float64)
    raise TypeError(f"model must be a fitted MLKR (an estimator with components_) or a Pipeline "
                    f"with one; got {type(model).__name__}")


def metric(
    model: Any,
    X: ArrayLike,
    y: ArrayLike,
    *,
    feature_names: Sequence[str] | None = None,
    fig: Figure | None = None,
    cmap: str = "viridis",
) -> Figure:
    """The data projected on a learned metric's two strongest directions, beside the raw first two features.

    With the learned map ``A = U S V^T`` (singular values ``s1 >= s2 >= ...``), the kernel
    ``exp(-|A (x - x')|^2)`` is that of the coordinates ``S V^T x``: the right panel draws
    those of the two largest ``s``, the directions along which the learned kernel is narrowest.
    The left panel draws the first two raw features. Both are coloured by ``y``. A map with one
    direction, or data with one feature, is drawn against ``y``.

    Parameters
    ----------
    model : MLKR or Pipeline
        A fitted :class:`nadaraya.nn.MLKR`, or a fitted Pipeline with one (the steps before it
        transform ``X`` first).
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    feature_names : sequence of str, optional
        Names of the raw features; default ``x0, x1, ...``.
    fig : matplotlib Figure, optional
        Drawn into (a new figure when omitted).
    cmap : str, default "viridis"

    Returns
    -------
    matplotlib Figure
        Two Axes (raw, learned) and a colour bar.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from nadaraya import plot
    >>> from nadaraya.nn import MLKR
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 4)); y = X[:, 2] - X[:, 3]
    >>> fig = plot.metric(MLKR(n_components=2, max_iter=5).fit(X, y), X, y)
    >>> [ax.get_xlabel() for ax in fig.axes[:2]]
    ['x0', 'learned direction 1']
    """
    A, Xm = learned_map(model, X)
    Xraw = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1 or len(y) != len(Xraw) or Xraw.ndim != 2:
        raise ValueError(f"X must be 2-D and y 1-D with one value per row of X; got X of shape "
                         f"{Xraw.shape} and y of shape {y.shape}")
    if Xm.shape[1] != A.shape[1]:
        raise ValueError(f"X has {Xm.shape[1]} features where the map takes {A.shape[1]}")
    names = list(feature_names) if feature_names is not None else [f"x{i}" for i in range(Xraw.shape[1])]
    if len(names) != Xraw.shape[1]:
        raise ValueError(f"feature_names must have {Xraw.shape[1]} names; got {len(names)}")
    _, s, vt = np.linalg.svd(A, full_matrices=False)
    Z = Xm @ (vt[:2].T * s[:2])
    if fig is None:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(9.5, 4), layout="constrained")
    raw_ax, learned_ax = fig.subplots(1, 2)
    panels = [(raw_ax, Xraw, names[:2], "raw features"),
              (learned_ax, Z, [f"learned direction {i + 1}" for i in range(2)], "learned metric")]
    points: Any = None
    for ax, coords, labels, title in panels:
        if coords.shape[1] >= 2:
            u, v, vlabel = coords[:, 0], coords[:, 1], labels[1]
        else:
            u, v, vlabel = coords[:, 0], y, "y"
        points = ax.scatter(u, v, c=y, cmap=cmap, s=12, linewidths=0)
        ax.set_xlabel(labels[0])
        ax.set_ylabel(vlabel)
        ax.set_title(title)
    learned_ax.set_title(f"learned metric (scales {', '.join(f'{v:.3g}' for v in s[:2])})")
    fig.colorbar(points, ax=[raw_ax, learned_ax], label="y")
    return fig
