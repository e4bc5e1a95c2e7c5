"""The density pictures that :mod:`nadaraya.plot` shows: a 1-D curve with its data rug, 2-D contours."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["density"]


def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=(5, 3.5), layout="constrained")
    return new


def _span(x: NDArray[np.float64], h: float, pad: float = 3.0) -> tuple[float, float]:
    return float(x.min() - pad * h), float(x.max() + pad * h)


def density(
    model: Any,
    *,
    grid: int = 256,
    limits: ArrayLike | None = None,
    rug: bool = True,
    levels: int = 8,
    ax: Axes | None = None,
    label: str = "density",
) -> Axes:
    """A fitted :class:`nadaraya.KernelDensity` drawn: one continuous column as a curve over a
    rug of the data; two as filled contours over the data points.

    Parameters
    ----------
    model : KernelDensity
        Fitted, with one or two columns, all continuous.
    grid : int, default 256
        Points per axis where the density is evaluated.
    limits : array-like, optional
        ``(lo, hi)`` (1-D) or ``((x0, x1), (y0, y1))`` (2-D); default: the data's range plus
        three bandwidths on each side.
    rug : bool, default True
        Mark the data (a rug in 1-D, points in 2-D).
    levels : int, default 8
        Contour levels (2-D).
    ax : matplotlib Axes, optional
    label : str, default "density"
        The curve's label (1-D).

    Returns
    -------
    matplotlib Axes
        In 1-D the curve is the line labelled ``label``; in 2-D the contours are ``ax.collections``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from nadaraya import KernelDensity, plot
    >>> x = np.random.default_rng(0).normal(size=(100, 1))
    >>> ax = plot.density(KernelDensity(bandwidth=0.4).fit(x))
    >>> [line.get_label() for line in ax.get_lines()][:1]
    ['density']
    """
    if not hasattr(model, "X_fit_"):
        raise ValueError("model must be a fitted KernelDensity (call fit(X) first)")
    X = np.asarray(model.X_fit_, dtype=np.float64)
    d = X.shape[1]
    if d > 2 or set(model.var_types_) != {"c"}:
        raise ValueError(f"plot.density draws one or two continuous columns; the model has "
                         f"var_types={model.var_types_!r}")
    if isinstance(grid, bool) or not isinstance(grid, int) or grid < 2:
        raise ValueError(f"grid must be an int of at least 2; got {grid!r}")
    h = np.asarray(model.bandwidth_, dtype=np.float64)
    ax = _axes(ax)
    if d == 1:
        lo, hi = _span(X[:, 0], h[0]) if limits is None else (float(v) for v in np.ravel(limits)[:2])
        g = np.linspace(lo, hi, grid)
        ax.plot(g, model.pdf(g[:, None]), color="C0", lw=2, label=label)
        if rug:
            ax.plot(X[:, 0], np.zeros(X.shape[0]), "|", color="0.3", ms=10, alpha=0.6, label="data")
        ax.set(xlabel="x", ylabel="density")
        ax.set_ylim(bottom=0)
    else:
        lims = np.asarray(limits, dtype=np.float64).reshape(2, 2) if limits is not None else np.array(
            [_span(X[:, j], h[j]) for j in range(2)])
        gx, gy = (np.linspace(float(lims[j, 0]), float(lims[j, 1]), grid) for j in (0, 1))
        mx, my = np.meshgrid(gx, gy, indexing="xy")
        f = model.pdf(np.column_stack([mx.ravel(), my.ravel()])).reshape(mx.shape)
        filled = ax.contourf(mx, my, f, levels=levels, cmap="viridis")
        ax.figure.colorbar(filled, ax=ax, label="density")
        if rug:
            ax.scatter(X[:, 0], X[:, 1], s=6, color="white", edgecolor="0.2", lw=0.3, alpha=0.7)
        ax.set(xlabel="x0", ylabel="x1")
    ax.grid(alpha=0.3)
    return ax
