"""Kernel density estimation on the pooling engine: :class:`KernelDensity`."""

from __future__ import annotations

from ._kde import KernelDensity

__all__ = ["KernelDensity"]
