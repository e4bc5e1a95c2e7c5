"""FitSummary: what ``NadarayaWatson.summary()`` reports, printed as a fixed-width table like statsmodels'."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["FitSummary", "r_squared", "summarize"]

#: the width of the printed table (statsmodels' summaries are 78 characters wide)
WIDTH = 78
_DEGREES = {0: "local constant", 1: "local linear", 2: "local quadratic", 3: "local cubic"}
_TYPES = {"c": "continuous", "o": "ordered", "u": "unordered"}


def r_squared(
    y: NDArray[np.float64], fits: NDArray[np.float64], sample_weight: NDArray[np.float64] | None = None
) -> NDArray[np.float64]:
    """R squared in R np's definition, per output: ``[sum w (y - ybar)(yhat - ybar)]**2 /
    [sum w (y - ybar)**2 * sum w (yhat - ybar)**2]`` with ``ybar`` the (weighted) mean of ``y``
    (``w = 1`` without sample weights); NaN when ``y`` or the fits are constant.

    Examples
    --------
    >>> import numpy as np
    >>> r_squared(np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 2.0])).tolist()
    [1.0]
    """
    Y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    F = np.asarray(fits, dtype=np.float64).reshape(len(y), -1)
    w = np.ones(Y.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    ybar = (w @ Y) / w.sum()
    dy, df = Y - ybar, F - ybar
    num = (w @ (dy * df)) ** 2
    den = (w @ dy**2) * (w @ df**2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _one(values: tuple[float, ...]) -> float | tuple[float, ...]:
    return values[0] if len(values) == 1 else values


@dataclass(frozen=True)
class FitSummary:
    """A fitted :class:`~nadaraya.NadarayaWatson` in brief; ``print`` shows it as a table.

    Attributes
    ----------
    n : int
        Training rows.
    kernel : str
    degree : int
        0 Nadaraya-Watson (local constant), 1 local linear, 2 local quadratic, 3 local cubic.
    var_types : str
        One letter per column: ``c`` continuous, ``o`` ordered, ``u`` unordered.
    categorical_kernel : str
    feature_names : tuple of str
    bandwidth : tuple of float
        Per column: the bandwidth of a continuous column, the lambda of a categorical one.
    levels : tuple of int
        The distinct training values of each categorical column (0 for continuous ones).
    bandwidth_from : str
        Where the bandwidth came from: ``"cv"`` or ``"aicc"`` (selected), a rule of thumb's
        name, or ``"given"``.
    criterion : {"cv", "aicc"} or None
        The selection criterion; None when the bandwidth was given or from a rule of thumb.
    criterion_value : float or None
        The criterion at the selected bandwidth (the leave-one-out MSE for ``"cv"``, AICc).
    residual_variance : float or tuple of float
        The mean squared in-sample residual ``sum w (y - yhat)**2 / sum w`` (R np's MSE), per
        output (a tuple for several outputs).
    r_squared : float or tuple of float
        R np's R squared, ``[sum w (y - ybar)(yhat - ybar)]**2 / [sum w (y - ybar)**2 sum w
        (yhat - ybar)**2]``, ``yhat`` the in-sample fits; see ``nadaraya.inference.summary.r_squared``.
    weighted : bool
        Whether sample weights were given: then ``w`` are they (``ybar`` the weighted mean),
        else ``w = 1``. A NaN fit (``empty="nan"``) makes both statistics NaN.
    output_names : tuple of str
        The outputs' names in the table (``y`` for one output).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya import NadarayaWatson
    >>> X = np.linspace(0, 1, 40)[:, None]
    >>> s = NadarayaWatson(bandwidth=0.1).fit(X, np.sin(3 * X[:, 0])).summary()
    >>> s.n, s.kernel, s.bandwidth
    (40, 'gaussian', (0.1,))
    >>> print(s.as_text().splitlines()[0].strip())
    Nadaraya-Watson regression results
    """

    n: int
    kernel: str
    degree: int
    var_types: str
    categorical_kernel: str
    feature_names: tuple[str, ...]
    bandwidth: tuple[float, ...]
    levels: tuple[int, ...]
    bandwidth_from: str
    criterion: str | None
    criterion_value: float | None
    residual_variance: float | tuple[float, ...]
    r_squared: float | tuple[float, ...]
    weighted: bool
    output_names: tuple[str, ...] = ("y",)

    def _pairs(self) -> list[tuple[str, str]]:
        def many(v: float | tuple[float, ...]) -> tuple[float, ...]:
            return v if isinstance(v, tuple) else (v,)

        w = " (weighted)" if self.weighted else ""
        pairs = [
            ("Observations:", str(self.n)),
            ("Kernel:", self.kernel),
            ("Degree:", f"{self.degree} ({_DEGREES.get(self.degree, '')})"),
            ("Variable types:", self.var_types),
            ("Sample weights:", "yes" if self.weighted else "no"),
            ("Categorical kernel:", self.categorical_kernel if set(self.var_types) - {"c"} else "none"),
            ("Bandwidth from:", self.bandwidth_from),
            ("Criterion value:", "" if self.criterion_value is None else f"{self.criterion_value:.6g}"),
        ]
        for name, rv, r2 in zip(self.output_names, many(self.residual_variance), many(self.r_squared)):
            label = "" if len(self.output_names) == 1 else f" {name}"
            pairs += [(f"Resid. var.{label}{w}:", f"{rv:.6g}"), (f"R-squared{label}{w}:", f"{r2:.6g}")]
        return pairs

    def as_text(self) -> str:
        """The summary as a fixed-width table (what ``print`` shows)."""
        half = (WIDTH - 2) // 2
        lines = ["Nadaraya-Watson regression results".center(WIDTH).rstrip(), "=" * WIDTH]
        cells = [f"{label:<{half - len(value) - 1}} {value}" if len(label) + len(value) < half
                 else f"{label} {value}" for label, value in self._pairs()]
        for i in range(0, len(cells), 2):
            lines.append("  ".join(c.ljust(half) for c in cells[i : i + 2]).rstrip())
        lines += ["=" * WIDTH, f"{'column':<24}{'type':<14}{'bandwidth':>14}{'lambda':>14}{'levels':>12}",
                  "-" * WIDTH]
        for name, kind, h, c in zip(self.feature_names, self.var_types, self.bandwidth, self.levels):
            cont = kind == "c"
            lines.append(
                f"{name[:23]:<24}{_TYPES[kind]:<14}{(f'{h:.6g}' if cont else ''):>14}"
                f"{('' if cont else f'{h:.6g}'):>14}{('' if cont else str(c)):>12}".rstrip()
            )
        lines.append("=" * WIDTH)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.as_text()

    def __repr__(self) -> str:  # the table at the prompt and in notebooks, as statsmodels' summaries
        return self.as_text()


def summarize(
    model: Any, y: NDArray[np.float64], fits: NDArray[np.floating], sample_weight: NDArray[np.float64] | None
) -> FitSummary:
    """The :class:`FitSummary` of a fitted model from its training targets ``y`` (as stored)
    and its in-sample fits."""
    Y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    F = np.asarray(fits, dtype=np.float64).reshape(len(y), -1)
    w = np.ones(Y.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    rv = tuple(float(v) for v in (w @ (Y - F) ** 2) / w.sum())
    r2 = tuple(float(v) for v in r_squared(Y, F, sample_weight))
    d = int(model.n_features_in_)
    names = getattr(model, "feature_names_in_", None)
    names = tuple(str(v) for v in names) if names is not None else tuple(f"x{j}" for j in range(d))
    targets = getattr(model, "target_names_", None)
    outputs = tuple(str(t) for t in targets) if targets and len(targets) == Y.shape[1] else (
        ("y",) if Y.shape[1] == 1 else tuple(f"y{j}" for j in range(Y.shape[1])))
    sel = getattr(model, "selection_", None)
    vt = getattr(model, "var_types_", None) or "c" * d
    levels = getattr(model, "levels_", None)
    return FitSummary(
        n=int(Y.shape[0]),
        kernel=str(model.kernel),
        degree=int(model.degree),
        var_types=vt,
        categorical_kernel=str(model.categorical_kernel),
        feature_names=names,
        bandwidth=tuple(float(v) for v in model.bandwidth_),
        levels=tuple(int(v) for v in (levels if levels is not None else np.zeros(d, dtype=np.int64))),
        bandwidth_from=str(sel.method) if sel is not None else (
            model.bandwidth if isinstance(model.bandwidth, str) else "given"),
        criterion=None if sel is None else str(sel.method),
        criterion_value=None if sel is None else float(sel.score),
        residual_variance=_one(rv),
        r_squared=_one(r2),
        weighted=sample_weight is not None,
        output_names=outputs,
    )
