"""The ``nadaraya`` command: demo, fit, predict, select and bench (typer and rich; the ``cli`` extra).

Commands only parse arguments, read and write files, and call the library. Bad input (a missing
file or column, a non-numeric column, missing values, empty data, an unwritable output path)
ends with exit code 2 and one line on stderr, and leaves no output file behind: every file is
written to a temporary name in its folder and renamed when complete.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

import numpy as np
import typer

__all__ = ["BadInput", "app", "main", "read_table", "select_columns"]

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    name="nadaraya",
    help="Attention pooling by similarity (Nadaraya-Watson kernel regression) from the command line.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_CSV = (".csv", ".txt", ".tsv")
_PARQUET = (".parquet", ".pq")


class BadInput(Exception):
    """Input the command cannot use; reported in one line with exit code 2."""


def _fails_cleanly(func: F) -> F:
    """Turn bad input into one line on stderr and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (BadInput, ValueError, OSError) as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def _progress(quiet: bool, description: str) -> Iterator[Callable[[int, int, str], None]]:
    """A transient rich progress bar on stderr; yields ``update(done, total, description)``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_console(stderr=True),
        transient=True,
        disable=quiet,
    ) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=what)

        yield update


def read_table(path: Path) -> Any:
    """Read a CSV or Parquet file (by extension) into a pyarrow Table; BadInput if that fails.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.csv"
    >>> _ = p.write_text("a,b\\n1,2\\n3,4\\n")
    >>> read_table(p).column_names
    ['a', 'b']
    """
    import pyarrow as pa

    if not path.exists():
        raise BadInput(f"data file '{path}' does not exist")
    if path.is_dir():
        raise BadInput(f"data file '{path}' is a folder, not a file")
    suffix = path.suffix.lower()
    try:
        if suffix in _CSV:
            from pyarrow import csv

            parse = csv.ParseOptions(delimiter="\t" if suffix == ".tsv" else ",")
            table = csv.read_csv(path, parse_options=parse)
        elif suffix in _PARQUET:
            from pyarrow import parquet

            table = parquet.read_table(path)
        else:
            raise BadInput(f"cannot tell the format of '{path}': use a .csv, .tsv or .parquet file")
    except (pa.ArrowInvalid, pa.ArrowException) as exc:
        if "Empty CSV file" in str(exc):
            raise BadInput(f"data file '{path}' is empty") from None
        raise BadInput(f"cannot read '{path}': {exc}") from None
    if table.num_rows == 0:
        raise BadInput(f"data file '{path}' has no rows")
    return table


def _split_names(names: list[str]) -> list[str]:
    out = [n.strip() for entry in names for n in entry.split(",") if n.strip()]
    if not out:
        raise BadInput("no column names given")
    return out


def _column(table: Any, name: str, path: Path) -> np.ndarray:
    """One column as float64 with NaN for missing values; BadInput naming it when it is missing or text."""
    import pyarrow as pa

    if name not in table.column_names:
        close = difflib.get_close_matches(name, table.column_names, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else f"; columns are: {', '.join(table.column_names)}"
        raise BadInput(f"column '{name}' is not in '{path}'{hint}")
    col = table.column(name)
    t = col.type
    numeric = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
    if not (numeric or pa.types.is_null(t)):
        values = col.to_pylist()
        row, bad = next(
            ((i, v) for i, v in enumerate(values) if v is not None and not _is_number(v)), (0, values[0])
        )
        raise BadInput(f"column '{name}' is not numeric (row {row + 1} holds {bad!r})")
    return np.asarray(col.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def select_columns(
    table: Any, names: list[str], path: Path, *, dropna: bool, keep: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The named columns as an (n, k) float array and the mask of rows kept.

    Rows with a missing value raise BadInput naming the first row numbers (1 = the first data
    row), unless ``dropna`` drops them.

    Examples
    --------
    >>> import pyarrow as pa, pathlib
    >>> t = pa.table({"a": [1.0, None, 3.0], "b": [4, 5, 6]})
    >>> a, kept = select_columns(t, ["a", "b"], pathlib.Path("t.csv"), dropna=True)
    >>> a.tolist(), kept.tolist()
    ([[1.0, 4.0], [3.0, 6.0]], [True, False, True])
    """
    arr = np.column_stack([_column(table, n, path) for n in names])
    ok = np.isfinite(arr).all(axis=1) if keep is None else keep
    if keep is None and not ok.all():
        bad = np.nonzero(~ok)[0]
        if not dropna:
            first = ", ".join(str(r + 1) for r in bad[:5])
            raise BadInput(
                f"{bad.size} row(s) of '{path}' have missing or non-finite values in "
                f"{', '.join(names)} (data rows {first}{', ...' if bad.size > 5 else ''}); "
                "fix them or pass --dropna to drop them"
            )
    if not ok.any():
        raise BadInput(f"no rows of '{path}' are left after dropping those with missing values")
    return arr[ok], ok


def _bandwidth(text: str) -> Any:
    """A bandwidth option: a rule name, one number, or one number per feature separated by commas."""
    if text.strip().lower() in ("scott", "silverman", "cv", "aicc"):
        return text.strip().lower()
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise BadInput(
            f"--bandwidth {text!r} is not valid; give a number, numbers separated by commas "
            "(one per feature), or one of scott, silverman, cv, aicc"
        ) from None
    return values[0] if len(values) == 1 else values


def _check_writable(path: Path, what: str) -> None:
    folder = path.parent
    if not folder.is_dir():
        raise BadInput(f"cannot write {what} '{path}': the folder '{folder}' does not exist")
    if path.is_dir():
        raise BadInput(f"cannot write {what} '{path}': it is a folder")


Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or notes.")]
DropNA = Annotated[bool, typer.Option("--dropna", help="Drop rows with missing values instead of refusing.")]
XCols = Annotated[list[str], typer.Option("--x", "-x", help="Feature columns (repeat, or comma-separated).")]
YCols = Annotated[list[str], typer.Option("--y", "-y", help="Target column(s).")]
DataArg = Annotated[Path, typer.Argument(help="A .csv, .tsv or .parquet file.", show_default=False)]


@app.command(epilog="Example: nadaraya demo --out demo-output")
@_fails_cleanly
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the figures and report.html.")] = Path(
        "demo-output"
    ),
    variant: Annotated[str, typer.Option(help="Textbook function: 2sin+x or 2sin+x^0.8.")] = "2sin+x",
    n: Annotated[int, typer.Option("--n", help="Training points.")] = 50,
    noise: Annotated[float, typer.Option(help="Noise standard deviation.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Random seed of the data.")] = 0,
    learn: Annotated[bool, typer.Option(help="Train the learnable models when torch is installed.")] = True,
    quiet: Quiet = False,
) -> None:
    """Replay the textbook chapter and print the validation MSE table; write PNG figures and report.html.

    Average pooling, each kernel at bandwidths 0.1, 0.2, 0.5, 1 and the CV choice, and the
    learnable models when torch is installed.
    """
    import matplotlib

    matplotlib.use("Agg")
    from rich.table import Table

    from . import report
    from .datasets import textbook

    split = textbook(n=n, noise=noise, seed=seed, variant=variant)
    if out.exists() and not out.is_dir():
        raise BadInput(f"cannot write into '{out}': it is a file, not a folder")
    out.mkdir(parents=True, exist_ok=True)
    with _progress(quiet, "computing") as update:
        study = report.textbook_study(split, learnable=learn, every_kernel=True, progress=update)
        update(0, 1, "drawing figures")
        figures = report.write_figures(study, out)
        page = report.write_html(study, out / "report.html")
        update(1, 1, "done")
    table = Table(title=f"Validation MSE, {split.name}, {n} training points, noise {noise}")
    for col, justify in (("model", "left"), ("bandwidth", "right"), ("MSE", "right"), ("", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    best = min(r.mse for r in study.rows)
    for r in study.rows:
        mse = f"{r.mse:.4f}"
        table.add_row(
            r.model,
            "" if r.bandwidth is None else f"{r.bandwidth:.3g}",
            f"[bold green]{mse}[/]" if r.mse == best else mse,
            r.note,
        )
    console = _console()
    console.print(table)
    if not quiet:
        for note in study.notes:
            console.print(f"note: {note}")
    console.print(f"wrote {', '.join(p.name for p in figures)} and {page.name} to {out}/")


@app.command(epilog="Example: nadaraya fit data.csv -x age,bmi -y target --bandwidth cv --model model.npz")
@_fails_cleanly
def fit(
    data: DataArg,
    x: XCols,
    y: YCols,
    model: Annotated[Path, typer.Option("--model", "-m", help="Where to save the fitted model (.npz).")],
    kernel: Annotated[str, typer.Option("--kernel", "-k", help="Kernel name, e.g. gaussian.")] = "gaussian",
    bandwidth: Annotated[
        str,
        typer.Option(
            "--bandwidth",
            "-b",
            help="cv (the default), aicc, scott, silverman, a number, or one per feature (a,b,..).",
        ),
    ] = "cv",
    dropna: DropNA = False,
    quiet: Quiet = False,
) -> None:
    """Fit a Nadaraya-Watson model on columns of a CSV or Parquet file and save it safely."""
    import nadaraya

    from .kernels import get as get_kernel

    get_kernel(kernel)
    bw = _bandwidth(bandwidth)
    _check_writable(model, "the model")
    table = read_table(data)
    xs, ys = _split_names(x), _split_names(y)
    both, _ = select_columns(table, xs + ys, data, dropna=dropna)
    X, Y = both[:, : len(xs)], both[:, len(xs) :]
    Y = Y[:, 0] if len(ys) == 1 else Y
    if bw in ("cv", "aicc") and not hasattr(nadaraya, "select_bandwidth"):
        from .report import bandwidth_search

        with _progress(quiet, "selecting the bandwidth") as update:
            bw = bandwidth_search(X, Y, kernel=kernel, method=bw, progress=update).bandwidth
    with _progress(quiet, "fitting") as update:
        update(0, 1, "fitting")
        est = nadaraya.NadarayaWatson(kernel=kernel, bandwidth=bw).fit(X, Y)
    est.feature_names_in_ = np.asarray(xs, dtype=object)
    est.target_names_ = ys
    est.save(model)
    if not quiet:
        h = ", ".join(f"{n}={v:.4g}" for n, v in zip(xs, est.bandwidth_))
        _console().print(f"fitted on {X.shape[0]} rows; kernel {kernel}, bandwidth {h}; saved {model}")


@app.command(epilog="Example: nadaraya predict --model model.npz new.csv --out predictions.parquet")
@_fails_cleanly
def predict(
    data: DataArg,
    model: Annotated[Path, typer.Option("--model", "-m", help="A model saved by `nadaraya fit`.")],
    out: Annotated[Path, typer.Option("--out", "-o", help=".csv or .parquet: input plus predictions.")],
    dropna: DropNA = False,
    quiet: Quiet = False,
) -> None:
    """Predict with a saved model; writes the input columns and a predicted_<target> column per target."""
    from .persist import atomic_write, load

    if out.suffix.lower() not in _CSV + _PARQUET:
        raise BadInput(f"cannot tell the format of '{out}': use a .csv or .parquet name")
    _check_writable(out, "the predictions")
    if not model.exists():
        raise BadInput(f"model file '{model}' does not exist")
    est = load(model)
    names = [str(v) for v in getattr(est, "feature_names_in_", [])]
    if not names:
        raise BadInput(f"model '{model}' does not record its feature columns; fit it with `nadaraya fit`")
    table = read_table(data)
    X, kept = select_columns(table, names, data, dropna=dropna)
    parts = []
    step = max(1, int(2e7 // max(1, est.X_fit_.shape[0])))
    with _progress(quiet, "predicting") as update, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        for start in range(0, X.shape[0], step):
            parts.append(est.predict(X[start : start + step]))
            update(min(start + step, X.shape[0]), X.shape[0], "predicting")
    pred = np.concatenate(parts).reshape(X.shape[0], -1)
    result = table.filter(kept) if not kept.all() else table
    targets = list(getattr(est, "target_names_", None) or [f"y{j}" for j in range(pred.shape[1])])
    for j, t in enumerate(targets):
        name = f"predicted_{t}"
        while name in result.column_names:
            name += "_"
        result = result.append_column(name, _pa_array(pred[:, j]))
    with atomic_write(out, "wb") as f:
        if out.suffix.lower() in _PARQUET:
            from pyarrow import parquet

            parquet.write_table(result, f)
        else:
            from pyarrow import csv

            csv.write_csv(result, f)
    if not quiet:
        dropped = int((~kept).sum())
        extra = f" (dropped {dropped} rows with missing values)" if dropped else ""
        _console().print(f"wrote {result.num_rows} predictions to {out}{extra}")


def _pa_array(values: np.ndarray) -> Any:
    import pyarrow as pa

    return pa.array(values, type=pa.float64())


@app.command(epilog="Example: nadaraya select data.parquet -x age,bmi -y target --method cv --plot cv.png")
@_fails_cleanly
def select(
    data: DataArg,
    x: XCols,
    y: YCols,
    method: Annotated[str, typer.Option(help="cv (leave-one-out) or aicc.")] = "cv",
    per_feature: Annotated[bool, typer.Option("--per-feature", help="One bandwidth per feature.")] = False,
    kernel: Annotated[str, typer.Option("--kernel", "-k", help="Kernel name.")] = "gaussian",
    plot: Annotated[Path | None, typer.Option(help="Also draw the search as a PNG file.")] = None,
    dropna: DropNA = False,
    quiet: Quiet = False,
) -> None:
    """Search the bandwidth; print the scores tried and the chosen bandwidth of each feature."""
    from rich.table import Table

    from .kernels import get as get_kernel
    from .report import bandwidth_search

    get_kernel(kernel)
    if method not in ("cv", "aicc"):
        raise BadInput(f"--method {method!r} is not valid; choose cv or aicc")
    if plot is not None:
        _check_writable(plot, "the plot")
    table = read_table(data)
    xs, ys = _split_names(x), _split_names(y)
    both, _ = select_columns(table, xs + ys, data, dropna=dropna)
    X, Y = both[:, : len(xs)], both[:, len(xs) :]
    with _progress(quiet, "selecting the bandwidth") as update:
        search = bandwidth_search(
            X, Y[:, 0] if len(ys) == 1 else Y, kernel=kernel, method=method, per_feature=per_feature,
            progress=update,
        )
    console = _console()
    if search.scores.size:
        grid = Table(title=f"{method} search ({search.source})")
        for col in (*xs, "score"):
            grid.add_column(f"h[{col}]" if col != "score" else col, justify="right")
        best = int(np.nanargmin(np.where(np.isfinite(search.scores), search.scores, np.nan)))
        for i, (h, s) in enumerate(zip(search.grid, search.scores)):
            cells = [f"{v:.4g}" for v in np.broadcast_to(h, (len(xs),))] + [f"{s:.6g}"]
            grid.add_row(*cells, style="bold green" if i == best else None)
        console.print(grid)
    console.print("chosen bandwidth: " + ", ".join(f"{n}={v:.6g}" for n, v in zip(xs, search.bandwidth)))
    if plot is not None and search.scores.size:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure

        from . import plot as plots

        fig = Figure(figsize=(5.5, 3.6), layout="constrained")
        plots.bandwidth_curve(search.grid[:, 0], search.scores, chosen=float(search.bandwidth[0]),
                              ax=fig.subplots())
        plots.savefig(fig, plot)


def _benchmark_runner() -> Path | None:
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        candidate = root / "benchmarks" / "run.py"
        if candidate.is_file():
            return candidate
    return None


@app.command(epilog="Example: nadaraya bench engine --quick")
@_fails_cleanly
def bench(
    names: Annotated[list[str] | None, typer.Argument(help="Benchmarks to run (all when omitted).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Small sizes, for a smoke run.")] = False,
) -> None:
    """Run the benchmark suite (benchmarks/run.py of a source checkout), printing ratios to peers."""
    runner = _benchmark_runner()
    if runner is None:
        raise BadInput(
            "nadaraya bench needs a source checkout: benchmarks/run.py was found neither in the "
            "current folder nor next to the installed package"
        )
    rc = subprocess.call([sys.executable, str(runner), *(names or []), *(["--quick"] if quick else [])])
    if rc:
        raise typer.Exit(rc)


def main() -> None:
    """Entry point of the ``nadaraya`` command (``python -m nadaraya`` too).

    Examples
    --------
    >>> from typer.testing import CliRunner
    >>> from nadaraya.cli import app
    >>> CliRunner().invoke(app, ["--help"]).exit_code
    0
    """
    app(prog_name="nadaraya")
