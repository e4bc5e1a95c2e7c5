"""The demo's ``fit_local.png``: local linear beside Nadaraya-Watson, with the boundary at x = 0 zoomed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from nadaraya.report._study import LOCAL_NAMES, ZOOM, LocalCurve, edge_window

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from nadaraya.report._study import Study

__all__ = ["LOCAL_GRID", "LOCAL_NAMES", "ZOOM", "LocalCurve", "edge_window", "figure_local"]

#: Points of the fine grid on which the local fits are drawn.
LOCAL_GRID = 201

#: Colours of the fits by degree (Nadaraya-Watson keeps the red of the other figures).
COLOURS = {0: "C3", 1: "C0", 2: "C2", 3: "C4"}


def _draw(ax: Axes, study: Study, fits: list[LocalCurve], *, marks: bool) -> None:
    """Training points, the truth on the fine grid and each fit, as :func:`nadaraya.plot.fit` draws them."""
    from nadaraya import plot

    s, x = study.split, fits[0].x
    truth = s.truth(x)
    plot.fit(s.x_train, s.y_train, x, fits[0].prediction, truth=truth, ax=ax, legend=False,
             label=_label(fits[0]))
    ax.get_lines()[-1].set_color(COLOURS.get(fits[0].degree, "C1"))
    for fit in fits[1:]:
        ax.plot(x, fit.prediction, color=COLOURS.get(fit.degree, "C1"), lw=2, label=_label(fit), zorder=3)
    for i, fit in enumerate(fits):  # 95 % bands: pointwise shaded, simultaneous dotted
        colour = COLOURS.get(fit.degree, "C1")
        if fit.band is not None:
            ax.fill_between(x, fit.band.lower, fit.band.upper, color=colour, alpha=0.13, lw=0, zorder=1,
                            label="95 % pointwise bands" if i == 0 else None)
        if fit.simultaneous is not None:
            sim = fit.simultaneous
            for edge, name in ((sim.lower, "95 % simultaneous bands"), (sim.upper, None)):
                ax.plot(x, edge, color=colour, lw=0.9, ls=":", zorder=2, label=name if i == 0 else None)
    if marks:  # each curve's value at the edge, where the eye compares them
        ax.plot([x[0]], [truth[0]], "o", color="k", ms=5, zorder=4)
        for fit in fits:
            ax.plot([x[0]], [fit.prediction[0]], "o", color=COLOURS.get(fit.degree, "C1"), ms=6, zorder=4)


def _label(fit: LocalCurve) -> str:
    return f"{fit.name} (degree {fit.degree}), CV h = {fit.bandwidth:.2f}"


def figure_local(study: Study, degrees: tuple[int, ...] = (0, 1)) -> Figure:
    """``fit_local.png``: Nadaraya-Watson and local linear on the textbook data, and the left edge zoomed.

    Left, the whole range: training points, the truth (dashed) and each fit of ``degrees`` at
    its own cross-validated bandwidth; the shaded strip is what the right panel enlarges. Right,
    the edge at the smallest input, where the kernel window is one-sided: Nadaraya-Watson's
    weighted average takes in only points to the right of the query and bends away from a
    rising truth, and the local line follows it. Dots mark each curve's value at the edge.

    Parameters
    ----------
    study : Study
        With :attr:`Study.local` holding every degree of ``degrees``.
    degrees : tuple of int, default (0, 1)

    Returns
    -------
    matplotlib Figure

    Raises
    ------
    ValueError
        If the study has no fit of one of ``degrees``.

    Examples
    --------
    >>> from nadaraya.report import textbook_study
    >>> study = textbook_study(kernels=["gaussian"], slider=[0.5], learnable=False, degrees=[1])
    >>> fig = figure_local(study)
    >>> [ax.get_title() for ax in fig.axes]
    ['the whole range', 'the edge at x = 0, enlarged']
    """
    from matplotlib.figure import Figure

    missing = [d for d in degrees if d not in study.local]
    if missing:
        raise ValueError(f"degrees={degrees!r}: the study has no local fit of degree {missing[0]}; "
                         f"it has {sorted(study.local)} (textbook_study(degrees=...))")
    fits = [study.local[d] for d in degrees]
    lo, hi = edge_window(study)
    fig = Figure(figsize=(10.0, 4.4), layout="constrained")
    whole, edge = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.55, 1.0]})
    _draw(whole, study, fits, marks=False)
    whole.axvspan(lo, hi, color="0.92", zorder=0, lw=0)
    whole.text((lo + hi) / 2, 0.97, "enlarged\nat right", transform=whole.get_xaxis_transform(), ha="center",
               va="top", fontsize="small", color="0.35")
    whole.set(title="the whole range")
    _draw(edge, study, fits, marks=True)
    x = fits[0].x
    inside = (x >= lo) & (x <= hi)
    s = study.split
    near = np.concatenate([s.truth(x[inside]), *(f.prediction[inside] for f in fits),
                           s.y_train[(s.x_train >= lo) & (s.x_train <= hi)]])
    pad = 0.08 * float(near.max() - near.min() or 1.0)
    edge.set(xlim=(lo - 0.02 * (hi - lo), hi + 0.02 * (hi - lo)),
             ylim=(float(near.min()) - pad, float(near.max()) + pad),
             title=f"the edge at x = {lo:g}, enlarged", ylabel="")
    at_edge = [f"truth {s.truth(x[:1])[0]:.2f}", *(f"{f.name} {f.prediction[0]:.2f}" for f in fits)]
    edge.text(0.03, 0.97, f"at x = {lo:g}:\n" + "\n".join(at_edge), transform=edge.transAxes, va="top",
              fontsize="small", bbox={"facecolor": "white", "edgecolor": "0.8", "alpha": 0.9})
    fig.legend(*whole.get_legend_handles_labels(), loc="outside lower center", ncols=2, frameon=False)
    return fig
