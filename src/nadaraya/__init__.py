"""nadaraya: attention pooling by similarity (Nadaraya-Watson kernel regression)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nadaraya import _compat, kernels
from nadaraya._core.attention import attention_weights
from nadaraya._core.finish import EmptyWindowWarning
from nadaraya._support.config import config_context, get_config, set_config
from nadaraya.pooling import loo_pool, pool

if TYPE_CHECKING:
    from nadaraya.density import ConditionalDensity, KernelDensity
    from nadaraya.estimator import NadarayaWatson
    from nadaraya.inference.bands import Band
    from nadaraya.inference.sigtest import SignificanceTest
    from nadaraya.inference.summary import FitSummary
    from nadaraya.local.job import SingularFitWarning
    from nadaraya.local.lowess import lowess
    from nadaraya.nn import AttentionPoolingRegressor

from nadaraya._version import __version__

_compat.install()

__all__ = [
    "AttentionPoolingRegressor",
    "Band",
    "ConditionalDensity",
    "EmptyWindowWarning",
    "FitSummary",
    "KernelDensity",
    "NadarayaWatson",
    "SignificanceTest",
    "SingularFitWarning",
    "__version__",
    "attention_weights",
    "config_context",
    "get_config",
    "kernels",
    "load",
    "loo_pool",
    "lowess",
    "pool",
    "select_bandwidth",
    "set_config",
]

# Names whose modules pull in optional or heavy dependencies: imported on first access, so
# that `import nadaraya` stays light (no numba, torch, dask, matplotlib or pandas).
# scikit-learn itself imports pandas when it is installed, so the estimator is lazy too.
_LAZY: dict[str, tuple[str, str]] = {
    "NadarayaWatson": ("nadaraya.estimator", "NadarayaWatson"),
    "KernelDensity": ("nadaraya.density._kde", "KernelDensity"),
    "ConditionalDensity": ("nadaraya.density._conditional", "ConditionalDensity"),
    "AttentionPoolingRegressor": ("nadaraya.nn._regressor", "AttentionPoolingRegressor"),
    "load": ("nadaraya.persist", "load"),
    "select_bandwidth": ("nadaraya.bandwidth", "select_bandwidth"),
    "lowess": ("nadaraya.local.lowess", "lowess"),
    "SingularFitWarning": ("nadaraya.local.job", "SingularFitWarning"),
    "FitSummary": ("nadaraya.inference.summary", "FitSummary"),
    "Band": ("nadaraya.inference.bands", "Band"),
    "SignificanceTest": ("nadaraya.inference.sigtest", "SignificanceTest"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'nadaraya' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
