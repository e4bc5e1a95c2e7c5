"""Old module paths of release 0.1.0, kept readable so that pickles it wrote still load."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

#: Modules of release 0.1.0 that no longer exist: their new home, and the names that went elsewhere.
MOVED: dict[str, tuple[str, dict[str, str]]] = {
    "nadaraya._attention": ("nadaraya._core.attention", {}),
    "nadaraya._boot_limits": ("nadaraya.inference.limits", {}),
    "nadaraya._bootstrap": ("nadaraya.inference.bootstrap", {}),
    "nadaraya._cli_infer": ("nadaraya.cli._infer", {}),
    "nadaraya._cli_io": ("nadaraya.cli._io", {}),
    "nadaraya._config": ("nadaraya._support.config", {}),
    "nadaraya._dask_empty": ("nadaraya.distributed.empty", {}),
    "nadaraya._dask_far": ("nadaraya.distributed.far", {}),
    "nadaraya._dask_inputs": ("nadaraya.distributed.inputs", {}),
    "nadaraya._dask_pool": ("nadaraya.distributed.pool", {}),
    "nadaraya._encode": ("nadaraya.local.encode", {}),
    "nadaraya._files": ("nadaraya._support.files", {}),
    "nadaraya._fills": ("nadaraya.local.fills", {}),
    "nadaraya._fit": ("nadaraya.local.fit", {
        "Job": "nadaraya.local.job",
        "MAX_DEGREE": "nadaraya.local.job",
        "SingularFitWarning": "nadaraya.local.job",
        "X_EXP_LIMIT": "nadaraya.local.job",
        "_bandwidth": "nadaraya.local.job",
        "as_degree": "nadaraya.local.job",
        "prepare": "nadaraya.local.job",
        "scaled": "nadaraya.local.job",
    }),
    "nadaraya._inference": ("nadaraya.inference.mixin", {
        "Band": "nadaraya.inference.bands",
        "KINDS": "nadaraya.inference.bands",
        "METHODS": "nadaraya.inference.bands",
        "VARIANCES": "nadaraya.inference.training",
        "_Training": "nadaraya.inference.training",
        "_backend": "nadaraya.inference.training",
        "_check": "nadaraya.inference.training",
        "_check_enough": "nadaraya.inference.training",
        "_own_log": "nadaraya.inference.training",
        "_own_partials": "nadaraya.inference.training",
        "_rng": "nadaraya.inference.training",
        "_shape": "nadaraya.inference.bands",
        "_smooth_squares": "nadaraya.inference.training",
        "_unit_fitted": "nadaraya.inference.bands",
        "_unit_predict_std": "nadaraya.inference.bands",
        "_unit_variance": "nadaraya.inference.training",
        "confidence_band": "nadaraya.inference.bands",
        "forget": "nadaraya.inference.training",
        "leverage_scale": "nadaraya.inference.training",
        "noise_variance": "nadaraya.inference.training",
        "predict_std": "nadaraya.inference.bands",
        "residual_scale": "nadaraya.inference.training",
        "training": "nadaraya.inference.training",
        "unit_exponent": "nadaraya.inference.training",
    }),
    "nadaraya._jit": ("nadaraya._support.jit", {}),
    "nadaraya._local": ("nadaraya.local.solve", {}),
    "nadaraya._mixed": ("nadaraya.local.mixed", {}),
    "nadaraya._modelfile": ("nadaraya.persist._file", {}),
    "nadaraya._nearest": ("nadaraya._core.nearest", {}),
    "nadaraya._plot_local": ("nadaraya.report._local", {
        "LOCAL_NAMES": "nadaraya.report._study",
        "LocalCurve": "nadaraya.report._study",
        "ZOOM": "nadaraya.report._study",
        "edge_window": "nadaraya.report._study",
    }),
    "nadaraya._report_html": ("nadaraya.report._html", {}),
    "nadaraya._sigtest": ("nadaraya.inference.sigtest", {}),
    "nadaraya._smoother": ("nadaraya.local.smoother", {}),
    "nadaraya._summary": ("nadaraya.inference.summary", {}),
    "nadaraya._threads": ("nadaraya._support.threads", {}),
    "nadaraya._uncertainty": ("nadaraya.inference.variance", {}),
    "nadaraya._validation": ("nadaraya._support.validation", {}),
    "nadaraya.backends.dask": ("nadaraya.distributed.backend", {}),
    "nadaraya.bandwidth._dask": ("nadaraya.distributed.rules", {}),
    "nadaraya._estimator_parts": ("nadaraya.bandwidth.resolve", {
        "_bandwidth_hint": "nadaraya.bandwidth.resolve",
        "_cv_results": "nadaraya.bandwidth.resolve",
        "_default_lambdas": "nadaraya.bandwidth.resolve",
        "_levels": "nadaraya.local.mixed",
        "_mixed_bandwidth": "nadaraya.bandwidth.resolve",
        "check_device": "nadaraya.backends",
        "fit_dask": "nadaraya.distributed.fit",
        "resolve_bandwidth": "nadaraya.bandwidth.resolve",
    }),
}

#: Names pickled from a module that still exists (its module-level ``__getattr__`` reads this).
LEFT: dict[str, dict[str, str]] = {
    "nadaraya.pooling": {
        "Call": "nadaraya._core.call",
        "EmptyWindowWarning": "nadaraya._core.finish",
        "Fill": "nadaraya._core.finish",
        "_fill_empty": "nadaraya._core.finish",
        "_fill_far": "nadaraya._core.finish",
        "_in_range": "nadaraya._core.call",
        "_report_alone": "nadaraya._core.finish",
        "compute_partials": "nadaraya._core.call",
        "fill_empty": "nadaraya._core.finish",
        "finish": "nadaraya._core.finish",
        "prepare": "nadaraya._core.call",
        "report_empty": "nadaraya._core.finish",
    },
}


def moved_name(module: str, name: str) -> Any:
    """The object ``name`` of the old ``module``, from where it lives now (AttributeError if none).

    Examples
    --------
    >>> moved_name("nadaraya.pooling", "Call").__module__
    'nadaraya._core.call'
    """
    home = LEFT.get(module, {}).get(name)
    if home is None and module in MOVED:
        default, names = MOVED[module]
        home = names.get(name, default)
    if home is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


class _Alias(importlib.abc.Loader, importlib.abc.MetaPathFinder):
    """Finds the old module names of :data:`MOVED` and makes each a module that reads its names
    from their new homes."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: Any) -> types.ModuleType:
        module = types.ModuleType(spec.name, f"Old path of {MOVED[spec.name][0]} (release 0.1.0 pickles).")

        def __getattr__(name: str, _old: str = spec.name) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return moved_name(_old, name)

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install() -> None:
    """Put the old-path finder on :data:`sys.meta_path` once."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
