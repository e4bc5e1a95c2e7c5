"""Matplotlib figures that make attention visible: kernels, fits, attention heatmaps, CV curves, training.

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
from numpy.typing import ArrayLike

from ._files import atomic_write

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["attention", "bandwidth_curve", "fit", "kernels", "savefig", "training"]

#: The kernels of the textbook chapter (its ``epanechikov`` is our ``triangular``).
TEXTBOOK_KERNELS: tuple[str, ...] = ("gaussian", "boxcar", "constant", "triangular")


def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=(5, 3.5), layout="constrained")
    return new


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
    from .kernels import get

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
        ax.set_title(get(names).name)
    else:
        ax.legend(frameon=False)
    return ax


def fit(
    x_train: ArrayLike,
    y_train: ArrayLike,
    x: ArrayLike,
    prediction: ArrayLike,
    *,
    truth: ArrayLike | None = None,
    band: tuple[ArrayLike, ArrayLike] | None = None,
    ax: Axes | None = None,
    label: str = "prediction",
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
    band : (lower, upper), optional
        Shaded between, e.g. a pointwise interval.
    ax : matplotlib Axes, optional
    label : str, default "prediction"

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
    if band is not None:
        lo, hi = (_one_feature("band", b) for b in band)
        ax.fill_between(xq[order], lo[order], hi[order], color="C0", alpha=0.2, lw=0, label="band")
    if truth is not None:
        ax.plot(xq[order], _one_feature("truth", truth)[order], "--", color="k", lw=1.5, label="truth")
    ax.plot(xq[order], pred[order], color="C3", lw=2, label=label, zorder=3)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize="small")
    return ax


def attention(
    weights: ArrayLike,
    queries: ArrayLike | None = None,
    keys: ArrayLike | None = None,
    *,
    ax: Axes | None = None,
    cmap: str = "Reds",
    colorbar: bool = True,
) -> Axes:
    """Heatmap of attention weights: queries on rows, keys on columns, both sorted.

    With sorted queries and keys, attention that looks at nearby keys shows as a diagonal band
    that sharpens as the bandwidth shrinks. For several features the first one sorts.

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
    image = ax.imshow(w[np.ix_(rows, cols)], cmap=cmap, aspect="auto", interpolation="nearest", vmin=0.0)
    ax.set_xlabel("keys (sorted)" if keys is not None else "keys")
    ax.set_ylabel("queries (sorted)" if queries is not None else "queries")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="attention weight")
    return ax


def bandwidth_curve(
    bandwidths: ArrayLike,
    scores: ArrayLike,
    *,
    chosen: float | None = None,
    ax: Axes | None = None,
    ylabel: str = "leave-one-out CV score (MSE)",
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
    ylabel : str
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
    ax.set_xscale("log")
    ax.set_xlabel("bandwidth h")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both")
    ax.legend(frameon=False)
    return ax


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
        One loss per epoch; a mapping draws one line per entry (e.g. ``{"train": ..,
        "validation": ..}``); objects such as the history from ``nadaraya.nn.fit`` are read
        through their ``loss`` (and ``val_loss``, when present) attributes.
    ax : matplotlib Axes, optional
    label : str, default "training loss"
        The label of a single sequence.

    Returns
    -------
    matplotlib Axes
        Epochs are numbered from 1; the y axis is logarithmic when every loss is positive.

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
    if isinstance(history, Mapping):
        series = dict(history)
    elif hasattr(history, "loss"):
        series = {label: history.loss}
        if getattr(history, "val_loss", None) is not None and len(history.val_loss):
            series["validation loss"] = history.val_loss
    else:
        series = {label: history}
    positive = True
    for name, values in series.items():
        v = _one_feature(f"history[{name!r}]", values)
        if v.size == 0:
            raise ValueError(f"history {name!r} is empty; nothing to plot")
        positive &= bool((v[np.isfinite(v)] > 0).all())
        ax.plot(np.arange(1, v.size + 1), v, lw=2, label=name)
    if positive:
        ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
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
