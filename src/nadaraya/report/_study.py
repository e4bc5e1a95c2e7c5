"""The report's data: a study of one data set (fits, searches, local curves) read by figures and HTML."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from nadaraya.datasets import Split

if TYPE_CHECKING:
    from nadaraya.inference.bands import Band


#: Kernels of the demo: average pooling, the textbook's three (its "epanechikov" is our
#: triangular) and the true Epanechnikov kernel.
DEMO_KERNELS: tuple[str, ...] = ("constant", "gaussian", "boxcar", "triangular", "epanechnikov")


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

    def __repr__(self) -> str:
        h = ", ".join(f"{v:.4g}" for v in np.ravel(self.bandwidth))
        return f"Search(method={self.method!r}, bandwidth=[{h}], {self.scores.size} candidates)"


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
        The bandwidths of the report's slider: log-spaced, with the textbook's values and every
        kernel's CV choice, each to 6 significant digits, sorted.
    curves, heatmaps : dict of str -> ndarray
        Per kernel of the report: predictions at ``split.x_val`` (len(slider), m) and attention
        weights (len(slider), m, n), queries and keys sorted.
    learned : dict of str -> dict
        Learnable models trained (name -> {"prediction", "history"}); empty without torch.
    notes : list of str
        What was skipped and why.
    featured : tuple of str
        The kernels studied at the textbook's bandwidths (the others only at their CV choice).
    local : dict of int -> LocalCurve
        Local polynomial fits by degree, Nadaraya-Watson (0) first; empty when none was asked for.
    lowess : Spans or None
        LOWESS at a grid of spans, for the report's fit view; None when no local fit was asked for.
    """

    split: Split
    rows: list[Row]
    searches: dict[str, Search]
    slider: NDArray[np.float64]
    curves: dict[str, NDArray[np.float64]]
    heatmaps: dict[str, NDArray[np.float64]]
    learned: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    featured: tuple[str, ...] = DEMO_KERNELS
    local: dict[int, LocalCurve] = field(default_factory=dict)
    lowess: Spans | None = None

    def __repr__(self) -> str:
        spans = "" if self.lowess is None else f"{self.lowess.ks.size} LOWESS spans, "
        return (f"Study({self.split.name!r}, {len(self.rows)} rows, kernels={list(self.curves)}, "
                f"{self.slider.size} slider positions, {spans}local degrees={list(self.local)}, "
                f"learned={list(self.learned)})")


@dataclass
class Spans:
    """LOWESS (tricube, local linear, no robustness pass) at a grid of spans, for the report's fit view.

    Attributes
    ----------
    ks : ndarray of int, shape (g,)
        The numbers of neighbours, increasing; the span is ``ks / n``. Includes ``k_cv``.
    n : int
        Training points.
    k_cv : int
        The number of neighbours chosen by leave-one-out CV
        (``NadarayaWatson(kernel="tricube", degree=1, bandwidth_type="generalized_nn", bandwidth="cv")``).
    curves : ndarray of shape (g, m)
        :func:`nadaraya.lowess` ``(..., frac=k / n, it=0, xvals=split.x_val)`` at each ``k``.
    weights : ndarray of shape (g, m, n)
        Each query's tricube weights over its ``k`` nearest training points, normalised to sum 1
        (the attention before the local line), queries and keys sorted.
    """

    ks: NDArray[np.int64]
    n: int
    k_cv: int
    curves: NDArray[np.float64]
    weights: NDArray[np.float64]

    @property
    def spans(self) -> NDArray[np.float64]:
        """``ks / n``."""
        return self.ks / self.n

    @property
    def cv_index(self) -> int:
        """The position of ``k_cv`` in ``ks``."""
        return int(np.flatnonzero(self.ks == self.k_cv)[0])

    def __repr__(self) -> str:
        return f"Spans({self.ks.size} spans of n = {self.n}, CV k = {self.k_cv})"


#: What each degree of a local polynomial fit is called.
LOCAL_NAMES: dict[int, str] = {0: "Nadaraya-Watson", 1: "local linear", 2: "local quadratic",
                               3: "local cubic"}


#: The zoomed panel spans this fraction of the inputs' range, from the left edge.
ZOOM = 0.2


@dataclass
class LocalCurve:
    """A local polynomial fit of the study (Gaussian kernel, bandwidth by leave-one-out CV).

    Attributes
    ----------
    degree : int
        0 is Nadaraya-Watson (local constant), 1 local linear, 2 local quadratic.
    bandwidth : float
        Chosen by :func:`nadaraya.select_bandwidth` ``(..., degree=degree)``.
    x : ndarray of shape (g,)
        A fine grid over the training and validation inputs, for drawing.
    prediction : ndarray of shape (g,)
        The fit at ``x``.
    validation : ndarray of shape (m,)
        The fit at the study's ``split.x_val``.
    mse : float
        Validation MSE.
    kernel : str, default "gaussian"
    band, simultaneous : Band or None
        The 95 % pointwise and simultaneous confidence bands on ``x``
        (:meth:`nadaraya.NadarayaWatson.confidence_band`, heteroscedastic noise).
    """

    degree: int
    bandwidth: float
    x: NDArray[np.float64]
    prediction: NDArray[np.float64]
    validation: NDArray[np.float64]
    mse: float
    kernel: str = "gaussian"
    band: Band | None = None
    simultaneous: Band | None = None

    @property
    def name(self) -> str:
        """``"Nadaraya-Watson"``, ``"local linear"``, ``"local quadratic"``, ..."""
        return LOCAL_NAMES.get(self.degree, f"degree {self.degree}")

    def __repr__(self) -> str:
        return f"LocalCurve({self.name!r}, h={self.bandwidth:.4g}, mse={self.mse:.4g})"


def edge_window(study: Study) -> tuple[float, float]:
    """The inputs the zoomed panel shows: the left edge of the data and ``ZOOM`` of the range beyond.

    Examples
    --------
    >>> from nadaraya.report import textbook_study
    >>> study = textbook_study(kernels=["gaussian"], slider=[0.5], learnable=False, degrees=[1])
    >>> lo, hi = edge_window(study)  # the inputs span 0 to 4.99
    >>> lo, round(hi, 2)
    (0.0, 1.0)
    """
    x = next(iter(study.local.values())).x
    lo, hi = float(x[0]), float(x[-1])
    return lo, round(lo + ZOOM * (hi - lo), 10)


