"""Matplotlib figures that make attention visible: kernels, fits, attention, CV curves, training, densities.

Each function draws on the Axes it is given (``ax=None`` makes a new figure), returns the
Axes and never calls ``show``. matplotlib is imported inside the functions (the ``plot``
extra), so ``import nadaraya`` does not load it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya._support.files import atomic_write
from nadaraya.plot._conditional import conditional_density
from nadaraya.plot._density import density
from nadaraya.plot._metric import metric

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from nadaraya.bandwidth import BandwidthSelection

__all__ = ["attention", "bandwidth_curve", "bandwidth_selection", "conditional_density", "criterion_label",
           "density", "fit", "kernel_grid", "kernels", "metric", "savefig", "training"]

#: The kernels of the textbook chapter (its ``epanechikov`` is our ``triangular``).
TEXTBOOK_KERNELS: tuple[str, ...] = ("gaussian", "boxcar", "constant", "triangular")
#: The y label of a bandwidth criterion, by ``BandwidthSelection.method``.
CRITERIA: dict[str, str] = {"cv": "leave-one-out CV score (MSE)", "aicc": "AICc (corrected AIC)"}


def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=(5, 3.5), layout="constrained")
    return new


def _panels(fig: Figure | None, k: int, ncols: int, size: tuple[float, float], sharex: bool) -> Any:
    """``k`` panels (shared y) in rows of ``ncols`` on ``fig`` (new when None); unused panels hidden."""
    if isinstance(ncols, bool) or not isinstance(ncols, int) or ncols < 1:
        raise ValueError(f"ncols must be a positive int; got {ncols!r}")
    cols = min(ncols, k)
    rows = -(-k // cols)
    if fig is None:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(size[0] * cols, size[1] * rows + 0.5), layout="constrained")
    grid = fig.subplots(rows, cols, sharex=sharex, sharey=True, squeeze=False)
    for ax in grid.flat[k:]:
        ax.remove()
    return fig, grid


def criterion_label(method: str) -> str:
    """The axis label of a bandwidth criterion: ``"cv"`` or ``"aicc"``.

    Examples
    --------
    >>> from nadaraya import plot
    >>> plot.criterion_label("aicc")
    'AICc (corrected AIC)'
    """
    if method not in CRITERIA:
        raise ValueError(f"method={method!r} is not known; choose one of {', '.join(map(repr, CRITERIA))}")
    return CRITERIA[method]


def _one_feature(name: str, a: ArrayLike) -> np.ndarray:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one feature, shape (n,) or (n, 1); got shape {arr.shape}")
    return arr


def kernels(
    names: Sequence[str] | str = TEXTBOOK_KERNELS, *, ax: Axes | None = None, extent: float = 2.5
) -> Axes:
    """Kernel profiles ``K(u) / K(0)`` against the scaled distance ``u = (q - k) / h``.

    Dividing by ``K(0)`` puts every peak at 1 (the constant cancels in the attention weights,
    so this is the shape that matters). Pass one name per Axes to draw them side by side.

    Parameters
    ----------
    names : str or sequence of str, default the textbook's four kernels
        Names from :mod:`nadaraya.kernels`.
    ax : matplotlib Axes, optional
    extent : float, default 2.5
        Draw ``u`` in ``[-extent, extent]``.

    Returns
    -------
    matplotlib Axes
        One line per kernel, labelled with its name.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from nadaraya import plot
    >>> ax = plot.kernels(["gaussian", "epanechnikov"])
    >>> [line.get_label() for line in ax.get_lines()]
    ['gaussian', 'epanechnikov']
    """
    from nadaraya.kernels import get

    ax = _axes(ax)
    u = np.linspace(-extent, extent, 501)
    for name in [names] if isinstance(names, str) else names:
        k = get(name)
        ax.plot(u, k(u) / float(k(0.0)), label=k.name, lw=2)
    ax.set_xlabel("u = (q - k) / h")
    ax.set_ylabel("K(u) / K(0)")
    ax.set_ylim(-0.05, 1.1)
    ax.grid(alpha=0.3)
    if isinstance(names, str):
        ax.set_title(get(names).name + (" (average pooling)" if get(names).name == "constant" else ""))
    else:
        ax.legend(frameon=False)
    return ax


def kernel_grid(
    names: Sequence[str] | None = None, *, fig: Figure | None = None, ncols: int = 4, extent: float = 2.5
) -> Figure:
    """Every kernel in its own panel, ``K(u) / K(0)`` on shared axes labelled once.

    Parameters
    ----------
    names : sequence of str, optional
        Default every kernel of the registry (:func:`nadaraya.kernels.names`).
    fig : matplotlib Figure, optional
    ncols : int, default 4
    extent : float, default 2.5

    Returns
    -------
    matplotlib Figure
        One Axes per kernel, titled with its name; the axis labels are the figure's.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from nadaraya import plot
    >>> fig = plot.kernel_grid(["gaussian", "boxcar", "cosine"], ncols=2)
    >>> [ax.get_title() for ax in fig.axes if ax.has_data()]
    ['gaussian', 'boxcar', 'cosine']
    """
    from nadaraya.kernels import names as all_names

    chosen = list(all_names() if names is None else names)
    if not chosen:
        raise ValueError("names is empty; give at least one kernel name")
    fig, grid = _panels(fig, len(chosen), ncols, (2.4, 1.9), sharex=True)
    for ax, name in zip(grid.flat, chosen):
        kernels(name, ax=ax, extent=extent)
        ax.set(xlabel="", ylabel="")
    fig.supxlabel("u = (q - k) / h")
    fig.supylabel("K(u) / K(0)")
    return fig


def fit(
    x_train: ArrayLike,
    y_train: ArrayLike,
    x: ArrayLike,
    prediction: ArrayLike,
    *,
    truth: ArrayLike | None = None, band: Any = None, interval: Any = None,
    ax: Axes | None = None, label: str = "prediction",
    legend: bool = True,
) -> Axes:
    """Training points, the truth when known, the prediction and an optional band, for one feature.

    Parameters
    ----------
    x_train, y_train : array-like of shape (n,)
        Drawn as points.
    x : array-like of shape (m,)
        Where the prediction (and truth) are given; drawn sorted by ``x``.
    prediction : array-like of shape (m,)
    truth : array-like of shape (m,), optional
        The noise-free function at ``x`` (dashed).
    band, interval : Band or (lower, upper), optional
        Shaded, a confidence band (a :class:`nadaraya.Band` from ``confidence_band``, or two
        arrays); hatched, a prediction interval (the pair from ``prediction_interval``).
    ax : matplotlib Axes, optional
    label : str, default "prediction"
    legend : bool, default True
        Draw the legend where it covers the fewest points; pass False to draw one legend for
        several panels (``fig.legend(*ax.get_legend_handles_labels())``).

    Returns
    -------
    matplotlib Axes
        The prediction is the line labelled ``label``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from nadaraya import plot, pool
    >>> x = np.linspace(0, 5, 20); y = np.sin(x)
    >>> ax = plot.fit(x, y, x, pool(x, x, y, bandwidth=0.5), truth=np.sin(x))
    >>> sorted(line.get_label() for line in ax.get_lines())
    ['prediction', 'truth']
    """
    ax = _axes(ax)
    xt, yt = _one_feature("x_train", x_train), _one_feature("y_train", y_train)
    xq, pred = _one_feature("x", x), _one_feature("prediction", prediction)
    if xq.shape != pred.shape:
        raise ValueError(f"x and prediction must have the same length; got {xq.size} and {pred.size}")
    order = np.argsort(xq, kind="stable")
    ax.scatter(xt, yt, s=16, color="0.55", alpha=0.8, label="training data", zorder=2)
    shades = {"band": dict(color="C0", alpha=0.2, lw=0),
              "prediction interval": dict(fc="none", ec="C2", hatch="///", lw=0.6)}
    for (name, style), pair in zip(shades.items(), (band, interval), strict=True):
        if pair is not None:  # a Band's last two fields are its bounds
            lo, hi = (_one_feature(name, b) for b in (pair[-2:] if len(pair) == 3 else pair))
            ax.fill_between(xq[order], lo[order], hi[order], label=name, **style)
    if truth is not None:
        ax.plot(xq[order], _one_feature("truth", truth)[order], "--", color="k", lw=1.5, label="truth")
    ax.plot(xq[order], pred[order], color="C3", lw=2, label=label, zorder=3)
    ax.set(xlabel="x", ylabel="y")
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(frameon=False, fontsize="small", loc="best")
    return ax


def attention(
    weights: ArrayLike,
    queries: ArrayLike | None = None,
    keys: ArrayLike | None = None,
    *,
    ax: Axes | None = None,
    cmap: str = "Reds",
    colorbar: bool = True,
    vmax: float | None = None,
) -> Axes:
    """Heatmap of attention weights: queries on rows, keys on columns, both sorted.

    With sorted queries and keys, attention that looks at nearby keys shows as a diagonal band
    that sharpens as the bandwidth shrinks. For several features the first one sorts; for one
    feature the ticks are round values of the inputs, placed where the sorted inputs cross
    them. Give several panels the same ``vmax`` (and one colour bar) to compare them.

    Parameters
    ----------
    weights : array-like of shape (m, n)
        E.g. from :func:`nadaraya.attention_weights`.
    queries : array-like of shape (m,) or (m, d), optional
        Rows are sorted by it (kept in order when omitted).
    keys : array-like of shape (n,) or (n, d), optional
        Columns are sorted by it.
    ax : matplotlib Axes, optional
    cmap : str, default "Reds"
    colorbar : bool, default True
    vmax : float, optional
        The weight at the top of the colour scale (which starts at 0); default the largest
        weight shown.

    Returns
    -------
    matplotlib Axes
        ``ax.images[0].get_array()`` is the sorted weight matrix.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from nadaraya import attention_weights, plot
    >>> q = np.array([2.0, 0.0, 1.0]); k = np.array([1.0, 0.0])
    >>> ax = plot.attention(attention_weights(q, k), q, k)
    >>> ax.images[0].get_array().shape
    (3, 2)
    """
    ax = _axes(ax)
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2:
        raise ValueError(f"weights must be a 2-D array (queries x keys); got shape {w.shape}")
    if vmax is not None and not (np.isfinite(vmax) and vmax > 0):
        raise ValueError(f"vmax must be a positive finite number; got {vmax!r}")
    rows, cols = np.arange(w.shape[0]), np.arange(w.shape[1])
    for name, pts, n in (("queries", queries, w.shape[0]), ("keys", keys, w.shape[1])):
        if pts is None:
            continue
        a = np.asarray(pts, dtype=np.float64)
        first = a if a.ndim == 1 else a.reshape(a.shape[0], -1)[:, 0]
        if first.shape[0] != n:
            raise ValueError(f"{name} has {first.shape[0]} rows but weights has {n} along that axis")
        order = np.argsort(first, kind="stable")
        if name == "queries":
            rows = order
        else:
            cols = order
        if a.ndim == 1 or a.shape[1:] == (1,):
            _value_ticks(ax.yaxis if name == "queries" else ax.xaxis, first[order])
    image = ax.imshow(w[np.ix_(rows, cols)], cmap=cmap, aspect="auto", interpolation="nearest",
                      vmin=0.0, vmax=vmax)
    ax.set_xlabel("keys (sorted)" if keys is not None else "keys")
    ax.set_ylabel("queries (sorted)" if queries is not None else "queries")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="attention weight")
    return ax


def _value_ticks(axis: Any, values: NDArray[np.float64]) -> None:
    """Ticks at round values of sorted ``values`` on an index axis (placed by interpolation)."""
    from matplotlib.ticker import FixedLocator, MaxNLocator

    if values.size < 2 or values[0] == values[-1]:
        return
    nice = MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(values[0], values[-1])
    nice = nice[(nice >= values[0]) & (nice <= values[-1])]
    unique, first = np.unique(values, return_index=True)
    axis.set_major_locator(FixedLocator(np.interp(nice, unique, first.astype(float))))
    axis.set_major_formatter(lambda _v, pos: f"{nice[pos]:g}" if pos is not None and pos < nice.size else "")


def bandwidth_curve(
    bandwidths: ArrayLike,
    scores: ArrayLike,
    *,
    chosen: float | None = None,
    ax: Axes | None = None,
    method: str = "cv",
    ylabel: str | None = None,
    label: str = "score",
    color: str = "C0",
    mark: str = "line",
) -> Axes:
    """A bandwidth search: score against bandwidth on a log axis, the chosen bandwidth marked.

    Call it once per search on the same Axes to compare searches (e.g. one per kernel, each
    with its ``label`` and ``color`` and ``mark="dot"``).

    Parameters
    ----------
    bandwidths : array-like of shape (k,)
        The grid (positive), in any order: the curve is drawn sorted by bandwidth.
    scores : array-like of shape (k,)
        The score at each bandwidth (lower is better); non-finite scores are skipped.
    chosen : float, optional
        The selected bandwidth; the grid's best score when omitted.
    ax : matplotlib Axes, optional
    method : {"cv", "aicc"}, default "cv"
        The criterion the scores are; it names the y axis (:func:`criterion_label`).
    ylabel : str, optional
        Overrides the y label.
    label : str, default "score"
        The curve's label in the legend.
    color : str, default "C0"
        The colour of the curve (and of the dot with ``mark="dot"``).
    mark : {"line", "dot"}, default "line"
        ``"line"``: the curve with a dot per bandwidth, ``chosen`` a dashed vertical line in
        the legend. ``"dot"``: the bare curve, ``chosen`` a dot in the curve's colour at the
        best score (not in the legend).

    Returns
    -------
    matplotlib Axes
        The first line is the curve; the next marks ``chosen``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from nadaraya import plot
    >>> ax = plot.bandwidth_curve([0.1, 0.3, 1.0], [2.0, 1.0, 3.0])
    >>> float(ax.get_lines()[1].get_xdata()[0])
    0.3
    >>> ax = plot.bandwidth_curve([1.0, 0.1, 0.3], [3.0, 2.0, 1.0], label="boxcar", mark="dot")
    >>> ax.get_lines()[0].get_xdata().tolist(), ax.get_lines()[1].get_ydata().tolist()
    ([0.1, 0.3, 1.0], [1.0])
    """
    if mark not in ("line", "dot"):
        raise ValueError(f"mark={mark!r} is not known; choose 'line' or 'dot'")
    ylabel = criterion_label(method) if ylabel is None else ylabel
    ax = _axes(ax)
    h = _one_feature("bandwidths", bandwidths)
    s = _one_feature("scores", scores)
    if h.shape != s.shape:
        raise ValueError(f"bandwidths and scores must have the same length; got {h.size} and {s.size}")
    if not (h > 0).all():
        raise ValueError(f"bandwidths must be positive; got {h[~(h > 0)][:3].tolist()}")
    ok = np.isfinite(s)
    if not ok.any():
        raise ValueError("scores has no finite value to plot")
    order = np.argsort(h)
    order = order[ok[order]]
    if chosen is None:
        chosen = float(h[ok][np.argmin(s[ok])])
    if mark == "line":
        ax.plot(h[order], s[order], "o-", color=color, ms=3, label=label)
        ax.axvline(chosen, color="C3", ls="--", label=f"chosen h = {chosen:.3g}")
    else:
        ax.plot(h[order], s[order], "-", color=color, label=label)
        ax.plot(chosen, s[ok].min(), "o", color=color)
    ax.set(xscale="log", xlabel="bandwidth h", ylabel=ylabel)
    ax.grid(alpha=0.3, which="both")
    ax.legend(frameon=False)
    return ax


def bandwidth_selection(
    selection: BandwidthSelection,
    *,
    feature_names: Sequence[str] | None = None,
    fig: Figure | None = None,
    ncols: int = 4,
) -> Figure:
    """The record of :func:`nadaraya.select_bandwidth`: one panel per bandwidth, the y label its criterion.

    A scalar search is one panel (:func:`bandwidth_curve`). A per-feature search draws one panel
    per feature: the criterion against that feature's bandwidth at every point evaluated. The
    coarse grid (``h = t * rule``) is a line; the per-feature steps, which move several
    bandwidths at once, are dots (a line through them is no slice of the criterion); the
    choice is a dashed line, and a smoothed-out feature says so in its title. When the worst
    score is over ten times the grid's median distance above the best, the y axis stops at four.

    Parameters
    ----------
    selection : BandwidthSelection
        From :func:`nadaraya.select_bandwidth` (or ``NadarayaWatson.bandwidth_selection_``).
    feature_names : sequence of str, optional
        One per feature; default ``x0, x1, ...``.
    fig : matplotlib Figure, optional
        Drawn into (a new figure when omitted).
    ncols : int, default 4

    Returns
    -------
    matplotlib Figure
        One Axes per panel.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> import nadaraya
    >>> from nadaraya import plot
    >>> rng = np.random.default_rng(0); X = rng.uniform(0, 1, (80, 2))
    >>> sel = nadaraya.select_bandwidth(X, np.sin(6 * X[:, 0]), per_feature=True)
    >>> fig = plot.bandwidth_selection(sel, feature_names=["a", "b"])
    >>> len(fig.axes), fig.axes[0].get_ylabel()
    (2, 'leave-one-out CV score (MSE)')
    """
    label = criterion_label(selection.method)
    scores = np.asarray(selection.search["scores"], dtype=np.float64)
    tried = np.asarray(selection.search["bandwidths"], dtype=np.float64).reshape(scores.size, -1)
    stages = np.asarray(selection.search.get("stages", np.full(scores.shape, "grid")))
    chosen = np.atleast_1d(np.asarray(selection.bandwidth, dtype=np.float64))
    d = chosen.size
    names = [f"x{j}" for j in range(d)] if feature_names is None else [str(n) for n in feature_names]
    if len(names) != d:
        raise ValueError(f"feature_names has {len(names)} names but the selection has {d} bandwidths")
    if not np.isfinite(scores).any():
        raise ValueError("the selection has no finite score to plot (a one-point search has no curve)")
    ok = np.isfinite(scores)
    on_grid = ok & (stages == "grid")
    lo, mid = float(scores[ok].min()), float(np.median(scores[on_grid if on_grid.any() else ok]))
    top = lo + 4 * (mid - lo)  # a criterion that explodes at tiny h would flatten the rest: cut it
    focus = (lo - 0.05 * (top - lo), top) if scores[ok].max() > lo + 10 * (mid - lo) > lo else None
    if not selection.per_feature:
        fig, grid = _panels(fig, 1, 1, (5.5, 3.1), sharex=False)
        bandwidth_curve(tried[:, 0], scores, chosen=float(chosen[0]), ax=grid[0, 0], method=selection.method,
                        label=f"{selection.kernel} kernel")
        grid[0, 0].set_ylim(focus)
        return fig
    fig, grid = _panels(fig, d, ncols, (3.4, 2.8), sharex=False)
    cols, steps = grid.shape[1], ok & ~on_grid
    for j, ax in enumerate(grid.flat[:d]):
        h = tried[:, min(j, tried.shape[1] - 1)]
        order = np.argsort(h[on_grid], kind="stable")
        ax.plot(h[on_grid][order], scores[on_grid][order], "o-", ms=3, color="C0", label="grid: h = t * rule")
        ax.plot(h[steps], scores[steps], "o", ms=4, color="C1", alpha=0.7, label="per-feature steps")
        ax.axvline(chosen[j], color="C3", ls="--", label="chosen")
        ax.grid(alpha=0.3, which="both")
        note = " (smoothed out)" if bool(np.atleast_1d(selection.smoothed_out)[j]) else ""
        ax.set(xscale="log", xlabel=f"h[{names[j]}]", title=f"{names[j]}: h = {chosen[j]:.3g}{note}",
               ylabel=label if j % cols == 0 else "", ylim=focus)
    fig.legend(*grid.flat[0].get_legend_handles_labels(), loc="outside lower center", ncols=3, frameon=False)
    fig.suptitle(f"per-feature {selection.method} search, {selection.kernel} kernel")
    return fig


def training(
    history: Sequence[float] | Mapping[str, Sequence[float]] | Any,
    *,
    ax: Axes | None = None,
    label: str = "training loss",
) -> Axes:
    """Loss per epoch of a learnable attention-pooling model.

    Parameters
    ----------
    history : sequence of float, mapping of name -> sequence, or an object with ``.loss``
        One loss per epoch. The dict that :func:`nadaraya.nn.fit` returns (it has a ``"loss"``
        key) draws its losses only: ``"loss"`` and any ``"..._loss"`` entry, never the
        ``"bandwidth"`` it also records. Any other mapping draws one line per entry (e.g.
        ``{"train": .., "validation": ..}``); objects are read through their ``loss`` (and
        ``val_loss``, when present) attributes.
    ax : matplotlib Axes, optional
    label : str, default "training loss"
        The label of a single sequence.

    Returns
    -------
    matplotlib Axes
        Epochs are numbered from 1; the y axis is logarithmic only when every loss is positive
        and they span more than a factor of 10 (a linear axis reads better over less).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from nadaraya import plot
    >>> ax = plot.training([3.0, 2.0, 1.5])
    >>> ax.get_lines()[0].get_xdata().tolist()
    [1, 2, 3]
    """
    ax = _axes(ax)
    if isinstance(history, Mapping) and "loss" in history:  # nadaraya.nn.fit's record
        series = {label: history["loss"]}
        series.update({str(k).replace("_", " "): v for k, v in history.items()
                       if k != "loss" and str(k).endswith("loss")})
    elif isinstance(history, Mapping):
        series = dict(history)
    elif hasattr(history, "loss"):
        series = {label: history.loss}
        val = getattr(history, "val_loss", None)
        if val is not None and len(val):
            series["validation loss"] = val
    else:
        series = {label: history}
    finite: list[np.ndarray] = []
    for name, values in series.items():
        v = _one_feature(f"history[{name!r}]", values)
        if v.size == 0:
            raise ValueError(f"history {name!r} is empty; nothing to plot")
        finite.append(v[np.isfinite(v)])
        ax.plot(np.arange(1, v.size + 1), v, lw=2, label=name)
    if (every := np.concatenate(finite)).size and (every > 0).all() and every.max() > 10 * every.min():
        ax.set_yscale("log")
    from matplotlib.ticker import MaxNLocator
    ax.set(xlabel="epoch", ylabel="loss")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole numbers
    ax.grid(alpha=0.3, which="both")
    ax.legend(frameon=False)
    return ax


def savefig(fig: Figure, path: str | os.PathLike[str], *, dpi: int = 110) -> Path:
    """Save a figure as PNG (or any format matplotlib knows by the extension), atomically.

    Parameters
    ----------
    fig : matplotlib Figure
    path : path-like
    dpi : int, default 110

    Returns
    -------
    Path

    Examples
    --------
    >>> import matplotlib, pathlib, tempfile
    >>> matplotlib.use("Agg")
    >>> from nadaraya import plot
    >>> ax = plot.training([2.0, 1.0])
    >>> p = plot.savefig(ax.figure, pathlib.Path(tempfile.mkdtemp()) / "loss.png")
    >>> p.read_bytes()[:4] == b"\\x89PNG"
    True
    """
    target = Path(path)
    fmt = target.suffix.lstrip(".").lower() or "png"
    with atomic_write(target, "wb") as f:
        fig.savefig(f, format=fmt, dpi=dpi)
    return target
