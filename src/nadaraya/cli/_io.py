"""Files and output of the ``nadaraya`` command: reading tables, picking columns, safe writes, tables."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from nadaraya._support.files import atomic_write, same_file
from nadaraya.local.encode import shown_labels, sorted_codes

_CSV = (".csv", ".txt", ".tsv")
_PARQUET = (".parquet", ".pq")


class BadInput(Exception):
    """Input the command cannot use; reported in one line with exit code 2."""


def _message(exc: BaseException) -> str:
    """The error's text; an OSError's without its ``[Errno N]`` and with the file it names.

    Examples
    --------
    >>> _message(OSError(27, "File too large", "out.csv")), _message(OSError(13, "cannot write 'a.csv'"))
    ("File too large: 'out.csv'", "cannot write 'a.csv'")
    """
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror + (f": '{exc.filename}'" if exc.filename else "")
    return str(exc)


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
            _ = table.column_names  # pyarrow decodes the names only when asked
        elif suffix in _PARQUET:
            from pyarrow import parquet

            table = parquet.read_table(path)
        else:
            raise BadInput(f"cannot tell the format of '{path}': use a .csv, .tsv or .parquet file")
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"cannot read '{path}': it is not UTF-8 text (a column name holds the byte "
            f"0x{exc.object[exc.start]:02x}); save it as UTF-8"
        ) from None
    except (pa.ArrowInvalid, pa.ArrowException) as exc:
        if "Empty CSV file" in str(exc):
            raise BadInput(f"data file '{path}' is empty") from None
        if "invalid UTF8" in str(exc):
            raise BadInput(f"cannot read '{path}': it is not UTF-8 text; save it as UTF-8 ({exc})") from None
        raise BadInput(f"cannot read '{path}': {exc}") from None
    if table.num_rows == 0:
        raise BadInput(f"data file '{path}' has no rows")
    return table


def _split_names(names: list[str]) -> list[str]:
    out = [n.strip() for entry in names for n in entry.split(",") if n.strip()]
    if not out:
        raise BadInput("no column names given")
    return out


def _features_and_targets(x: list[str], y: list[str]) -> tuple[list[str], list[str]]:
    """The names of ``--x`` and ``--y``; BadInput naming a column given as both (the model would
    be given its own target, and fit it exactly).

    Examples
    --------
    >>> _features_and_targets(["a,b"], ["y"])
    (['a', 'b'], ['y'])
    """
    xs, ys = _split_names(x), _split_names(y)
    both = [name for name in ys if name in xs]
    if both:
        raise BadInput(f"column '{both[0]}' is both a feature (--x) and a target (--y): a model given "
                       "its own target predicts it exactly; remove it from --x")
    return xs, ys


def _find(table: Any, name: str, path: Path) -> Any:
    """The column named so; BadInput naming it when it is missing or ambiguous."""
    if name not in table.column_names:
        close = difflib.get_close_matches(name, table.column_names, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else f"; columns are: {', '.join(table.column_names)}"
        raise BadInput(f"column '{name}' is not in '{path}'{hint}")
    where = [i + 1 for i, c in enumerate(table.column_names) if c == name]
    if len(where) > 1:
        raise BadInput(
            f"column '{name}' is ambiguous: '{path}' has {len(where)} columns named so (columns "
            f"{', '.join(map(str, where))}); rename them so that each name is unique"
        )
    return table.column(name)


def _column(table: Any, name: str, path: Path) -> np.ndarray:
    """One column as float64 with NaN for missing values; BadInput naming it when it is missing or text."""
    import pyarrow as pa

    col = _find(table, name, path)
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
    table: Any,
    names: list[str],
    path: Path,
    *,
    dropna: bool,
    keep: np.ndarray | None = None,
    encoded: dict[str, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The named columns as an (n, k) float array and the mask of rows kept.

    Rows with a missing value raise BadInput naming the first row numbers (1 = the first data
    row), unless ``dropna`` drops them. Columns in ``encoded`` (categorical columns, from
    :func:`encode_categories` or :func:`apply_categories`) are taken from there.

    Examples
    --------
    >>> import pyarrow as pa, pathlib
    >>> t = pa.table({"a": [1.0, None, 3.0], "b": [4, 5, 6]})
    >>> a, kept = select_columns(t, ["a", "b"], pathlib.Path("t.csv"), dropna=True)
    >>> a.tolist(), kept.tolist()
    ([[1.0, 4.0], [3.0, 6.0]], [True, False, True])
    """
    encoded = encoded or {}
    arr = np.column_stack([encoded[n] if n in encoded else _column(table, n, path) for n in names])
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


def var_types_of(
    features: list[str], ordered: list[str] | None, categorical: list[str] | None
) -> tuple[str | None, dict[str, str]]:
    """``var_types`` for the features from ``--ordered`` and ``--categorical`` (None when every
    feature is continuous) and the categorical columns' kinds; BadInput for a name that is not
    a feature or is in both.

    Examples
    --------
    >>> var_types_of(["x", "colour", "size"], ["size"], ["colour"])
    ('cuo', {'colour': 'u', 'size': 'o'})
    """
    kinds: dict[str, str] = {}
    for flag, names, kind in (("--ordered", ordered, "o"), ("--categorical", categorical, "u")):
        for name in _split_names(names) if names else []:
            if name not in features:
                raise BadInput(
                    f"{flag} '{name}' is not one of the feature columns (--x): {', '.join(features)}"
                )
            if kinds.get(name, kind) != kind:
                raise BadInput(f"column '{name}' is given both --ordered and --categorical; choose one")
            kinds[name] = kind
    if not kinds:
        return None, {}
    vt = "".join(kinds.get(name, "c") for name in features)
    return vt, {name: kinds[name] for name in features if name in kinds}


def _is_text(column: Any) -> bool:
    import pyarrow as pa

    t = column.type
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t))


def _strings(column: Any) -> list[str | None]:
    import pyarrow as pa

    # an empty field is missing, as in a numeric column (pyarrow reads it as "" in a text column)
    return [None if v == "" else v for v in column.cast(pa.string()).to_pylist()]


def encode_categories(
    table: Any, kinds: dict[str, str], path: Path
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The categorical columns (``kinds``: name -> ``"o"`` or ``"u"``) as numbers, and the labels
    of those encoded from text.

    A numeric column is taken as it is (its values are the category codes; ordered columns
    use their differences). An unordered text column is encoded for the user: its distinct
    values sorted, the j-th coded j (missing values, empty fields included, stay missing). An
    ordered text column is refused: sorted text is not the order of the categories
    (``"high" < "low" < "medium"``).

    Examples
    --------
    >>> import pyarrow as pa, pathlib
    >>> t = pa.table({"colour": ["red", "blue", None, "red"], "size": [1, 2, 3, 1]})
    >>> cols, labels = encode_categories(t, {"colour": "u", "size": "o"}, pathlib.Path("t.csv"))
    >>> cols["colour"].tolist(), labels["colour"].tolist(), sorted(labels)
    ([1.0, 0.0, nan, 1.0], ['blue', 'red'], ['colour'])
    """
    columns: dict[str, np.ndarray] = {}
    labels: dict[str, np.ndarray] = {}
    for name, kind in kinds.items():
        col = _find(table, name, path)
        if not _is_text(col):
            columns[name] = _column(table, name, path)
            continue
        codes, distinct = sorted_codes(_strings(col))
        if kind == "o":
            raise BadInput(
                f"column '{name}' is ordered (--ordered) but holds text ({shown_labels(distinct)}): "
                "ordered categories "
                "need numbers in their order, whose differences the Wang-van Ryzin kernel uses "
                "(e.g. low=0, medium=1, high=2); encode them so, or pass the column with "
                "--categorical if its categories have no order"
            )
        columns[name] = codes
        labels[name] = np.array(distinct, dtype=object)
    return columns, labels


def apply_categories(
    table: Any, labels: dict[str, np.ndarray], path: Path
) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    """The text columns a model encoded at fit time, coded by its ``labels`` (``category_labels_``),
    and per column the values not seen in training.

    A value not among the labels gets the code -1, which no training category has: it is
    "different" from every training category, and its weights follow the unordered kernel's
    formula (as for an unseen number). Missing values (empty fields too) stay missing.

    Examples
    --------
    >>> import pyarrow as pa, pathlib
    >>> t = pa.table({"colour": ["red", "green"]})
    >>> cols, unseen = apply_categories(t, {"colour": np.array(["blue", "red"])}, pathlib.Path("t.csv"))
    >>> cols["colour"].tolist(), unseen
    ([1.0, -1.0], {'colour': ['green']})
    """
    columns: dict[str, np.ndarray] = {}
    unseen: dict[str, list[str]] = {}
    for name, known in labels.items():
        code = {str(v): float(j) for j, v in enumerate(known)}
        values = _strings(_find(table, name, path))
        columns[name] = np.array([np.nan if v is None else code.get(v, -1.0) for v in values])
        new = sorted({v for v in values if v is not None and v not in code})
        if new:
            unseen[name] = new
    return columns, unseen


def _check_writable(path: Path, what: str) -> None:
    folder = path.parent
    if not folder.is_dir():
        raise BadInput(f"cannot write {what} '{path}': the folder '{folder}' does not exist")
    if path.is_dir():
        raise BadInput(f"cannot write {what} '{path}': it is a folder")


def _refuse_overwrite(outputs: dict[str, Path], inputs: dict[str, Path]) -> None:
    """Raise BadInput, naming both paths, when an output path is one of the input files.

    ``outputs`` and ``inputs`` map what each path is (for the message) to the path.
    """
    for what_out, out in outputs.items():
        for what_in, inp in inputs.items():
            if same_file(out, inp):
                raise BadInput(
                    f"{what_out} '{out}' is {what_in} '{inp}': refusing to overwrite an input; "
                    "choose another output path"
                )


def _table_writer(path: Path) -> Callable[[Any, Any], None]:
    """The writer of a table to a binary file for ``path``'s extension; BadInput for others."""
    suffix = path.suffix.lower()
    if suffix in _PARQUET:
        from pyarrow import parquet

        return lambda table, f: parquet.write_table(table, f)
    if suffix in _CSV:
        from pyarrow import csv

        options = csv.WriteOptions(delimiter="\t" if suffix == ".tsv" else ",")
        return lambda table, f: csv.write_csv(table, f, write_options=options)
    raise BadInput(f"cannot tell the format of '{path}': use a .csv, .tsv or .parquet name")


def _plot_format(path: Path) -> None:
    from matplotlib.figure import Figure

    kinds = Figure().canvas.get_supported_filetypes()
    if path.suffix.lstrip(".").lower() not in kinds:
        raise BadInput(f"cannot tell the image format of --plot '{path}': use a .png, .svg or .pdf name")


def _load_model(path: Path) -> Any:
    """Load a model file; any way it can be damaged is BadInput naming the file, never a traceback."""
    from nadaraya.persist import load

    if not path.exists():
        raise BadInput(f"model file '{path}' does not exist")
    if path.is_dir():
        raise BadInput(f"model file '{path}' is a folder, not a file")
    try:
        return load(path)
    except (BadInput, ValueError, OSError):  # ModelFileError is a ValueError naming the file
        raise
    except Exception as exc:  # a damaged file must never end in a traceback
        raise BadInput(
            f"cannot load the model file '{path}': it is damaged ({type(exc).__name__}: {exc})"
        ) from None


def _pa_array(values: np.ndarray) -> Any:
    import pyarrow as pa

    return pa.array(values, type=pa.float64())


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


#: ``fit``'s --span and --robust (read by :func:`fit_options`)
Span = Annotated[str | None, typer.Option(help="A nearest-neighbour span in place of --bandwidth: a "
                                          "fraction of the rows in (0, 1], a number of neighbours, cv or "
                                          "aicc (-k tricube --degree 1: LOWESS).")]
Robust = Annotated[int, typer.Option(help="Robustness iterations (statsmodels' it).")]


def fit_options(bandwidth: Any, span: str | None, robust: int) -> dict[str, Any]:
    """``fit``'s --bandwidth, --span and --robust as the estimator's parameters: --span is a
    nearest-neighbour bandwidth (``generalized_nn``: a fraction of the rows in (0, 1], a number of
    neighbours, cv or aicc) in place of --bandwidth; --robust its ``robust_iterations``."""
    if isinstance(robust, bool) or not 0 <= robust <= 100:
        raise BadInput(f"--robust {robust} is not valid; give a number of robustness iterations, 0 to 100")
    out: dict[str, Any] = {"bandwidth": bandwidth, "robust_iterations": robust}
    if span is None:
        return out
    text = span.strip().lower()
    try:
        value: Any = text if text in ("cv", "aicc") else (int(text) if text.isdigit() else float(text))
    except ValueError:
        raise BadInput(f"--span {span!r} is not valid; give a fraction of the rows in (0, 1] (e.g. 0.3), a "
                       "number of neighbours, cv or aicc") from None
    return {**out, "bandwidth": value, "bandwidth_type": "generalized_nn"}


def _check_degree(degree: int) -> None:
    from nadaraya.local.job import MAX_DEGREE

    if not 0 <= degree <= MAX_DEGREE:
        raise BadInput(f"--degree {degree} is not valid; choose 0 (Nadaraya-Watson), 1 (local linear), "
                       f"2 (local quadratic) or up to {MAX_DEGREE}")


def _bandwidths(names: list[str], h: Any, vt: str | None, digits: int = 4) -> str:
    """``x=0.1, lambda colour=0.05``: each feature's bandwidth, or its lambda when categorical."""
    return ", ".join(f"{'lambda ' if vt and vt[j] != 'c' else ''}{n}={v:.{digits}g}"
                     for j, (n, v) in enumerate(zip(names, h)))


def _write_demo_data(split: Any, folder: Path) -> list[Path]:
    """The demo's data as CSV files, for the other commands: the textbook's training points
    (``x``, ``y``), its validation inputs with the true function (``x``, ``truth``), and
    scikit-learn's diabetes data (ten features and ``progression``)."""
    import pyarrow as pa
    from pyarrow import csv

    from nadaraya.datasets import diabetes

    d = diabetes()
    tables = {
        "textbook.csv": pa.table({"x": split.x_train, "y": split.y_train}),
        "textbook-validation.csv": pa.table({"x": split.x_val, "truth": split.y_val}),
        "diabetes.csv": pa.table({**dict(zip(d.feature_names, d.X.T)), d.target_name: d.y}),
    }
    paths = []
    for name, table in tables.items():
        with atomic_write(folder / name, "wb") as f:
            csv.write_csv(table, f)
        paths.append(folder / name)
    return paths


def _unwrapped(doc: str | None) -> str | None:
    """A docstring with each paragraph on one line: rich help keeps the single line breaks of
    every paragraph after the first, which then broke in the middle of the terminal's lines."""
    if doc is None:
        return None
    import inspect

    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n"))


def _name_features(message: str, names: list[str] | None) -> str:
    """Replace the library's "feature 3" by the column's name, "feature 'bmi'"."""
    if not names:
        return message

    def name(m: re.Match[str]) -> str:
        j = int(m.group(1))
        return f"feature '{names[j]}'" if j < len(names) else m.group(0)

    return re.sub(r"\bfeature (\d+)\b", name, message)


#: what the score of each criterion is, for ``select``'s output
_CRITERIA = {"cv": "score (leave-one-out CV, mean squared error)", "aicc": "score (AICc, corrected AIC)"}


def _selection_table(result: Any, names: list[str], vt: str | None = None) -> Any:
    """The chosen bandwidths as a table with one column per feature, named: the bandwidth (a
    categorical column's lambda), Scott's rule (the centre of the search), the interval searched,
    and whether the fit ignores it; with categorical columns, each column's type first."""
    from rich.table import Table

    how = "one bandwidth per feature" if result.per_feature else "one bandwidth for every feature"
    table = Table(title=f"{result.method} bandwidth, {result.kernel} kernel ({how})")
    table.add_column("")
    for name in names:
        table.add_column(name, justify="right")
    types = {"c": "continuous", "o": "ordered", "u": "unordered"}
    rows = (
        *([("type", [types[t] for t in vt])] if vt else []),
        ("bandwidth" if not vt else "bandwidth or lambda", [f"{v:.4g}" for v in result.bandwidth]),
        ("Scott's rule", ["" if np.isnan(v) else f"{v:.4g}" for v in result.rule_of_thumb]),
        ("searched", [f"{lo:.3g} to {hi:.3g}" for lo, hi in result.bounds]),
        ("smoothed out", ["yes" if v else "no" for v in result.smoothed_out]),
    )
    for label, cells in rows:
        table.add_row(label, *cells, style="bold green" if label.startswith("bandwidth") else None)
    return table


def _demo_table(study: Any, name: str, n: int, noise: float) -> Any:
    """The demo's validation MSE of each model as a rich table, the best in bold green."""
    from rich.table import Table

    table = Table(title=f"Validation MSE, {name}, {n} training points, noise {noise}")
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
    return table


def _plot_search(result: Any, names: list[str], path: Path) -> None:
    """Draw a bandwidth search (one panel per feature, four to a row) to an image file."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from nadaraya import plot as plots

    d = len(names) if result.per_feature else 1
    ncols = min(d, 4)
    size = (3.4 * ncols, 2.8 * -(-d // ncols) + 0.5) if d > 1 else (5.5, 3.6)
    fig = Figure(figsize=size, layout="constrained")
    plots.bandwidth_selection(result, feature_names=names, fig=fig, ncols=ncols)
    plots.savefig(fig, path)
