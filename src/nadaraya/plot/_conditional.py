"""The conditional-density picture: a heatmap of f(y | x) with the conditional median and a quantile band."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from nadaraya.density._conditional import ConditionalDensity

__all__ = ["conditional_density"]


def _grid_size(grid: Any) -> tuple[int, int]:
    g = (grid, grid) if isinstance(grid, int) and not isinstance(grid, bool) else grid
    try:
        mx, my = (int(v) for v in g)
        ok = all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in g)
    except (TypeError, ValueError):
        ok = False
    if not ok or mx < 2 or my < 2:
        raise ValueError(f"grid must be an int >= 2 or a pair of them (x points, y points); got {grid!r}")
    return mx, my


def conditional_density(
    model: ConditionalDensity,
    *,
    ax: Axes | None = None,
    grid: int | tuple[int, int] = (120, 100),
    level: float = 0.9,
    points: bool = True,
    cmap: str = "viridis",
    xlim: tuple[float, float] | None = None,
) -> Axes:
    """A heatmap of the conditional density ``f(y | x)``, with the conditional median and the
    ``level`` quantile band over it, for a model of one continuous x and one continuous y.

    Each column of the heatmap is one density in ``y`` (it integrates to 1), so the picture
    shows how the whole distribution of ``y`` moves with ``x``, not only its mean: where the
    band widens, ``y`` spreads more.

    Parameters
    ----------
    model : ConditionalDensity
        Fitted on one continuous x column and one continuous y column.
    ax : matplotlib Axes, optional
    grid : int or (int, int), default (120, 100)
        Points along x and along y.
    level : float, default 0.9
        The band between the conditional quantiles ``(1 - level)/2`` and ``(1 + level)/2``.
    points : bool, default True
        Draw the training data.
    cmap : str, default "viridis"
    xlim : (float, float), optional
        The range of x drawn (default: the training data's); the colour scale is that of the
        densities inside it.

    Returns
    -------
    matplotlib Axes
        The median is the line labelled ``"conditional median"``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from nadaraya import ConditionalDensity, plot
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 1, 100); y = x + (0.1 + 0.3 * x) * rng.standard_normal(100)
    >>> ax = plot.conditional_density(ConditionalDensity(bandwidth=[0.1, 0.1]).fit(x, y), grid=20)
    >>> [line.get_label() for line in ax.get_lines()]
    ['90% quantile band', '_nolegend_', 'conditional median']
    """
    s = getattr(model, "sample_", None)
    if s is None:
        raise ValueError("conditional_density needs a fitted ConditionalDensity; call fit(X, y) first")
    if s.var_types != "c" or s.dep_types != "c":
        raise ValueError(
            "conditional_density draws one continuous x against one continuous y; the model has "
            f"var_types={s.var_types!r} and dep_types={s.dep_types!r}"
        )
    lev = float(level)
    if not 0.0 < lev < 1.0:
        raise ValueError(f"level must lie in (0, 1); got {level!r}")
    mx, my = _grid_size(grid)
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    x, y = s.x[:, 0], s.y[:, 0]
    x0, x1 = (float(x.min()), float(x.max())) if xlim is None else (float(xlim[0]), float(xlim[1]))
    if not (np.isfinite([x0, x1]).all() and x0 < x1):
        raise ValueError(f"xlim must be two finite numbers, the first below the second; got {xlim!r}")
    gx = np.linspace(x0, x1, mx)
    pad = 0.05 * (np.ptp(y) or 1.0) + float(s.hy[0])
    gy = np.linspace(y.min() - pad, y.max() + pad, my)
    dens = model.pdf(np.repeat(gx, my), np.tile(gy, mx)).reshape(mx, my).T
    mesh = ax.pcolormesh(gx, gy, dens, shading="nearest", cmap=cmap, rasterized=True)
    ax.figure.colorbar(mesh, ax=ax, label="f(y | x)")
    q = model.quantile(gx, np.array([(1.0 - lev) / 2.0, 0.5, (1.0 + lev) / 2.0]))
    ax.fill_between(gx, q[:, 0], q[:, 2], color="white", alpha=0.18, lw=0)
    ax.plot(gx, q[:, 0], color="white", lw=1, ls="--", label=f"{lev:.0%} quantile band")
    ax.plot(gx, q[:, 2], color="white", lw=1, ls="--", label="_nolegend_")
    if points:
        keep = (x >= x0) & (x <= x1)
        x, y = x[keep], y[keep]
        ax.scatter(x, y, s=6, color="white", edgecolors="none", alpha=0.6, label="data")
    ax.plot(gx, q[:, 1], color="C3", lw=2, label="conditional median")
    ax.set(xlabel="x", ylabel="y", xlim=(gx[0], gx[-1]), ylim=(gy[0], gy[-1]))
    ax.legend(frameon=False, fontsize="small", loc="upper left", labelcolor="white")
    return ax
