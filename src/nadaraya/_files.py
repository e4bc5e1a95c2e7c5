"""File helpers of the support layer: atomic writes (used by model files, figures, the report and the CLI)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write"]


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path`` and move it onto ``path`` only if the block succeeds.

    Readers never see a half-written file, and a failure leaves no file behind (an existing
    file at ``path`` is kept unchanged).

    Parameters
    ----------
    path : path-like
        The final location; its folder must exist and be writable.
    mode : {"wb", "w"}
        Binary or text (UTF-8).

    Raises
    ------
    ValueError
        When ``mode`` is neither ``"wb"`` nor ``"w"``.
    OSError
        When the folder does not exist or is not writable (the message names the path).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "hello.txt"
    >>> with atomic_write(target, "w") as f:
    ...     _ = f.write("hi")
    >>> target.read_text()
    'hi'
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w'; got {mode!r}")
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write {str(target)!r}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, mode, **({"encoding": "utf-8", "newline": ""} if mode == "w" else {})) as f:
            yield f
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
