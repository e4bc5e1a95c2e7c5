"""Kernel density estimation on the pooling engine: :class:`KernelDensity`.

The estimators are imported on first access (they need scikit-learn), so that
:mod:`nadaraya.plot` can draw densities without loading it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nadaraya.density._conditional import ConditionalDensity
    from nadaraya.density._kde import KernelDensity

__all__ = ["ConditionalDensity", "KernelDensity"]

_LAZY = {"ConditionalDensity": "nadaraya.density._conditional", "KernelDensity": "nadaraya.density._kde"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
