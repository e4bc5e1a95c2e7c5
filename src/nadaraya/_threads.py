"""Thread pools: numba's and torch's in one process (placeholder, filled in below)."""

from __future__ import annotations


def configure() -> None:
    """Set up numba's threading before its first parallel loop."""
