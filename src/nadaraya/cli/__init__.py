"""The ``nadaraya`` command: demo, fit, predict, select, test and bench (typer and rich; the ``cli`` extra).

Commands only parse arguments, read and write files, and call the library. Bad input (a missing
file or column, a non-numeric or ambiguous column, missing values, empty data, a damaged model
file, an unwritable output path, an output path that is one of the inputs) ends with exit code 2
and one line on stderr, and leaves no output file behind: every file is written to a temporary
name in its folder and renamed when complete, and no output may resolve (through symbolic or hard
links) to an input. Warnings are shown as one ``warning: ...`` line each, or not at all with
``--quiet``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

import numpy as np
import typer
from typer.core import TyperCommand, TyperGroup

from nadaraya._support.files import atomic_write, missing_folders, remove_created
from nadaraya._support.validation import EMPTY_POLICIES
from nadaraya.cli import _infer as infer
from nadaraya.cli import _io
from nadaraya.cli._density import density as _density
from nadaraya.cli._io import (
    _CRITERIA,
    BadInput,
    _bandwidth,
    _bandwidths,
    _check_degree,
    _check_writable,
    _demo_table,
    _features_and_targets,
    _load_model,
    _message,
    _name_features,
    _pa_array,
    _plot_format,
    _plot_search,
    _refuse_overwrite,
    _selection_table,
    _table_writer,
    _unwrapped,
    _write_demo_data,
    apply_categories,
    encode_categories,
    read_table,
    select_columns,
    var_types_of,
)

__all__ = ["BadInput", "app", "main", "read_table", "select_columns"]

F = TypeVar("F", bound=Callable[..., Any])

class _HelpFlag:
    """``--help`` takes no value: its metavar is empty, so the help does not print ``<bool>``
    after it (typer with click 8.5 does for every flag without ``metavar=""``)."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
        return option


class _Command(_HelpFlag, TyperCommand):
    pass


class _Group(_HelpFlag, TyperGroup):
    pass


app = typer.Typer(
    cls=_Group,
    name="nadaraya",
    help="Attention pooling by similarity (Nadaraya-Watson kernel regression) from the command line.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

def _show_version(value: bool) -> None:
    if value:
        from nadaraya._version import __version__

        typer.echo(f"nadaraya {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", callback=_show_version, is_eager=True,
                     metavar=""),
    ] = False,
) -> None:
    """Attention pooling by similarity (Nadaraya-Watson kernel regression) from the command line."""


#: warnings about the installed libraries, not about the user's data: never shown
_DEVELOPER_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def _fails_cleanly(func: F) -> F:
    """Turn bad input into one line on stderr and exit code 2, and warnings into clean lines."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with _clean_warnings(bool(kwargs.get("quiet", False))):
                return func(*args, **kwargs)
        except (BadInput, ValueError, OSError) as exc:
            message = " ".join(_message(exc).split()) or type(exc).__name__
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(2) from None

    wrapper.__doc__ = _unwrapped(func.__doc__)
    return wrapper  # type: ignore[return-value]


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def _library_errors(names: list[str]) -> Iterator[None]:
    """Report the library's ValueErrors with column names instead of feature numbers."""
    try:
        yield
    except ValueError as exc:
        raise BadInput(_name_features(str(exc), names)) from None


@contextlib.contextmanager
def _clean_warnings(quiet: bool, names: list[str] | None = None) -> Iterator[None]:
    """Collect the warnings of the block; print each distinct one as a ``warning:`` line unless quiet.

    Never Python's ``file.py:123: UserWarning`` with its source line. Warnings of a block that
    fails are dropped: the error is the one line the user sees.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for category in _DEVELOPER_WARNINGS:
            warnings.simplefilter("ignore", category)
        yield
    if quiet:
        return
    seen: set[str] = set()
    for w in caught:
        text = _name_features(" ".join(str(w.message).split()), names)
        if text and text not in seen:
            seen.add(text)
            typer.echo(f"warning: {text}", err=True)


@contextlib.contextmanager
def _progress(quiet: bool, description: str) -> Iterator[Callable[[int, int | None, str], None]]:
    """A transient rich progress bar on stderr; yields ``update(done, total, description)``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = _console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        # off a terminal a transient bar cannot erase itself and would leave a blank line
        disable=quiet or not console.is_terminal,
    ) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int | None, what: str) -> None:
            bar.update(task, completed=done, total=total, description=what)

        yield update


#: how the progress bar names the steps of a bandwidth search
_STAGES = {"grid": "grid of bandwidths", "refine": "refining", "per_feature": "per-feature steps"}


def _search_steps(
    update: Callable[[int, int | None, str], None], what: str
) -> Callable[[str, int, int], None]:
    """A bandwidth search's progress callback that moves the bar: the step's name and the number
    of bandwidths evaluated (the total is not known in advance: the bar pulses)."""

    def step(stage: str, evaluated: int, passes: int) -> None:
        update(evaluated, None, f"{what}: {_STAGES.get(stage, stage)}, {passes} passes")

    return step


# flags take no value: metavar="" keeps the help from suggesting `--dropna <bool>` (typer refuses it)
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or notes.", metavar="")]
DropNA = Annotated[
    bool, typer.Option("--dropna", help="Drop rows with missing values instead of refusing.", metavar="")
]
XCols = Annotated[list[str], typer.Option("--x", "-x", help="Feature columns (repeat, or comma-separated).")]
YCols = Annotated[list[str], typer.Option("--y", "-y", help="Target column(s).")]
DataArg = Annotated[Path, typer.Argument(help="A .csv, .tsv or .parquet file.", show_default=False)]
Degree = Annotated[int, typer.Option(
    "--degree",
    help="Local polynomial degree: 0 Nadaraya-Watson, 1 local linear, 2 local quadratic, 3 local cubic.")]
Ordered = Annotated[list[str] | None, typer.Option(
    "--ordered", help="Ordered categorical feature columns (comma-separated): numbers in their order.")]
Kernel = Annotated[str, typer.Option("--kernel", "-k", help="Kernel name, e.g. gaussian.")]
Bandwidth = Annotated[str, typer.Option(
    "--bandwidth", "-b", help="cv (the default), aicc, scott, silverman, a number, or one per feature "
    "(a,b,..).")]
Categorical = Annotated[list[str] | None, typer.Option(
    "--categorical", help="Unordered categorical feature columns (comma-separated); text is encoded "
    "(sorted values -> 0, 1, ...) and the encoding saved with the model.")]


#: the fewest training points the demo's leave-one-out cross-validation can use
_DEMO_MIN_N = 3


@app.command(cls=_Command, epilog="Example: nadaraya demo --out demo-output")
@_fails_cleanly
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the figures and report.html.")] = Path(
        "demo-output"
    ),
    variant: Annotated[str, typer.Option(help="Textbook function: 2sin+x or 2sin+x^0.8.")] = "2sin+x",
    n: Annotated[int, typer.Option("--n", help="Training points.")] = 50,
    noise: Annotated[float, typer.Option(help="Noise standard deviation.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Random seed of the data.")] = 0,
    learn: Annotated[
        bool, typer.Option(help="Train the learnable models when torch is installed.", metavar="")
    ] = True,
    quiet: Quiet = False,
) -> None:
    """Replay the textbook chapter and print the validation MSE table; write PNG figures and report.html.

    Average pooling, each kernel at bandwidths 0.1, 0.2, 0.5, 1 and the CV choice, and the
    learnable models when torch is installed.

    The data go along as CSV files for trying the other commands: textbook.csv (x, y: the
    training points), textbook-validation.csv (x, truth) and diabetes.csv (scikit-learn's
    diabetes data: ten features and progression).
    """
    import matplotlib

    matplotlib.use("Agg")

    from nadaraya import report
    from nadaraya.datasets import textbook

    if n < _DEMO_MIN_N:
        raise BadInput(
            f"--n {n} is too small: the demo needs at least {_DEMO_MIN_N} training points "
            "(leave-one-out cross-validation leaves two)"
        )
    split = textbook(n=n, noise=noise, seed=seed, variant=variant)
    if out.exists() and not out.is_dir():
        raise BadInput(f"cannot write into '{out}': it is a file, not a folder")
    created = missing_folders(out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        # every file goes to a hidden folder first and moves into place only when all are done,
        # so a failing demo leaves a folder it did not make exactly as it was
        staging = Path(tempfile.mkdtemp(prefix=".demo-", dir=out))
        try:
            with _progress(quiet, "computing") as update, _clean_warnings(quiet):
                study = report.textbook_study(split, learnable=learn, every_kernel=True, progress=update)
                update(0, 1, "drawing figures")
                figures = report.write_figures(study, staging)
                page = report.write_html(study, staging / "report.html")
                data = _write_demo_data(split, staging)
                update(1, 1, "done")
            for path in (*figures, page, *data):
                os.replace(path, out / path.name)  # replaces a link in `out`, never its target
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        remove_created(created)
        raise
    table = _demo_table(study, split.name, n, noise)
    console = _console()
    console.print(table)
    if not quiet:
        for note in study.notes:
            console.print(f"note: {note}")
    console.print(f"wrote {', '.join(p.name for p in figures)} and {page.name} to {out}/")
    console.print(f"and the data, for trying the other commands: {', '.join(p.name for p in data)}")


@app.command(
    cls=_Command,
    epilog="Example: nadaraya fit demo-output/textbook.csv -x x -y y --bandwidth cv --model model.npz",
)
@_fails_cleanly
def fit(
    data: DataArg,
    x: XCols,
    y: YCols,
    model: Annotated[Path, typer.Option("--model", "-m", help="Where to save the fitted model (.npz).")],
    kernel: Kernel = "gaussian",
    bandwidth: Bandwidth = "cv",
    empty: Annotated[
        str,
        typer.Option(help="What a query with no training point in a compact kernel's window predicts: "
                     "nearest, nan, mean or raise."),
    ] = "nearest",
    degree: Degree = 0,
    span: _io.Span = None, robust: _io.Robust = 0,  # LOWESS: --span 0.3 --robust 3
    ordered: Ordered = None,
    categorical: Categorical = None,
    dropna: DropNA = False,
    quiet: Quiet = False,
) -> None:
    """Fit a Nadaraya-Watson model on columns of a CSV or Parquet file and save it safely.

    With --categorical, text columns are encoded for you: their distinct values sorted and numbered 0, 1,
    ...; the encoding is saved with the model and applied by predict (a value not seen in training counts
    as a category different from every training one)."""
    from nadaraya.kernels import get as get_kernel

    _refuse_overwrite({"--model": model}, {"the data file": data})
    get_kernel(kernel)
    if empty not in EMPTY_POLICIES:
        raise BadInput(f"--empty {empty!r} is not valid; choose one of {', '.join(EMPTY_POLICIES)}")
    bw = _bandwidth(bandwidth)
    _check_degree(degree)
    xs, ys = _features_and_targets(x, y)
    vt, kinds = var_types_of(xs, ordered, categorical)
    _check_writable(model, "the model")
    est, X, _ = _fit_model(data, xs, ys, kinds, dropna, quiet, kernel=kernel, empty=empty, degree=degree,
                           var_types=vt, **_io.fit_options(bw, span, robust))
    est.save(model)  # atomically
    if not quiet:
        h = _bandwidths(xs, est.bandwidth_, vt)
        _console().print(f"fitted on {X.shape[0]} rows; kernel {kernel}, degree {degree}, bandwidth {h}; "
                         f"saved {model}")


def _fit_model(data: Path, xs: list[str], ys: list[str], kinds: dict[str, str], dropna: bool, quiet: bool,
               **params: Any) -> tuple[Any, np.ndarray, np.ndarray]:
    """The model of ``fit`` and ``test`` on the columns of ``data``, with the columns' names (and
    the text categories' labels) recorded; and the features and target(s) it was fitted on."""
    from nadaraya.bandwidth.search import reporting
    from nadaraya.estimator import NadarayaWatson

    table = read_table(data)
    encoded, labels = encode_categories(table, kinds, data)
    both, _ = select_columns(table, xs + ys, data, dropna=dropna, encoded=encoded)
    X, Y = both[:, : len(xs)], both[:, len(xs) :]
    Y = Y[:, 0] if len(ys) == 1 else Y
    bw = params["bandwidth"]
    with _library_errors(xs), _clean_warnings(quiet, xs), _progress(quiet, "fitting") as update:
        update(0, None, "fitting")
        with reporting(_search_steps(update, f"fitting, {bw} search" if bw in ("cv", "aicc") else "fitting")):
            est = NadarayaWatson(**params).fit(X, Y)
    est.feature_names_in_ = np.asarray(xs, dtype=object)
    est.target_names_ = ys
    if labels:
        est.category_labels_ = labels
    return est, X, Y


@app.command(
    cls=_Command,
    epilog="Example: nadaraya predict --model model.npz demo-output/textbook-validation.csv "
    "--out predictions.csv",
)
@_fails_cleanly
def predict(
    data: DataArg,
    model: Annotated[Path, typer.Option("--model", "-m", help="A model saved by `nadaraya fit`.")],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help=".csv, .tsv or .parquet (by extension): input plus predictions."),
    ],
    std: infer.Std = False,
    variance: infer.Variance = None,
    band: infer.Level = None,
    band_method: infer.BandMethod = None,
    simultaneous: infer.Simultaneous = False,
    n_boot: infer.BandBoot = None,
    seed: infer.Seed = None,
    interval: infer.IntervalLevel = None,
    interval_method: infer.IntervalMethod = None,
    adaptive: infer.Adaptive = False,
    dropna: DropNA = False,
    quiet: Quiet = False,
) -> None:
    """Predict with a saved model; writes the input columns and a predicted_<target> column per target.

    With --std, --band and --interval, each target's predicted column is followed by its std_, lower_,
    upper_, pi_lower_ and pi_upper_ columns (the guide says what bands and intervals cover)."""
    how = infer.uncertainty(std, variance, band, band_method, simultaneous, n_boot, seed, interval,
                            interval_method, adaptive)
    _refuse_overwrite({"--out": out}, {"the data file": data, "the model file": model})
    write = _table_writer(out)
    _check_writable(out, "the predictions")
    est = _load_model(model)
    names = [str(v) for v in getattr(est, "feature_names_in_", [])]
    if not names:
        raise BadInput(f"model '{model}' does not record its feature columns; fit it with `nadaraya fit`")
    table = read_table(data)
    encoded, unseen = apply_categories(table, getattr(est, "category_labels_", None) or {}, data)
    X, kept = select_columns(table, names, data, dropna=dropna, encoded=encoded)
    with _progress(quiet, "predicting") as update, _library_errors(names), _clean_warnings(quiet, names):
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        for name, new in unseen.items():
            shown = ", ".join(map(repr, new[:3])) + (", ..." if len(new) > 3 else "")
            warnings.warn(f"column '{name}' holds values not seen in training ({shown}): each counts as "
                          "a category different from every training one (the kernel's formula)", stacklevel=1)
        columns = infer.predictions(est, X, how, update)
    result = table.filter(kept) if not kept.all() else table
    n_targets = columns["predicted"].shape[1]
    targets = list(getattr(est, "target_names_", None) or [f"y{j}" for j in range(n_targets)])
    for j, t in enumerate(targets):
        for kind, values in columns.items():
            name = f"{kind}_{t}"
            while name in result.column_names:
                name += "_"
            result = result.append_column(name, _pa_array(values[:, j]))
    with atomic_write(out, "wb") as f:
        write(result, f)
    if not quiet:
        dropped = int((~kept).sum())
        extra = f" (dropped {dropped} rows with missing values)" if dropped else ""
        _console().print(f"wrote {result.num_rows} predictions to {out}{extra}")


@app.command(
    cls=_Command,
    epilog="Example: nadaraya select demo-output/diabetes.csv -x bmi,bp,s5 -y progression "
    "--per-feature --plot cv.png",
)
@_fails_cleanly
def select(
    data: DataArg,
    x: XCols,
    y: YCols,
    method: Annotated[str, typer.Option(help="cv (leave-one-out) or aicc.")] = "cv",
    per_feature: Annotated[
        bool, typer.Option("--per-feature", help="One bandwidth per feature.", metavar="")
    ] = False,
    kernel: Annotated[str, typer.Option("--kernel", "-k", help="Kernel name.")] = "gaussian",
    plot: Annotated[Path | None, typer.Option(help="Also draw the search as a PNG file.")] = None,
    degree: Degree = 0,
    ordered: Ordered = None,
    categorical: Categorical = None,
    dropna: DropNA = False,
    quiet: Quiet = False,
) -> None:
    """Search the bandwidth; print the chosen bandwidth of each feature, its score and the search in brief."""
    from nadaraya.bandwidth import select_bandwidth
    from nadaraya.kernels import get as get_kernel

    get_kernel(kernel)
    if method not in ("cv", "aicc"):
        raise BadInput(f"--method {method!r} is not valid; choose cv or aicc")
    _check_degree(degree)
    xs, ys = _features_and_targets(x, y)
    vt, kinds = var_types_of(xs, ordered, categorical)
    if plot is not None:
        _refuse_overwrite({"--plot": plot}, {"the data file": data})
        _plot_format(plot)
        _check_writable(plot, "the plot")
    table = read_table(data)
    encoded, _ = encode_categories(table, kinds, data)
    both, _ = select_columns(table, xs + ys, data, dropna=dropna, encoded=encoded)
    X, Y = both[:, : len(xs)], both[:, len(xs) :]
    searching = _progress(quiet, "selecting the bandwidth")
    with searching as update, _library_errors(xs), _clean_warnings(quiet, xs):
        update(0, None, f"selecting the bandwidth ({method})")
        result = select_bandwidth(X, Y[:, 0] if len(ys) == 1 else Y, method=method, kernel=kernel,
                                  per_feature=per_feature, degree=degree, var_types=vt,
                                  progress=_search_steps(update, f"selecting the bandwidth ({method})"))
    console = _console()
    console.print(_selection_table(result, xs, vt))
    scores = result.search["scores"]
    console.print(f"{_CRITERIA[method]}: {result.score:.6g}")
    console.print(f"search: {scores.size} bandwidths evaluated in {result.n_passes} passes over the pairs "
                  f"({result.message}{'' if result.converged else '; not converged'})")
    console.print("chosen bandwidth: " + _bandwidths(xs, result.bandwidth, vt, digits=6))
    if plot is not None and np.isfinite(scores).sum() > 1:  # a one-point search (constant y) has no curve
        _plot_search(result, xs, plot)


@app.command(
    "test",
    cls=_Command,
    epilog="Example: nadaraya test demo-output/diabetes.csv -x bmi,bp,s5,age -y progression --seed 0",
)
@_fails_cleanly
def significance(
    data: DataArg,
    x: XCols,
    y: YCols,
    kernel: Kernel = "gaussian",
    bandwidth: Bandwidth = "cv",
    degree: Degree = 0,
    ordered: Ordered = None,
    categorical: Categorical = None,
    features: infer.Features = None,
    joint: infer.Joint = False,
    n_boot: infer.TestBoot = 399,
    seed: infer.Seed = None,
    dropna: DropNA = False,
    quiet: Quiet = False,
) -> None:
    """Fit a model and test whether the regression depends on each feature; print the significance table.

    The statistic is the mean squared partial derivative of the fit (a categorical feature: the
    mean squared change across its categories), its p-value from a wild bootstrap under the null
    that the feature does not matter (Racine, Hart and Li 2006; R np's npsigtest). The model is
    fitted as `nadaraya fit` fits it, on all the --x columns."""
    from nadaraya.kernels import get as get_kernel

    get_kernel(kernel)
    bw = _bandwidth(bandwidth)
    _check_degree(degree)
    infer.check_n_boot(n_boot)
    infer.check_seed(seed)
    xs, ys = _features_and_targets(x, y)
    if len(ys) != 1:
        raise BadInput(f"--y names {len(ys)} columns ({', '.join(ys)}); the test takes one target column")
    groups = infer.feature_groups(xs, features, joint)
    vt, kinds = var_types_of(xs, ordered, categorical)
    est, X, Y = _fit_model(data, xs, ys, kinds, dropna, quiet, kernel=kernel, bandwidth=bw, empty="nearest",
                           degree=degree, var_types=vt)
    with _progress(quiet, "testing") as update, _library_errors(xs), _clean_warnings(quiet, xs):
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        update(0, None, f"testing ({n_boot} bootstrap replicates)")
        result = est.significance_test(X, Y, features=groups, n_boot=n_boot, random_state=seed)
    typer.echo(str(result))
    if not quiet:
        typer.echo(f"fitted on {X.shape[0]} rows; kernel {kernel}, degree {degree}, bandwidth "
                   f"{_bandwidths(xs, est.bandwidth_, vt)}")


def _benchmark_runner() -> Path | None:
    for root in (Path.cwd(), Path(__file__).resolve().parents[3]):
        candidate = root / "benchmarks" / "run.py"
        if candidate.is_file():
            return candidate
    return None


@app.command(cls=_Command, epilog="Example: nadaraya bench engine --quick")
@_fails_cleanly
def bench(
    names: Annotated[list[str] | None, typer.Argument(help="Benchmarks to run (all when omitted).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Small sizes, for a smoke run.", metavar="")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="The tables only: no warnings of the libraries.", metavar="")
    ] = False,
) -> None:
    """Run the benchmark suite (benchmarks/run.py of a source checkout), printing ratios to peers."""
    runner = _benchmark_runner()
    if runner is None:
        raise BadInput(
            "nadaraya bench needs a source checkout: benchmarks/run.py was found neither in the "
            "current folder nor next to the installed package"
        )
    env = {**os.environ, "PYTHONWARNINGS": "ignore"} if quiet else None  # errors still show
    cmd = [sys.executable, str(runner), *(names or []), *(["--quick"] if quick else [])]
    rc = subprocess.call(cmd, env=env)
    if rc:
        raise typer.Exit(rc)


app.command("density", cls=_Command, epilog="Example: nadaraya density engel.csv -x income -y foodexp "
            "--quantile 0.1,0.5,0.9 --out quantiles.csv --plot density.png")(_fails_cleanly(_density))


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
