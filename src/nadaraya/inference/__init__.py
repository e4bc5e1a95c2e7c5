"""Inference for fitted models: standard errors, confidence bands, significance tests and the fit summary."""

from .bands import Band
from .sigtest import SignificanceTest
from .summary import FitSummary

__all__ = ["Band", "FitSummary", "SignificanceTest"]
