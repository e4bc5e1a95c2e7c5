"""Kernel density estimation on the pooling engine: :class:`KernelDensity`."""

from __future__ import annotations

from ._conditional import ConditionalDensity
from ._kde import KernelDensity

__all__ = ["ConditionalDensity", "KernelDensity"]
