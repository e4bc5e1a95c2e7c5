"""The textbook study behind ``nadaraya demo``: bandwidth search, models, figures and the offline HTML report.

:func:`textbook_study` replays the chapter on attention pooling by similarity (average pooling,
each kernel at several bandwidths and at the cross-validated one, and the learnable models when
PyTorch is installed); :func:`write_figures` draws it as PNG files; :func:`write_html` writes
one self-contained ``report.html`` (inline SVG, canvas and JavaScript; nothing is fetched) with
a bandwidth slider and a kernel selector switching among precomputed states.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._report_html import _label, render_html, write_html
from .datasets import Split, textbook
from .kernels import names as kernel_names
from .pooling import attention_weights, pool

if TYPE_CHECKING:
    from .bandwidth import BandwidthSelection

__all__ = [
    "DEMO_BANDWIDTHS",
    "DEMO_KERNELS",
    "Row",
    "Search",
    "Study",
    "bandwidth_search",
    "render_html",
    "textbook_study",
    "write_figures",
    "write_html",
]

#: Kernels of the demo: average pooling, the textbook's three (its "epanechikov" is our
#: triangular) and the true Epanechnikov kernel.
DEMO_KERNELS: tuple[str, ...] = ("constant", "gaussian", "boxcar", "triangular", "epanechnikov")
#: The textbook's bandwidths.
DEMO_BANDWIDTHS: tuple[float, ...] = (0.1, 0.2, 0.5, 1.0)
#: ``callback(done, total, description)`` after each unit of work.
ProgressCallback = Callable[[int, int, str], None]


@dataclass
class Search:
    """A bandwidth search: the bandwidths tried, their scores (lower is better) and the choice.

    Attributes
    ----------
    grid : ndarray of shape (k, d)
        Bandwidths tried, one row per candidate, in the order
        :func:`nadaraya.bandwidth.select_bandwidth` evaluated them (empty when it tried one).
    scores : ndarray of shape (k,)
        The criterion at each candidate (``inf`` where it is undefined).
    bandwidth : ndarray of shape (d,)
        The chosen bandwidth.
    method : str
        ``"cv"`` or ``"aicc"``.
    """

    grid: NDArray[np.float64]
    scores: NDArray[np.float64]
    bandwidth: NDArray[np.float64]
    method: str


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
    """
    from .bandwidth import select_bandwidth

    selection = select_bandwidth(X, y, method=method, kernel=kernel, per_feature=per_feature)
    grid, scores = _record_from(selection)
    return Search(grid, scores, selection.bandwidth, method)


@dataclass
class Row:
    """One line of the validation table: a model, its kernel and bandwidth, and its MSE."""

    model: str
    kernel: str
    bandwidth: float | None
    mse: float
    note: str = ""


@dataclass
class Study:
    """Everything the demo computed: the data, the MSE table, the searches and the report states.

    Attributes
    ----------
    split : Split
    rows : list of Row
        The validation MSE table.
    searches : dict of str -> Search
        The CV search per kernel (not for average pooling).
    slider : ndarray
        The bandwidths of the report's slider (log-spaced, with the textbook's values).
    curves, heatmaps : dict of str -> ndarray
        Per kernel: predictions at ``split.x_val`` (len(slider), m) and attention weights
        (len(slider), m, n), queries and keys sorted.
    learned : dict of str -> dict
        Learnable models trained (name -> {"prediction", "history"}); empty without torch.
    notes : list of str
        What was skipped and why.
    """

    split: Split
    rows: list[Row]
    searches: dict[str, Search]
    slider: NDArray[np.float64]
    curves: dict[str, NDArray[np.float64]]
    heatmaps: dict[str, NDArray[np.float64]]
    learned: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _train_learnable(
    split: Split, progress: Callable[[str], None]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Train the textbook's learnable-w and additive models when torch and nadaraya.nn exist."""
    try:
        import torch

        from . import nn  # type: ignore[attr-defined]
    except ImportError as exc:
        return {}, [f"learnable models skipped: {exc}"]
    out: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    X = torch.as_tensor(split.x_train[:, None])
    Y = torch.as_tensor(split.y_train[:, None])
    Q = torch.as_tensor(split.x_val[:, None])
    specs = [
        ("learnable w (Gaussian)", "KernelPooling", {}, {"epochs": 50, "lr": 0.5}),
        ("additive attention", "AdditiveAttentionPooling", {"in_features": 1, "hidden": 16},
         {"epochs": 60, "lr": 0.05, "optimizer": "adam"}),
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
    progress: ProgressCallback | None = None,
) -> Study:
    """Replay the textbook chapter on a data split and keep everything the figures and report need.

    For each kernel: the CV-selected bandwidth (:func:`bandwidth_search`), the validation MSE at
    each of ``bandwidths`` and at the selected one (average pooling once, it has no bandwidth),
    and, for every bandwidth of the report's slider, the predictions at ``split.x_val`` and the
    attention weights. Predictions come from :func:`nadaraya.pool` and weights from
    :func:`nadaraya.attention_weights`, with ``empty="nearest"`` so that a compact kernel's
    empty window takes its nearest training point.

    Parameters
    ----------
    split : Split, optional
        Default :func:`nadaraya.datasets.textbook` ``()``.
    kernels : sequence of str
    bandwidths : sequence of float, default (0.1, 0.2, 0.5, 1)
    slider : sequence of float, optional
        Default 25 log-spaced values from 0.05 to 2.5 merged with ``bandwidths``.
    learnable : bool, default True
        Train the learnable-w and additive models when torch and ``nadaraya.nn`` are present.
    every_kernel : bool, default False
        Also add a row for every other kernel of the registry at its CV-selected bandwidth.
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
    >>> study.heatmaps["gaussian"].shape
    (2, 50, 50)
    """
    split = textbook() if split is None else split
    slide = np.unique(np.round(np.concatenate([
        np.logspace(np.log10(0.05), np.log10(2.5), 25) if slider is None else np.asarray(slider, float),
        np.asarray(bandwidths, float) if slider is None else [],
    ]), 6))
    q_order = np.argsort(split.x_val, kind="stable")
    k_order = np.argsort(split.x_train, kind="stable")
    bandwidthed = [k for k in kernels if k != "constant"]
    total = len(bandwidthed) + len(kernels) * len(slide) + 2 * bool(learnable)
    done = 0

    def tick(what: str) -> None:
        nonlocal done
        done += 1
        if progress:
            progress(min(done, total), total, what)

    def mse(kernel: str, h: float) -> float:
        pred = pool(split.x_val, split.x_train, split.y_train, kernel=kernel, bandwidth=h, empty="nearest")
        return float(np.mean((pred - split.y_val) ** 2))

    rows: list[Row] = []
    searches: dict[str, Search] = {}
    for kernel in kernels:
        if kernel == "constant":
            rows.append(Row(_label(kernel), kernel, None, mse(kernel, 1.0)))
            continue
        for h in bandwidths:
            rows.append(Row(kernel, kernel, float(h), mse(kernel, h)))
        searches[kernel] = bandwidth_search(split.x_train, split.y_train, kernel=kernel)
        h_cv = float(searches[kernel].bandwidth[0])
        rows.append(Row(kernel, kernel, h_cv, mse(kernel, h_cv), "selected by leave-one-out CV"))
        tick(f"bandwidth search ({kernel})")
    if every_kernel:  # the rest of the registry, each at its own CV bandwidth
        for kernel in (k for k in kernel_names() if k not in kernels):
            h_cv = float(bandwidth_search(split.x_train, split.y_train, kernel=kernel).bandwidth[0])
            rows.append(Row(kernel, kernel, h_cv, mse(kernel, h_cv), "selected by leave-one-out CV"))
    curves: dict[str, NDArray[np.float64]] = {}
    heatmaps: dict[str, NDArray[np.float64]] = {}
    for kernel in kernels:
        c = np.empty((len(slide), split.x_val.size))
        w = np.empty((len(slide), split.x_val.size, split.x_train.size))
        for i, h in enumerate(slide):
            at: dict[str, Any] = {"kernel": kernel, "bandwidth": h, "empty": "nearest"}
            c[i] = pool(split.x_val, split.x_train, split.y_train, **at)
            a = attention_weights(split.x_val, split.x_train, **at)
            w[i] = a[np.ix_(q_order, k_order)]
            tick(f"report states ({kernel})")
        curves[kernel], heatmaps[kernel] = c, w
    learned: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    if learnable:
        learned, notes = _train_learnable(split, tick)
        for name, res in learned.items():
            mse_learned = float(np.mean((res["prediction"] - split.y_val) ** 2))
            rows.append(Row(name, "learned", res["bandwidth"], mse_learned, "trained by gradient descent"))
    return Study(split, rows, searches, slide, curves, heatmaps, learned, notes)


def write_figures(study: Study, out_dir: str | os.PathLike[str], *, dpi: int = 110) -> list[Path]:
    """Draw the study as PNG files in ``out_dir``: kernels, fits, attention, CV curves, training.

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
    ['kernels.png', 'fit.png', 'attention.png', 'bandwidth.png']
    """
    from matplotlib.figure import Figure

    from . import plot

    out = Path(out_dir)
    s = study.split
    kernels = list(study.curves)
    bandwidthed = [k for k in kernels if k != "constant"]
    written: list[Path] = []

    def save(fig: Figure, name: str) -> None:
        written.append(plot.savefig(fig, out / name, dpi=dpi))

    fig = Figure(figsize=(3.0 * len(kernels), 2.8), layout="constrained")
    for ax, k in zip(fig.subplots(1, len(kernels), squeeze=False)[0], kernels):
        plot.kernels(k, ax=ax)
    save(fig, "kernels.png")

    # fit: one panel per kernel at its CV bandwidth (average pooling as it is)
    fig = Figure(figsize=(3.6 * len(kernels), 3.2), layout="constrained")
    for ax, k in zip(fig.subplots(1, len(kernels), squeeze=False, sharey=True)[0], kernels):
        h = float(study.searches[k].bandwidth[0]) if k in study.searches else 1.0
        pred = pool(s.x_val, s.x_train, s.y_train, kernel=k, bandwidth=h, empty="nearest")
        plot.fit(s.x_train, s.y_train, s.x_val, pred, truth=s.y_val, ax=ax, label="prediction")
        ax.set_title(_label(k) if k == "constant" else f"{k}, CV h = {h:.3g}")
    save(fig, "fit.png")

    # attention: the Gaussian (or first kernel) at the textbook's bandwidths
    k = "gaussian" if "gaussian" in kernels else kernels[0]
    wanted = [h for h in DEMO_BANDWIDTHS if np.isclose(study.slider, h).any()] or list(study.slider[:4])
    fig = Figure(figsize=(3.4 * len(wanted), 3.0), layout="constrained")
    for ax, h in zip(fig.subplots(1, len(wanted), squeeze=False)[0], wanted):
        i = int(np.argmin(abs(study.slider - h)))
        plot.attention(study.heatmaps[k][i], ax=ax, colorbar=True)
        ax.set_xlabel("training inputs (sorted)")
        ax.set_ylabel("validation inputs (sorted)")
        ax.set_title(f"{k}, h = {study.slider[i]:.3g}")
    save(fig, "attention.png")

    if bandwidthed:
        fig = Figure(figsize=(5.5, 3.6), layout="constrained")
        ax = fig.subplots()
        for j, k in enumerate(bandwidthed):
            sr = study.searches[k]
            if sr.scores.size >= 2:
                plot.bandwidth_curve(sr.grid[:, 0], sr.scores, chosen=float(sr.bandwidth[0]), ax=ax,
                                     label=k, color=f"C{j}", mark="dot")
        ax.set_title("bandwidth search (dots: chosen)")
        save(fig, "bandwidth.png")

    if study.learned:
        fig = Figure(figsize=(10, 3.4), layout="constrained")
        ax_loss, ax_fit = fig.subplots(1, 2)
        plot.training({name: r["history"] for name, r in study.learned.items()}, ax=ax_loss)
        ax_fit.scatter(s.x_train, s.y_train, s=14, color="0.55", label="training data")
        ax_fit.plot(s.x_val, s.y_val, "--", color="k", label="truth")
        for name, r in study.learned.items():
            ax_fit.plot(s.x_val, r["prediction"], lw=2, label=name)
        ax_fit.legend(frameon=False, fontsize="small")
        ax_fit.set_xlabel("x")
        save(fig, "training.png")
    return written
