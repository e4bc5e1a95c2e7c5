"""The ``nadaraya density`` command: a kernel density, or a conditional density with its CDF,
quantiles and prediction intervals, on columns of a CSV or Parquet file.

It only parses, reads, calls :class:`nadaraya.KernelDensity` or
:class:`nadaraya.ConditionalDensity`, and writes; every output is checked before the work and
written atomically, and a second output that fails removes the first, so a failing command
leaves no half-made file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from nadaraya._support.files import atomic_write
from nadaraya.cli._io import (
    BadInput,
    _bandwidths,
    _check_writable,
    _pa_array,
    _plot_format,
    _refuse_overwrite,
    _split_names,
    _table_writer,
    encode_categories,
    read_table,
    select_columns,
    var_types_of,
)

__all__ = ["density"]

_RULES = ("cv_ml", "cv_ls", "normal_reference", "scott", "silverman")


def _bandwidth(text: str) -> Any:
    """A rule or search name, one number, or one number per column separated by commas."""
    if text.strip().lower() in _RULES:
        return text.strip().lower()
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise BadInput(
            f"--bandwidth {text!r} is not valid; give a number, numbers separated by commas (one per "
            f"column: the x columns first, then the y columns), or one of {', '.join(_RULES)}"
        ) from None
    return values[0] if len(values) == 1 else values


def _levels(text: list[str] | None, flag: str) -> list[float]:
    if not text:
        return []
    try:
        out = [float(v) for entry in text for v in entry.split(",") if v.strip()]
    except ValueError:
        raise BadInput(f"{flag} {text!r} is not valid; give levels in (0, 1) separated by commas") from None
    bad = [v for v in out if not 0.0 < v < 1.0]
    if bad:
        raise BadInput(f"{flag} {bad[0]!r} is not valid; levels lie strictly between 0 and 1")
    return out


def _columns_of(ys: list[str], alphas: list[float], level: float | None) -> list[str]:
    names = [f"quantile_{a:g}_{y}" for y in ys for a in alphas]
    if level is not None:
        names += [f"{end}_{y}" for y in ys for end in ("lower", "upper")]
    return names


def density(
    data: Annotated[Path, typer.Argument(help="A .csv, .tsv or .parquet file.", show_default=False)],
    x: Annotated[list[str], typer.Option("--x", "-x", help="Columns to condition on (or, without --y, "
                                         "whose density to estimate).")],
    y: Annotated[list[str] | None, typer.Option("--y", "-y", help="Columns whose conditional density "
                                                "given --x to estimate.")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help=".csv, .tsv or .parquet: the rows of "
                                             "--at (default: the data) with the density's columns.")] = None,
    at: Annotated[Path | None, typer.Option("--at", help="Where to evaluate: a file with the --x columns "
                                            "(and the --y columns for pdf and cdf).")] = None,
    kernel: Annotated[str, typer.Option("--kernel", "-k", help="Kernel name, e.g. gaussian.")] = "gaussian",
    bandwidth: Annotated[str, typer.Option("--bandwidth", "-b", help="cv_ml (the default), cv_ls, "
                                           "normal_reference (scott, silverman without --y), a number, or "
                                           "one per column, x's then y's (a,b,..).")] = "cv_ml",
    quantile: Annotated[list[str] | None, typer.Option("--quantile", help="Conditional quantile levels "
                                                       "(comma-separated), one column each.")] = None,
    level: Annotated[float | None, typer.Option("--level", help="Prediction interval level: lower_ and "
                                                "upper_ columns from the conditional quantiles.")] = None,
    ordered: Annotated[list[str] | None, typer.Option("--ordered", help="Ordered categorical columns "
                                                      "(comma-separated), of --x or --y.")] = None,
    categorical: Annotated[list[str] | None, typer.Option(
        "--categorical", help="Unordered categorical columns (comma-separated), of --x or --y.")] = None,
    plot: Annotated[Path | None, typer.Option(help="Draw f(y | x) with its median and quantile band "
                                              "(one x, one y) to this image.")] = None,
    dropna: Annotated[bool, typer.Option("--dropna", help="Drop rows with missing values instead of "
                                         "refusing.", metavar="")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No notes.", metavar="")] = False,
) -> None:
    """Estimate a density: of the --x columns alone, or of --y given --x (conditional).

    Writes, per row of --at (or of the data): the log density (no --y); or pdf_, cdf_ (where
    the row has the --y values), quantile_<level>_ and lower_/upper_ columns per --y column."""
    xs = _split_names(x)
    ys = _split_names(y) if y else []
    clash = [n for n in ys if n in xs]
    if clash:
        raise BadInput(
            f"column '{clash[0]}' is both conditioned on (--x) and estimated (--y); remove it from --x"
        )
    alphas = _levels(quantile, "--quantile")
    if level is not None and not 0.0 < level < 1.0:
        raise BadInput(f"--level {level!r} is not valid; choose a level strictly between 0 and 1 (0.9)")
    if not ys and (alphas or level is not None or plot is not None):
        raise BadInput("--quantile, --level and --plot need --y: they describe y given x")
    if out is None and plot is None:
        raise BadInput("nothing to write: give --out (a table) and/or --plot (an image)")
    bw = _bandwidth(bandwidth)
    from nadaraya.kernels import get as get_kernel

    get_kernel(kernel)
    vt_all, kinds = var_types_of(xs + ys, ordered, categorical)
    vt_all = vt_all or "c" * (len(xs) + len(ys))
    inputs = {"the data file": data} | ({"the --at file": at} if at is not None else {})
    outputs = {k: v for k, v in (("--out", out), ("--plot", plot)) if v is not None}
    _refuse_overwrite(outputs, inputs)
    if len(outputs) == 2 and os.path.abspath(out) == os.path.abspath(plot):  # type: ignore[arg-type]
        raise BadInput(f"--out and --plot are the same file '{out}'; choose two paths")
    write = _table_writer(out) if out is not None else None
    if plot is not None:
        _plot_format(plot)
        if len(xs) != 1 or len(ys) != 1 or vt_all != "cc":
            raise BadInput("--plot draws one continuous --x column against one continuous --y column")
    for what, path in outputs.items():
        _check_writable(path, f"the {what[2:]} file")

    table = read_table(data)
    encoded, labels = encode_categories(table, kinds, data)
    if labels:
        raise BadInput(f"column '{next(iter(labels))}' holds text; density needs numeric category codes")
    both, _ = select_columns(table, xs + ys, data, dropna=dropna, encoded=encoded)
    X, Y = both[:, : len(xs)], both[:, len(xs) :]
    model = _fit(X, Y, vt_all[: len(xs)], vt_all[len(xs) :], kernel, bw)
    result = None
    if out is not None:
        result = _evaluate(model, at or data, read_table(at) if at is not None else table, xs, ys, kinds,
                           alphas, level, dropna)
    _write(result, write, out, model, plot)
    if not quiet:
        from rich.console import Console

        what = f"f({', '.join(ys)} | {', '.join(xs)})" if ys else f"f({', '.join(xs)})"
        done = ", ".join(str(p) for p in outputs.values())
        Console(highlight=False, soft_wrap=True).print(
            f"{what} on {X.shape[0]} rows; kernel {kernel}, bandwidth "
            f"{_bandwidths(xs + ys, model.bandwidth_, vt_all)}; wrote {done}"
        )


def _fit(X: np.ndarray, Y: np.ndarray, vx: str, vy: str, kernel: str, bw: Any) -> Any:
    from nadaraya.density._conditional import ConditionalDensity
    from nadaraya.density._kde import KernelDensity

    if Y.shape[1] == 0:
        return KernelDensity(kernel=kernel, bandwidth=bw, var_types=vx if set(vx) != {"c"} else None).fit(X)
    if isinstance(bw, str) and bw not in ("cv_ml", "cv_ls", "normal_reference"):
        raise BadInput(f"--bandwidth {bw} is for a density without --y; with --y use cv_ml, cv_ls or "
                       "normal_reference")
    return ConditionalDensity(kernel=kernel, bandwidth=bw, var_types=vx, dep_types=vy).fit(X, Y)


def _evaluate(model: Any, path: Path, table: Any, xs: list[str], ys: list[str], kinds: dict[str, str],
              alphas: list[float], level: float | None, dropna: bool) -> Any:
    """The rows of ``table`` kept, with the density's columns appended."""
    has_y = all(n in table.column_names for n in ys)
    names = xs + (ys if has_y else [])
    encoded, _ = encode_categories(table, {k: v for k, v in kinds.items() if k in names}, path)
    Q, kept = select_columns(table, names, path, dropna=dropna, encoded=encoded)
    QX, QY = Q[:, : len(xs)], Q[:, len(xs) :]
    cols: dict[str, np.ndarray] = {}
    if not ys:
        cols["log_density"] = model.score_samples(QX)
    else:
        if has_y:
            cols[f"pdf_{'_'.join(ys)}"] = model.pdf(QX, QY)
            cols[f"cdf_{'_'.join(ys)}"] = model.cdf(QX, QY)
        elif not (alphas or level is not None):
            raise BadInput(f"the --at file '{path}' has no --y column ({', '.join(ys)}): pdf and cdf need "
                           "them; give --quantile or --level for the columns that need only --x")
        if alphas:
            q = np.atleast_2d(model.quantile(QX, np.array(alphas)))
            for k, name in enumerate(_columns_of(ys, alphas, None)):
                cols[name] = q[:, k]
        if level is not None:
            band = model.predict_interval(QX, level)
            cols[f"lower_{ys[0]}"], cols[f"upper_{ys[0]}"] = band[:, 0], band[:, 1]
    result = table.filter(kept) if not kept.all() else table
    for name, values in cols.items():
        while name in result.column_names:
            name += "_"
        result = result.append_column(name, _pa_array(values))
    return result


def _write(result: Any, write: Any, out: Path | None, model: Any, plot: Path | None) -> None:
    """The table, then the picture; a picture that fails removes the table written before it."""
    if out is not None:
        with atomic_write(out, "wb") as f:
            write(result, f)
    if plot is None:
        return
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from nadaraya.plot import conditional_density, savefig

        fig = plt.figure(figsize=(6, 4), layout="constrained")
        conditional_density(model, ax=fig.add_subplot())
        savefig(fig, plot)
        plt.close(fig)
    except BaseException:
        if out is not None:
            out.unlink(missing_ok=True)
        raise
