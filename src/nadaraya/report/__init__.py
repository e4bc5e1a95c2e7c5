"""The textbook study behind ``nadaraya demo``: bandwidth search, models, figures and the offline HTML report.

:func:`textbook_study` replays the chapter on attention pooling by similarity (average pooling,
each kernel at several bandwidths and at the cross-validated one, local linear and local quadratic
fits beside Nadaraya-Watson, and the learnable models when PyTorch is installed);
:func:`write_figures` draws it as PNG files; :func:`write_html` writes
one self-contained ``report.html`` (inline SVG, canvas and JavaScript; nothing is fetched) with
a bandwidth slider and a kernel selector switching among precomputed states.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya._core.attention import attention_weights
from nadaraya.datasets import Split, textbook
from nadaraya.kernels import names as kernel_names
from nadaraya.pooling import pool
from nadaraya.report._html import _label, render_html, write_html
from nadaraya.report._local import LOCAL_GRID, figure_local
from nadaraya.report._study import DEMO_KERNELS, LOCAL_NAMES, LocalCurve, Row, Search, Spans, Study

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from nadaraya.bandwidth import BandwidthSelection

__all__ = [
    "DEMO_BANDWIDTHS",
    "DEMO_DEGREES",
    "DEMO_KERNELS",
    "LOCAL_NAMES",
    "LocalCurve",
    "Row",
    "Search",
    "Spans",
    "Study",
    "bandwidth_search",
    "figure_attention",
    "figure_bandwidth",
    "figure_fit",
    "figure_kernels",
    "figure_local",
    "figure_training",
    "render_html",
    "textbook_study",
    "write_figures",
    "write_html",
]

#: The textbook's bandwidths.
DEMO_BANDWIDTHS: tuple[float, ...] = (0.1, 0.2, 0.5, 1.0)
#: Local polynomial degrees fitted beside Nadaraya-Watson (degree 0), Gaussian, bandwidth by CV.
DEMO_DEGREES: tuple[int, ...] = (1, 2)
#: Epochs of each learnable model of the demo.
LEARN_EPOCHS = 60
#: ``callback(done, total, description)`` after each unit of work.
ProgressCallback = Callable[[int, int, str], None]


def _record_from(selection: BandwidthSelection) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The (bandwidths, scores) that ``selection`` evaluated; empty when there are fewer than two."""
    grid = np.asarray(selection.search["bandwidths"], dtype=np.float64)
    scores = np.asarray(selection.search["scores"], dtype=np.float64)
    if scores.size < 2:
        return np.empty((0, grid.shape[-1] if grid.ndim == 2 else 1)), np.empty(0)
    return grid, scores


def bandwidth_search(
    X: ArrayLike, y: ArrayLike, *, kernel: str = "gaussian", method: str = "cv", per_feature: bool = False
) -> Search:
    """Choose a bandwidth by :func:`nadaraya.bandwidth.select_bandwidth` and keep the record of its search.

    Parameters
    ----------
    X : array-like of shape (n, d) or (n,)
    y : array-like of shape (n,)
    kernel : str, default "gaussian"
    method : {"cv", "aicc"}, default "cv"
    per_feature : bool, default False
        One bandwidth per feature.

    Returns
    -------
    Search

    Raises
    ------
    ValueError
        As :func:`nadaraya.bandwidth.select_bandwidth` does (unknown method or kernel, too few
        points, a feature with zero spread, ...).

    Examples
    --------
    >>> from nadaraya.datasets import textbook
    >>> s = textbook()
    >>> search = bandwidth_search(s.x_train, s.y_train)
    >>> bool(0.05 < search.bandwidth[0] < 1.0), search.method
    (True, 'cv')
    >>> repr(search).startswith("Search(method='cv', bandwidth=[0.5")
    True
    """
    from nadaraya.bandwidth import select_bandwidth

    selection = select_bandwidth(X, y, method=method, kernel=kernel, per_feature=per_feature)
    grid, scores = _record_from(selection)
    return Search(grid, scores, selection.bandwidth, method)


def _train_learnable(
    split: Split, progress: Callable[[str], None]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Train the textbook's learnable-w and additive models when torch and nadaraya.nn exist."""
    try:
        import torch

        from nadaraya import nn
    except ImportError as exc:
        return {}, [f"learnable models skipped: {exc}"]
    out: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    X = torch.as_tensor(split.x_train[:, None])
    Y = torch.as_tensor(split.y_train[:, None])
    Q = torch.as_tensor(split.x_val[:, None])
    specs: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [  # equal epochs: one axis for both
        ("learnable w (Gaussian)", "KernelPooling", {}, {"epochs": LEARN_EPOCHS, "lr": 0.5}),
        ("additive attention", "AdditiveAttentionPooling", {"in_features": 1, "hidden": 16},
         {"epochs": LEARN_EPOCHS, "lr": 0.05, "optimizer": "adam"}),
    ]
    for name, cls_name, kw, fit_kw in specs:
        progress(f"training {name}")
        torch.manual_seed(0)  # the modules draw their initial parameters from torch's generator
        module = getattr(nn, cls_name)(**kw).double()
        history = nn.fit(module, X, Y, seed=0, **fit_kw)
        with torch.no_grad():
            pred = module(Q, X, Y).numpy().reshape(-1)
        hs = history.get("bandwidth")
        h = float(np.ravel(hs[-1])[0]) if hs else None
        out[name] = {"prediction": pred, "history": np.asarray(history["loss"], dtype=np.float64),
                     "bandwidth": h}
    return out, notes


def textbook_study(
    split: Split | None = None,
    *,
    kernels: Sequence[str] = DEMO_KERNELS,
    bandwidths: Sequence[float] = DEMO_BANDWIDTHS,
    slider: Sequence[float] | None = None,
    learnable: bool = True,
    every_kernel: bool = False,
    degrees: Sequence[int] = DEMO_DEGREES,
    progress: ProgressCallback | None = None,
) -> Study:
    """Replay the textbook chapter on a data split and keep everything the figures and report need.

    For each kernel: the CV-selected bandwidth (:func:`bandwidth_search`), the validation MSE at
    each of ``bandwidths`` and at the selected one (average pooling once, it has no bandwidth),
    and, for every bandwidth of the report's slider, the predictions at ``split.x_val`` and the
    attention weights. Predictions come from :func:`nadaraya.pool` and weights from
    :func:`nadaraya.attention_weights`, with ``empty="nearest"`` so that a compact kernel's
    empty window takes its nearest training point. Beside them, local polynomial fits of
    ``degrees`` (Gaussian, each with its own CV bandwidth) and Nadaraya-Watson as the reference:
    a row each in the table (after the Gaussian's) and :attr:`Study.local` for
    :func:`figure_local` and the report.

    Parameters
    ----------
    split : Split, optional
        Default :func:`nadaraya.datasets.textbook` ``()``.
    kernels : sequence of str
    bandwidths : sequence of float, default (0.1, 0.2, 0.5, 1)
    slider : sequence of float, optional
        Default 25 log-spaced values from 0.05 to 2.5 merged with ``bandwidths``; every
        kernel's CV choice is added to it.
    learnable : bool, default True
        Train the learnable-w and additive models when torch and ``nadaraya.nn`` are present.
    every_kernel : bool, default False
        Also study every other kernel of the registry: a row at its CV-selected bandwidth and
        its states for the report.
    degrees : sequence of int, default (1, 2)
        Local polynomial degrees to fit beside Nadaraya-Watson; empty for none.
    progress : callable, optional
        ``progress(done, total, description)``.

    Returns
    -------
    Study

    Examples
    --------
    >>> study = textbook_study(kernels=["constant", "gaussian"], slider=[0.2, 1.0], learnable=False)
    >>> [(r.model, r.bandwidth) for r in study.rows][:3]
    [('average pooling', None), ('gaussian', 0.1), ('gaussian', 0.2)]
    >>> study.heatmaps["gaussian"].shape  # 0.2, 1 and the CV choice
    (3, 50, 50)
    >>> [(r.model, r.note) for r in study.rows if r.model.startswith("local")][0]
    ('local linear', 'gaussian, degree 1, leave-one-out CV')
    """
    split = textbook() if split is None else split
    kernels = list(kernels)
    others = [k for k in kernel_names() if k not in kernels] if every_kernel else []
    searched = [k for k in kernels + others if k != "constant"]
    base = np.concatenate([np.logspace(np.log10(0.05), np.log10(2.5), 25), np.asarray(bandwidths, float)]
                          if slider is None else [np.asarray(slider, float)])
    degrees = [d for d in degrees if d != 0]
    done, total = 0, len(searched) + len(kernels + others) * (base.size + len(searched)) + 2 * bool(learnable)
    total += len(degrees) + 1 if degrees else 0

    def tick(what: str) -> None:
        nonlocal done
        done += 1
        if progress:
            progress(min(done, total), total, what)

    def mse(kernel: str, h: float) -> float:
        pred = pool(split.x_val, split.x_train, split.y_train, kernel=kernel, bandwidth=h, empty="nearest")
        return float(np.mean((pred - split.y_val) ** 2))

    searches: dict[str, Search] = {}
    for kernel in searched:
        searches[kernel] = bandwidth_search(split.x_train, split.y_train, kernel=kernel)
        tick(f"bandwidth search ({kernel})")
    rows: list[Row] = []
    for kernel in kernels + others:
        if kernel == "constant":
            rows.append(Row(_label(kernel), kernel, None, mse(kernel, 1.0)))
            continue
        for h in bandwidths if kernel in kernels else ():
            rows.append(Row(kernel, kernel, float(h), mse(kernel, h)))
        h_cv = float(searches[kernel].bandwidth[0])
        rows.append(Row(kernel, kernel, h_cv, mse(kernel, h_cv), "selected by leave-one-out CV"))
    # the slider's positions: the given ones and every kernel's CV choice, so that it lands on each
    cvs = [float(sr.bandwidth[0]) for sr in searches.values()]
    slide = np.unique([float(f"{h:.6g}") for h in np.concatenate([base, cvs])])
    local = _local_fits(split, degrees, searches.get("gaussian"), tick) if degrees else {}
    after = max((i + 1 for i, r in enumerate(rows) if r.kernel == "gaussian"), default=len(rows))
    rows[after:after] = [Row(fit.name, fit.kernel, fit.bandwidth, fit.mse, f"{fit.kernel}, degree {d}, "
                             "leave-one-out CV") for d, fit in local.items() if d]  # beside NW's rows
    spans = None
    if degrees:  # LOWESS beside them: its span chosen by leave-one-out CV, and a grid of spans
        lowess_row, spans = _lowess_study(split)
        rows.append(lowess_row)
    total = done + len(kernels + others) * slide.size + 2 * bool(learnable)
    curves: dict[str, NDArray[np.float64]] = {}
    heatmaps: dict[str, NDArray[np.float64]] = {}
    for kernel in kernels + others:
        curves[kernel], heatmaps[kernel] = _states(split, kernel, slide, tick)
    learned: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    if learnable:
        learned, notes = _train_learnable(split, tick)
        for name, res in learned.items():
            mse_learned = float(np.mean((res["prediction"] - split.y_val) ** 2))
            rows.append(Row(name, "learned", res["bandwidth"], mse_learned, "trained by gradient descent"))
    return Study(split, rows, searches, slide, curves, heatmaps, learned, notes, tuple(kernels), local, spans)


#: Spans of the report's LOWESS slider: about this many numbers of neighbours, even in log k.
SPAN_GRID = 32


def _lowess_study(split: Split) -> tuple[Row, Spans | None]:
    """LOWESS's line of the table (tricube, local linear, a nearest-neighbour span chosen by CV; the
    ``h`` column shows the span ``k / n``) and its curves at a grid of spans for the fit view
    (None with fewer than 3 training points)."""
    from nadaraya.estimator import NadarayaWatson
    from nadaraya.kernels import get as get_kernel
    from nadaraya.local.lowess import lowess
    from nadaraya.local.neighbours import Geometry, rows

    model = NadarayaWatson(kernel="tricube", degree=1, bandwidth_type="generalized_nn", bandwidth="cv")
    model.fit(split.x_train[:, None], split.y_train)
    k, n = int(model.bandwidth_[0]), split.x_train.size
    mse = float(np.mean((model.predict(split.x_val[:, None]) - split.y_val) ** 2))
    row = Row("LOWESS", "lowess", k / n, mse, f"tricube, local linear, span = {k} of {n} points, by CV")
    if n < 3:
        return row, None
    # k >= 3: the k-th neighbour has tricube weight 0, a line needs two points of positive weight
    ks = np.unique(np.concatenate([np.round(np.geomspace(3, n, SPAN_GRID)), [k]]).astype(np.int64))
    q, keys = np.sort(split.x_val, kind="stable"), np.sort(split.x_train, kind="stable")
    curves = np.empty((ks.size, split.x_val.size))
    weights = np.empty((ks.size, q.size, n))
    tricube = get_kernel("tricube")
    for i, kk in enumerate(ks):
        curves[i] = lowess(split.y_train, split.x_train, frac=kk / n, it=0, xvals=split.x_val)
        geom = Geometry(keys[:, None], np.array([kk]), "generalized_nn")
        for sl, A, _, _ in rows(geom, q[:, None], None, tricube, 0):
            weights[i, sl] = A
    return row, Spans(ks, n, k, curves, weights)


def _local_fits(
    split: Split, degrees: Sequence[int], nw: Search | None, tick: Callable[[str], None]
) -> dict[int, LocalCurve]:
    """Nadaraya-Watson and the local polynomial fits of ``degrees``, Gaussian, each at its CV bandwidth
    (Nadaraya-Watson's from ``nw`` when the study searched it already)."""
    from nadaraya.bandwidth import select_bandwidth
    from nadaraya.estimator import NadarayaWatson

    lo = min(float(split.x_train.min()), float(split.x_val.min()))
    hi = max(float(split.x_train.max()), float(split.x_val.max()))
    grid = np.linspace(lo, hi, LOCAL_GRID)
    out: dict[int, LocalCurve] = {}
    for d in (0, *sorted(set(degrees))):
        if d == 0 and nw is not None:
            h = float(nw.bandwidth[0])
        else:
            h = float(select_bandwidth(split.x_train, split.y_train, degree=d).bandwidth[0])
        at: dict[str, Any] = {"bandwidth": h, "degree": d, "empty": "nearest"}
        val = np.asarray(pool(split.x_val, split.x_train, split.y_train, **at), dtype=np.float64)
        on_grid = np.asarray(pool(grid, split.x_train, split.y_train, **at), dtype=np.float64)
        model = NadarayaWatson(bandwidth=h, degree=d, empty="nearest")
        model.fit(split.x_train[:, None], split.y_train)
        band = model.confidence_band(grid[:, None])  # 95 %, asymptotic, heteroscedastic noise
        wide = model.confidence_band(grid[:, None], kind="simultaneous", random_state=0)
        out[d] = LocalCurve(d, h, grid, on_grid, val, float(np.mean((val - split.y_val) ** 2)), band=band,
                            simultaneous=wide)
        tick(f"local fit ({LOCAL_NAMES.get(d, d)})")
    return out


def _states(
    split: Split, kernel: str, slide: NDArray[np.float64], tick: Callable[[str], None]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Predictions at ``split.x_val`` and sorted attention weights of ``kernel`` at each slider position."""
    q_order = np.argsort(split.x_val, kind="stable")
    k_order = np.argsort(split.x_train, kind="stable")
    c = np.empty((len(slide), split.x_val.size))
    w = np.empty((len(slide), split.x_val.size, split.x_train.size))
    for i, h in enumerate(slide):
        at: dict[str, Any] = {"kernel": kernel, "bandwidth": h, "empty": "nearest"}
        c[i] = pool(split.x_val, split.x_train, split.y_train, **at)
        w[i] = attention_weights(split.x_val, split.x_train, **at)[np.ix_(q_order, k_order)]
        tick(f"report states ({kernel})")
    return c, w


def _fig(size: tuple[float, float]) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=size, layout="constrained")


def figure_kernels(study: Study | None = None) -> Figure:
    """``kernels.png``: every kernel of the registry, one panel each, the axis labels once.

    Examples
    --------
    >>> len(figure_kernels().axes) == len(kernel_names())
    True
    """
    from nadaraya import plot

    return plot.kernel_grid(kernel_names(), fig=_fig((10.0, 6.2)))


def figure_fit(study: Study, kernel: str = "gaussian") -> Figure:
    """``fit.png``: average pooling, then ``kernel`` at h = 0.1, 0.2, 0.5, 1 and at its CV choice.

    The textbook's point side by side: a small bandwidth follows the noise, a large one
    flattens towards average pooling, cross-validation picks in between. One legend for all
    panels, below them, so that it covers no point.

    Examples
    --------
    >>> study = textbook_study(kernels=["gaussian"], slider=[0.5], learnable=False)
    >>> [ax.get_title() for ax in figure_fit(study).axes][:2]
    ['average pooling (h = inf)', 'gaussian, h = 0.1']
    """
    from nadaraya import plot

    s = study.split
    h_cv = float(study.searches[kernel].bandwidth[0]) if kernel in study.searches else None
    panels: list[tuple[str, str, float]] = [("constant", "average pooling (h = inf)", 1.0)]
    panels += [(kernel, f"{kernel}, h = {h:g}", float(h)) for h in DEMO_BANDWIDTHS]
    if h_cv is not None:
        panels.append((kernel, f"{kernel}, CV choice h = {h_cv:.3g}", h_cv))
    fig = _fig((10.0, 5.8))
    grid = fig.subplots(2, 3, sharex=True, sharey=True)
    for ax, (k, title, h) in zip(grid.flat, panels):
        pred = pool(s.x_val, s.x_train, s.y_train, kernel=k, bandwidth=h, empty="nearest")
        plot.fit(s.x_train, s.y_train, s.x_val, pred, truth=s.y_val, ax=ax, legend=False)
        ax.set(title=title)
        ax.label_outer()
    for ax in grid.flat[len(panels):]:
        ax.remove()
    fig.legend(*grid.flat[0].get_legend_handles_labels(), loc="outside upper center", ncols=3, frameon=False)
    return fig


def figure_attention(study: Study, kernel: str = "gaussian") -> Figure:
    """``attention.png``: the attention weights at h = 0.1, 0.2, 0.5, 1 on one colour scale.

    Rows are the validation inputs, columns the training inputs, both sorted; one colour bar
    serves every panel (the same ``vmax``), so the band visibly sharpens as h shrinks.

    Examples
    --------
    >>> study = textbook_study(kernels=["gaussian"], slider=[0.5], learnable=False)
    >>> fig = figure_attention(study)
    >>> len({ax.images[0].get_clim() for ax in fig.axes if ax.images})
    1
    """
    from nadaraya import plot

    s = study.split
    q, k = np.sort(s.x_val, kind="stable"), np.sort(s.x_train, kind="stable")
    weights = [attention_weights(q, k, kernel=kernel, bandwidth=h, empty="nearest") for h in DEMO_BANDWIDTHS]
    top = max(float(w.max()) for w in weights)
    fig = _fig((8.0, 6.6))
    grid = fig.subplots(2, 2, sharex=True, sharey=True)
    for ax, h, w in zip(grid.flat, DEMO_BANDWIDTHS, weights):
        plot.attention(w, q, k, ax=ax, colorbar=False, vmax=top)
        ax.set(title=f"{kernel}, h = {h:g}", xlabel="", ylabel="")
    fig.supxlabel("training inputs (keys, sorted)")
    fig.supylabel("validation inputs (queries, sorted)")
    fig.colorbar(grid.flat[0].images[0], ax=grid, label="attention weight", shrink=0.8)
    return fig


def figure_bandwidth(study: Study) -> Figure:
    """``bandwidth.png``: the CV search of each featured kernel, its choice dotted.

    Examples
    --------
    >>> study = textbook_study(kernels=["gaussian"], slider=[0.5], learnable=False)
    >>> figure_bandwidth(study).axes[0].get_ylabel()
    'leave-one-out CV score (MSE)'
    """
    from nadaraya import plot

    fig = _fig((5.8, 3.8))
    ax = fig.subplots()
    shown = [k for k in study.featured if k in study.searches and study.searches[k].scores.size >= 2]
    for j, k in enumerate(shown):
        sr = study.searches[k]
        plot.bandwidth_curve(sr.grid[:, 0], sr.scores, chosen=float(sr.bandwidth[0]), ax=ax, label=k,
                             color=f"C{j}", mark="dot", method=sr.method)
    ax.set_title("bandwidth search (dots: chosen)")
    return fig


def figure_training(study: Study) -> Figure:
    """``training.png``: the learnable models' losses per epoch and their fits.

    Examples
    --------
    >>> study = textbook_study(kernels=["gaussian"], slider=[0.5], learnable=False)
    >>> study.learned = {"m": {"history": np.array([2.0, 1.5, 1.2]), "prediction": study.split.y_val}}
    >>> [ax.get_ylabel() for ax in figure_training(study).axes]
    ['training loss (leave-one-out MSE)', 'y']
    """
    from nadaraya import plot

    s = study.split
    fig = _fig((10.0, 3.6))
    ax_loss, ax_fit = fig.subplots(1, 2)
    plot.training({name: r["history"] for name, r in study.learned.items()}, ax=ax_loss)
    ax_loss.set(ylabel="training loss (leave-one-out MSE)", title="training")
    ax_fit.scatter(s.x_train, s.y_train, s=14, color="0.55", label="training data")
    ax_fit.plot(s.x_val, s.y_val, "--", color="k", label="truth")
    for name, r in study.learned.items():
        ax_fit.plot(s.x_val, r["prediction"], lw=2, label=name)
    ax_fit.legend(frameon=False, fontsize="small", loc="lower right")
    ax_fit.set(xlabel="x", ylabel="y", title="fits on the validation inputs")
    ax_fit.grid(alpha=0.3)
    return fig


def write_figures(study: Study, out_dir: str | os.PathLike[str], *, dpi: int = 110) -> list[Path]:
    """Draw the study as PNG files in ``out_dir``: kernels, fits, local fits, attention, CV curves, training.

    Parameters
    ----------
    study : Study
    out_dir : path-like
        Must exist. Each file is written atomically.
    dpi : int, default 110

    Returns
    -------
    list of Path

    Examples
    --------
    >>> import tempfile
    >>> study = textbook_study(kernels=["gaussian"], slider=[0.5], learnable=False)
    >>> [p.name for p in write_figures(study, tempfile.mkdtemp())]
    ['kernels.png', 'fit.png', 'fit_local.png', 'attention.png', 'bandwidth.png']
    """
    from nadaraya import plot

    out = Path(out_dir)
    kernel = next((k for k in ("gaussian", *study.curves) if k in study.curves and k != "constant"),
                  "gaussian")
    figures: list[tuple[str, Figure]] = [
        ("kernels.png", figure_kernels(study)),
        ("fit.png", figure_fit(study, kernel)),
    ]
    if {0, 1} <= set(study.local):
        figures.append(("fit_local.png", figure_local(study)))
    figures.append(("attention.png", figure_attention(study, kernel)))
    if any(k in study.searches for k in study.featured):
        figures.append(("bandwidth.png", figure_bandwidth(study)))
    if study.learned:
        figures.append(("training.png", figure_training(study)))
    return [plot.savefig(fig, out / name, dpi=dpi) for name, fig in figures]
