"""Densities on the engine's sums: conditional density, CDF and quantiles."""

from ._conditional import ConditionalDensity

__all__ = ["ConditionalDensity"]
