"""Safe saving and loading of fitted models (numbers in .npz, settings in JSON).

A model file is a zip archive in NumPy's ``.npz`` layout: one UTF-8 JSON document,
``settings.json`` (the format and its version, the class name, the parameters, the scalar
fitted attributes, and a manifest giving the dtype and shape of every array), and one ``.npy``
member per numeric array.

Guarantees of :func:`load`
--------------------------
*Nothing in a file is executed.* Arrays are read with NumPy's header parser and never
unpickled (``allow_pickle=False``; object, complex, structured, big-endian and Fortran-ordered
arrays are refused); the settings are parsed with :mod:`json`; the class comes from a fixed
table (``NadarayaWatson``) and the only result record rebuilt is
:class:`nadaraya.bandwidth.BandwidthSelection` (the model's ``selection_``; files written before
it was named so hold it as ``cv_results_`` and load into ``selection_``, and ``cv_results_``, the
search as a dict of arrays, is derived from it, never saved). No module is imported by a name in
the file.

*Every damaged, foreign or hostile file raises* :class:`ModelFileError` *(a ValueError) whose
message names the file.* The checks, in order, all before any array data is inflated:

* the file is a regular file starting with a zip header; its central directory is at most
  :data:`MAX_DIRECTORY_BYTES` and holds at most :data:`MAX_MEMBERS` members, without duplicate
  names; every member is stored or deflated (other compression methods are refused: bzip2 and
  lzma cannot be inflated in bounded steps) and not encrypted;
* ``settings.json`` is at most :data:`MAX_SETTINGS_BYTES`, valid UTF-8 JSON without duplicate
  keys, ``NaN`` or infinite numbers, nested at most :data:`MAX_JSON_DEPTH` deep; its format,
  version (:data:`READABLE_VERSIONS`), class, parameter names and value types are checked;
* the members are exactly ``settings.json`` and the arrays the settings refer to, each at the
  place its name says, each a known array of the class (unknown members are refused unread);
* every array's dtype and shape come from the class's own rules: ``X_fit_`` is (n, d) float64
  with d = ``n_features_in_``, ``y_fit_`` is (n,) or (n, p), ``sample_weight_`` (n,),
  ``bandwidth_`` (d,), the bandwidth search's arrays (d,), (d, 2), (k, d) and (k,); the
  settings' manifest, each ``.npy`` header (read first, at most :data:`MAX_NPY_HEADER_BYTES`)
  and the zip's declared size must all agree (version 1 files, written before the manifest,
  take the shapes from their headers under the same rules), and the total is at most
  ``max_bytes`` (default :data:`MAX_MODEL_BYTES`).

Data are then inflated through a reader that stops at the size the header declares (the zip's
own sizes are not trusted alone: a member that inflates to more, or to less, is refused), so
loading a file allocates at most the arrays its settings declare, plus :data:`MAX_SETTINGS_BYTES`
and one read buffer; the zip's CRC-32 of every member read is checked.

Finally the model is validated as ``fit`` validates its input: the kernel name (through
:func:`nadaraya.kernels.get`), ``empty``, ``backend``, and the bandwidth parameter must be
valid; ``degree``, ``var_types`` and ``categorical_kernel`` valid, ``levels_`` equal to the
distinct values of each categorical column of ``X_fit_`` (files written before mixed data get
``degree=0``, every column continuous); ``X_fit_`` and ``y_fit_`` finite with matching rows;
``fit_order_`` a permutation of the training rows (None in files written before it was kept);
``bandwidth_`` positive and finite in the continuous columns, each categorical column's lambda
in its range (and equal to the bandwidth parameter when that is a number); the CLI's
``category_labels_`` distinct strings per named feature; sample weights finite,
non-negative and not all zero. So a model that loads does not fail at ``predict`` for a
reason its file holds.

:func:`save` refuses (ValueError or TypeError, before writing anything) a model that
:func:`load` would refuse, and writes atomically: a failed save leaves no file, and an
existing file at the path is replaced only by a complete one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from nadaraya._support.files import atomic_write
from nadaraya._version import __version__
from nadaraya.persist._file import (
    _CLASSES,
    _DAMAGED,
    _RECORDS,
    _SETTINGS,
    FORMAT,
    FORMAT_VERSION,
    MAX_DIRECTORY_BYTES,
    MAX_JSON_DEPTH,
    MAX_MEMBERS,
    MAX_MODEL_BYTES,
    MAX_NPY_HEADER_BYTES,
    MAX_SETTINGS_BYTES,
    READABLE_VERSIONS,
    ModelFileError,
    _bind_shapes,
    _check_model,
    _decode,
    _read_model,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_DIRECTORY_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_MEMBERS",
    "MAX_MODEL_BYTES",
    "MAX_NPY_HEADER_BYTES",
    "MAX_SETTINGS_BYTES",
    "READABLE_VERSIONS",
    "ModelFileError",
    "load",
    "save",
]


# ---------------------------------------------------------------------------------------------
# encoding of the settings (load's decoding is in _modelfile)


def _encode(value: Any, arrays: dict[str, np.ndarray], key: str) -> Any:
    """A JSON-able form of ``value``; numeric arrays go to ``arrays`` and are referenced by name."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        item = value.item() if isinstance(value, np.generic) else value
        if isinstance(item, float) and not np.isfinite(item):
            return {"__float__": repr(item)}
        return item
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf":
            arrays[key] = value
            return {"__array__": key}
        if value.dtype.kind in "OU" and all(isinstance(v, str) for v in value.ravel()):
            return {"__strings__": value.tolist(), "dtype": "object" if value.dtype.kind == "O" else "str"}
        raise TypeError(f"{key}: arrays of dtype {value.dtype} cannot be saved")
    if isinstance(value, (list, tuple)):
        return {"__list__": [_encode(v, arrays, f"{key}.{i}") for i, v in enumerate(value)]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"__dict__": {k: _encode(v, arrays, f"{key}.{k}") for k, v in value.items()}}
    cls = type(value)
    record = f"{cls.__module__}:{cls.__qualname__}"
    if dataclasses.is_dataclass(value) and record in _RECORDS:
        fields = {f.name: _encode(getattr(value, f.name), arrays, f"{key}.{f.name}")
                  for f in dataclasses.fields(value) if f.init}
        return {"__record__": record, "fields": fields}
    raise TypeError(f"{key}: values of type {type(value).__name__} cannot be saved")


# ---------------------------------------------------------------------------------------------
# the public functions


def save(model: Any, path: str | os.PathLike[str]) -> Path:
    """Save a fitted model to ``path`` in the safe format (atomically).

    The model is checked first by the rules :func:`load` applies, so a file is written only if
    it loads; a failure leaves no file (and an existing file at ``path`` unchanged).

    Parameters
    ----------
    model : NadarayaWatson
        A fitted estimator.
    path : path-like
        Any name; ``.npz`` is conventional. It is written exactly as given.

    Returns
    -------
    Path
        The path written.

    Raises
    ------
    TypeError
        When the model is not a class that can be saved, or holds a value that cannot be.
    ValueError
        When the model's fitted state is not one :func:`load` accepts (e.g. NaN in ``X_fit_``
        set after ``fit``); the message names the attribute.
    OSError
        When the folder does not exist or is not writable.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from nadaraya import NadarayaWatson
    >>> from nadaraya.persist import load, save
    >>> m = NadarayaWatson(bandwidth=0.5).fit([[0.0], [1.0], [2.0]], [0.0, 1.0, 4.0])
    >>> p = save(m, pathlib.Path(tempfile.mkdtemp()) / "model.npz")
    >>> bool((load(p).predict([[1.5]]) == m.predict([[1.5]])).all())
    True
    """
    from sklearn.utils.validation import check_is_fitted

    cls = type(model).__name__
    if cls not in _CLASSES:
        raise TypeError(f"model must be one of {', '.join(_CLASSES)}; got {cls}")
    check_is_fitted(model)
    where = f"cannot save to {str(path)!r}"
    try:
        _check_model(model, where)
        check_saved(model, where)
    except ModelFileError as exc:
        raise ValueError(str(exc)) from None
    arrays: dict[str, np.ndarray] = {}
    params = {k: _encode(v, arrays, f"param.{k}") for k, v in model.get_params(deep=False).items()}
    fitted = {
        k: _encode(v, arrays, k)
        for k, v in vars(model).items()
        if k.endswith("_") and not k.startswith("_") and k not in params
    }
    arrays = {k: np.asarray(v, order="C") for k, v in arrays.items()}  # (ascontiguousarray makes 0-d 1-d)
    manifest = {k: (np.lib.format.dtype_to_descr(v.dtype), v.shape) for k, v in arrays.items()}
    try:
        _bind_shapes(cls, manifest, model.n_features_in_, where, 2**62)  # load's max_bytes is the reader's
    except ModelFileError as exc:
        raise TypeError(f"{exc} (_modelfile._ARRAYS lists the arrays a model file may hold)") from None
    settings = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "class": cls,
        "params": params,
        "fitted": fitted,
        "arrays": {k: {"dtype": descr, "shape": list(shape)} for k, (descr, shape) in manifest.items()},
        "nadaraya_version": __version__,
    }
    blob = json.dumps(settings, indent=1, allow_nan=False).encode("utf-8")
    with atomic_write(path, "wb") as f, zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(_SETTINGS, blob)
        for name, arr in arrays.items():
            with z.open(f"{name}.npy", "w", force_zip64=arr.nbytes > 2**30) as member:
                np.lib.format.write_array(member, arr, version=(1, 0), allow_pickle=False)
    return Path(path)


def load(path: str | os.PathLike[str], *, max_bytes: int = MAX_MODEL_BYTES) -> Any:
    """Load a model saved by :func:`save` or ``NadarayaWatson.save``; never executes code from the file.

    Every check listed in :mod:`nadaraya.persist` runs; array data are inflated only after
    every header agrees with the settings, through a reader capped at the declared size.

    Parameters
    ----------
    path : path-like
    max_bytes : int, default MAX_MODEL_BYTES (16 GiB)
        The most bytes of arrays the file may declare (a model with n rows and d features
        holds about ``8 n (d + 2)``); files declaring more are refused before reading them.

    Returns
    -------
    NadarayaWatson
        Fitted, predicting exactly as the saved model did.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ModelFileError
        (a ValueError) When the file is not a nadaraya model, is truncated or altered, holds
        anything other than the numeric arrays of the model, declares more than ``max_bytes``,
        holds settings ``fit`` would refuse (kernel, bandwidth, NaN or inf data), or has an
        unknown format version. The message names the file.
    PermissionError
        When the file cannot be read.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import nadaraya
    >>> m = nadaraya.NadarayaWatson(bandwidth=1.0).fit([[0.0], [2.0]], [1.0, 3.0])
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.npz"
    >>> _ = m.save(p)
    >>> nadaraya.load(p).bandwidth_.tolist()
    [1.0]
    """
    p = Path(path)
    src = repr(str(p))
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise FileNotFoundError(f"model file {src} does not exist") from None
    if not stat.S_ISREG(st.st_mode):
        raise ModelFileError(f"{src} is not a nadaraya model file (not a regular file)")
    with open(p, "rb") as f:
        if f.read(4) != b"PK\x03\x04":
            raise ModelFileError(f"{src} is not a nadaraya model file (not an .npz archive)")
        f.seek(0)
        try:
            settings, arrays = _read_model(f, st.st_size, src, max_bytes)
        except ModelFileError:
            raise
        except _DAMAGED as exc:
            why = f"{type(exc).__name__}: {str(exc)[:200]}"
            raise ModelFileError(f"{src} is damaged or truncated ({why})") from None
    import importlib

    cls_name = settings["class"]
    cls = getattr(importlib.import_module(_CLASSES[cls_name]), cls_name)
    params, fitted = settings["params"], settings["fitted"]
    known = set(cls().get_params(deep=False))
    unknown = set(params) - known
    if unknown:
        raise ModelFileError(f"{src} sets parameters this {cls_name} does not have: {sorted(unknown)[:5]}")
    refs: set[str] = set()
    model = cls(**{k: _decode(v, arrays, f"param.{k}", refs, src) for k, v in params.items()})
    if "cv_results_" in fitted and "selection_" in fitted:
        raise ModelFileError(f"{src} holds both 'selection_' and 'cv_results_'; a model file holds one")
    for k, v in fitted.items():
        if not (k.endswith("_") and k.isidentifier() and not k.startswith("_")):
            raise ModelFileError(f"{src}: {k[:60]!r} is not a fitted attribute name")
        # files written before the search record moved to selection_ hold it as cv_results_,
        # which is now derived from selection_ (a property: never set)
        setattr(model, "selection_" if k == "cv_results_" else k, _decode(v, arrays, k, refs, src))
    if not hasattr(model, "selection_"):  # files from before the search record was kept
        model.selection_ = None
    d = model.n_features_in_
    if not hasattr(model, "var_types_") and type(d) is int:  # files from before mixed data
        model.var_types_ = "c" * d if model.var_types is None else model.var_types
    if not hasattr(model, "levels_") and isinstance(getattr(model, "X_fit_", None), np.ndarray):
        from nadaraya.local.mixed import _levels, as_var_types

        try:
            model.levels_ = _levels(model.X_fit_, as_var_types(model.var_types_, model.X_fit_.shape[1]))
        except (ValueError, IndexError) as exc:
            raise ModelFileError(f"{src}: var_types: {exc}") from None
    for required in ("X_fit_", "y_fit_", "bandwidth_"):
        if not isinstance(getattr(model, required, None), np.ndarray):
            raise ModelFileError(f"{src} lacks the fitted array {required!r}")
    order, n = getattr(model, "fit_order_", None), model.X_fit_.shape[0]
    if order is not None and not (isinstance(order, np.ndarray) and order.shape == (n,)
                                  and np.array_equal(np.sort(order), np.arange(n))):
        raise ModelFileError(f"{src}: fit_order_ must be None or a permutation of the {n} training rows")
    model.fit_order_ = order  # None in files from before it was kept
    _check_model(model, src)
    check_saved(model, src)
    return model


def check_saved(model: Any, src: str) -> None:
    """A saved or loaded model's ``bandwidth_type``, ``robust_iterations``, ``k`` and
    ``robustness_weights_`` as ``fit`` leaves them; ModelFileError (naming ``src``) otherwise."""
    from nadaraya.bandwidth import METHODS
    from nadaraya.inference.robustness import as_robust_iterations
    from nadaraya.local.neighbours import as_bandwidth_type, as_k

    n, d = model.X_fit_.shape
    try:
        kind = as_bandwidth_type(getattr(model, "bandwidth_type", "fixed"))
        as_robust_iterations(getattr(model, "robust_iterations", 0))
        bw, k = model.bandwidth, model.bandwidth_
        given = kind != "fixed" and not (isinstance(bw, str) and bw in METHODS)
        if given and not np.array_equal(as_k(bw, n, d, kind), k):
            raise ValueError("bandwidth_: differs from the k the bandwidth parameter gives")
        if kind != "fixed" and not np.array_equal(as_k(k.astype(np.int64), n, d, kind), k):
            raise ValueError("bandwidth_: must hold whole numbers of neighbours")
        r = getattr(model, "robustness_weights_", None)
        ok = isinstance(r, np.ndarray) and r.shape == (n,) and bool(((r >= 0) & (r <= 1)).all())
        if r is not None and not ok:
            raise ValueError(f"robustness_weights_: must be None or {n} numbers in [0, 1]")
    except ValueError as exc:
        raise ModelFileError(f"{src}: {exc}") from None
