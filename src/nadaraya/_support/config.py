"""Global settings: the working-memory budget that bounds every backend's scratch space."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["config_context", "get_config", "set_config"]

_DEFAULTS: dict[str, Any] = {"working_memory": 256}
_local = threading.local()


def _state() -> dict[str, Any]:
    if not hasattr(_local, "config"):
        _local.config = dict(_DEFAULTS)
    return _local.config  # type: ignore[no-any-return]


def get_config() -> dict[str, Any]:
    """Current settings, as a copy.

    ``working_memory`` (MiB): the most scratch memory one call may allocate for its blocks
    of pairwise terms (default 256). Inputs and outputs are not counted.

    Examples
    --------
    >>> import nadaraya
    >>> nadaraya.get_config()["working_memory"]
    256
    """
    return dict(_state())


def set_config(*, working_memory: float | None = None) -> None:
    """Change settings for this thread.

    Parameters
    ----------
    working_memory : float, optional
        Scratch budget in MiB, at least 1.

    Examples
    --------
    >>> import nadaraya
    >>> nadaraya.set_config(working_memory=128)
    >>> nadaraya.get_config()["working_memory"]
    128
    >>> nadaraya.set_config(working_memory=256)
    """
    if working_memory is not None:
        wm = float(working_memory)
        if not wm >= 1:
            raise ValueError(f"working_memory must be at least 1 (MiB); got {working_memory!r}")
        _state()["working_memory"] = working_memory


@contextlib.contextmanager
def config_context(*, working_memory: float | None = None) -> Iterator[None]:
    """Temporarily change settings inside a ``with`` block.

    Examples
    --------
    >>> import nadaraya
    >>> with nadaraya.config_context(working_memory=16):
    ...     nadaraya.get_config()["working_memory"]
    16
    """
    old = get_config()
    set_config(working_memory=working_memory)
    try:
        yield
    finally:
        _state().update(old)
