"""File handling of the ``nadaraya`` command: reading tables, picking columns, writing outputs safely."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ._files import same_file

_CSV = (".csv", ".txt", ".tsv")
_PARQUET = (".parquet", ".pq")


class BadInput(Exception):
    """Input the command cannot use; reported in one line with exit code 2."""


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


def _column(table: Any, name: str, path: Path) -> np.ndarray:
    """One column as float64 with NaN for missing values; BadInput naming it when it is missing or text."""
    import pyarrow as pa

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
    from .persist import load

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
