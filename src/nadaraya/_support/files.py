"""File helpers of the support layer: atomic writes, the same-file test, folders created and removed."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write", "missing_folders", "remove_created", "same_file"]


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
        When the folder does not exist or is not writable, or a write fails (the disk is full,
        the file too large): the message names the path.

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
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None and str(target) not in str(exc):
            # a write that failed (disk full, file too large) names the file it was writing
            raise OSError(exc.errno, f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc
        raise


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file.

    Equal real paths (symbolic links resolved) or, for hard links and case-insensitive file
    systems, the same device and inode. A path that does not exist names no file.

    Examples
    --------
    >>> import os, pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "a").write_text("x")
    >>> os.link(d / "a", d / "b")
    >>> same_file(d / "a", d / "b"), same_file(d / "a", d / "c")
    (True, False)
    """
    try:
        if os.path.realpath(a) == os.path.realpath(b):
            return True
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def missing_folders(folder: str | os.PathLike[str]) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> [p.relative_to(d).as_posix() for p in missing_folders(d / "x" / "y")]
    ['x/y', 'x']
    """
    missing = []
    path = Path(os.path.abspath(folder))
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def remove_created(folders: list[Path]) -> None:
    """Remove the folders :func:`missing_folders` listed, once a caller has created them.

    The first (deepest) goes with everything in it; each parent only when empty, so nothing
    the caller did not create is removed. Errors are ignored.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> created = missing_folders(d / "x" / "y")
    >>> (d / "x" / "y").mkdir(parents=True); _ = (d / "x" / "y" / "f").write_text("f")
    >>> remove_created(created); list(d.iterdir())
    []
    """
    for i, folder in enumerate(folders):
        with contextlib.suppress(OSError):
            if i == 0:
                shutil.rmtree(folder)
            else:
                folder.rmdir()  # a parent: only when empty
