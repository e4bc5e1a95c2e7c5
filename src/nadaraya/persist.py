"""Safe saving and loading of fitted models (numbers in .npz, settings in JSON), and atomic file writes.

A model file is a NumPy ``.npz`` archive (a zip file) holding only numeric arrays and one
UTF-8 JSON document, ``settings.json``, with the class name, the parameters, the scalar fitted
attributes and a format version. Loading never unpickles: arrays are read with
``allow_pickle=False``, the JSON is parsed with :mod:`json`, and the class is looked up in a
fixed list, so a tampered, truncated or foreign file raises :class:`ModelFileError` instead of
running code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

__all__ = ["FORMAT", "FORMAT_VERSION", "ModelFileError", "atomic_write", "load", "save"]

#: The ``format`` field of every model file.
FORMAT = "nadaraya-model"
#: The version this code writes; files with another version are refused.
FORMAT_VERSION = 1
_SETTINGS = "settings.json"
_MAX_SETTINGS_BYTES = 16 * 2**20
# Classes a model file may name: name -> module. Nothing outside this table is ever imported.
_CLASSES: dict[str, str] = {"NadarayaWatson": "nadaraya.estimator"}


class ModelFileError(ValueError):
    """A model file is not a valid nadaraya model (foreign, truncated, tampered or too new)."""


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path`` and move it onto ``path`` only if the block succeeds.

    Readers never see a half-written file, and a failure leaves no file behind (an existing
    file at ``path`` is kept unchanged).

    Parameters
    ----------
    path : path-like
        The final location; its folder must exist and be writable.
    mode : {"wb", "w"}
        Binary or text (UTF-8).

    Raises
    ------
    OSError
        When the folder does not exist or is not writable (the message names the path).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "hello.txt"
    >>> with atomic_write(target, "w") as f:
    ...     _ = f.write("hi")
    >>> target.read_text()
    'hi'
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w'; got {mode!r}")
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write {str(target)!r}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, mode, **({"encoding": "utf-8", "newline": ""} if mode == "w" else {})) as f:
            yield f
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
    if dataclasses.is_dataclass(value) and cls.__module__.startswith("nadaraya."):
        fields = {f.name: _encode(getattr(value, f.name), arrays, f"{key}.{f.name}")
                  for f in dataclasses.fields(value) if f.init}
        return {"__record__": f"{cls.__module__}:{cls.__qualname__}", "fields": fields}
    raise TypeError(f"{key}: values of type {type(value).__name__} cannot be saved")


def _decode(value: Any, arrays: dict[str, np.ndarray], where: str) -> Any:
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, dict) and len(value) >= 1:
        if "__array__" in value:
            name = value["__array__"]
            if name not in arrays:
                raise ModelFileError(f"{where}: the array {name!r} is missing from the file")
            return arrays[name]
        if "__float__" in value and value["__float__"] in ("nan", "inf", "-inf"):
            return float(value["__float__"])
        if "__strings__" in value:
            return np.array(value["__strings__"], dtype=object if value.get("dtype") == "object" else str)
        if "__list__" in value and isinstance(value["__list__"], list):
            return [_decode(v, arrays, where) for v in value["__list__"]]
        if "__dict__" in value and isinstance(value["__dict__"], dict):
            return {k: _decode(v, arrays, where) for k, v in value["__dict__"].items()}
        if "__record__" in value and isinstance(value.get("fields"), dict):
            return _record(value["__record__"], _decode({"__dict__": value["fields"]}, arrays, where), where)
    raise ModelFileError(f"{where}: unexpected entry {str(value)[:60]!r}")


def _record(name: Any, fields: dict[str, Any], where: str) -> Any:
    """Rebuild a result record (a dataclass defined in nadaraya); nothing else is ever imported."""
    import importlib

    module, _, qualname = str(name).partition(":")
    if not (module.startswith("nadaraya.") and qualname.isidentifier()):
        raise ModelFileError(f"{where}: {str(name)[:80]!r} is not a nadaraya record type")
    try:
        cls = getattr(importlib.import_module(module), qualname)
    except (ImportError, AttributeError):
        raise ModelFileError(f"{where}: unknown record type {name!r}") from None
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ModelFileError(f"{where}: {name!r} is not a nadaraya record type")
    try:
        return cls(**fields)
    except TypeError as exc:
        raise ModelFileError(f"{where}: the fields of {name!r} do not match ({exc})") from None


def save(model: Any, path: str | os.PathLike[str]) -> Path:
    """Save a fitted model to ``path`` in the safe format (atomically).

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
    arrays: dict[str, np.ndarray] = {}
    params = {k: _encode(v, arrays, f"param.{k}") for k, v in model.get_params(deep=False).items()}
    fitted = {
        k: _encode(v, arrays, k)
        for k, v in vars(model).items()
        if k.endswith("_") and not k.startswith("_") and k not in params
    }
    settings = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "class": cls,
        "params": params,
        "fitted": fitted,
    }
    from . import __version__

    settings["nadaraya_version"] = __version__
    blob = json.dumps(settings, indent=1).encode("utf-8")
    buf = io.BytesIO()
    # numeric arrays only (checked by _encode), so np.save never pickles
    np.savez_compressed(buf, **{k: np.ascontiguousarray(v) for k, v in arrays.items()})
    with zipfile.ZipFile(buf, "a", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(_SETTINGS, blob)
    with atomic_write(path, "wb") as f:
        f.write(buf.getvalue())
    return Path(path)


def _read_archive(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except FileNotFoundError:
        raise FileNotFoundError(f"model file {str(path)!r} does not exist") from None
    if head != b"PK\x03\x04":
        raise ModelFileError(f"{str(path)!r} is not a nadaraya model file (not an .npz archive)")
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if _SETTINGS not in names:
                raise ModelFileError(f"{str(path)!r} is not a nadaraya model file (no {_SETTINGS})")
            if z.getinfo(_SETTINGS).file_size > _MAX_SETTINGS_BYTES:
                raise ModelFileError(f"{str(path)!r}: {_SETTINGS} is implausibly large")
            settings = json.loads(z.read(_SETTINGS).decode("utf-8"))
            arrays: dict[str, np.ndarray] = {}
            for name in sorted(names - {_SETTINGS}):
                if not name.endswith(".npy"):
                    raise ModelFileError(f"{str(path)!r} holds an unexpected member {name!r}")
                with z.open(name) as member:
                    arr = np.lib.format.read_array(io.BytesIO(member.read()), allow_pickle=False)
                if arr.dtype.kind not in "biuf":
                    raise ModelFileError(f"{str(path)!r}: array {name!r} has dtype {arr.dtype}; only numbers")
                arrays[name[: -len(".npy")]] = arr
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{str(path)!r} is damaged or truncated ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"{str(path)!r}: {_SETTINGS} is not valid JSON ({exc})") from exc
    except ValueError as exc:  # object arrays (allow_pickle=False), bad .npy headers
        raise ModelFileError(f"{str(path)!r} holds an array that cannot be read safely ({exc})") from exc
    return settings, arrays


def load(path: str | os.PathLike[str]) -> Any:
    """Load a model saved by :func:`save` or ``NadarayaWatson.save``; never executes code from the file.

    Parameters
    ----------
    path : path-like

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
        anything other than numeric arrays, or has an unknown format version.

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
    settings, arrays = _read_archive(p)
    if not isinstance(settings, dict) or settings.get("format") != FORMAT:
        raise ModelFileError(f"{str(p)!r} is not a nadaraya model file (format field missing)")
    version = settings.get("version")
    if version != FORMAT_VERSION:
        raise ModelFileError(
            f"{str(p)!r} has format version {version!r}; this nadaraya reads version {FORMAT_VERSION} "
            "(save the model again with a matching nadaraya)"
        )
    cls_name = settings.get("class")
    if cls_name not in _CLASSES:
        raise ModelFileError(f"{str(p)!r} names the class {cls_name!r}, which is not a nadaraya model")
    params, fitted = settings.get("params"), settings.get("fitted")
    if not isinstance(params, dict) or not isinstance(fitted, dict):
        raise ModelFileError(f"{str(p)!r}: settings lack 'params' or 'fitted'")
    import importlib

    cls = getattr(importlib.import_module(_CLASSES[cls_name]), cls_name)
    known = set(cls().get_params(deep=False))
    unknown = set(params) - known
    if unknown:
        raise ModelFileError(f"{str(p)!r} sets parameters this {cls_name} does not have: {sorted(unknown)}")
    model = cls(**{k: _decode(v, arrays, f"param {k}") for k, v in params.items()})
    for k, v in fitted.items():
        if not (isinstance(k, str) and k.endswith("_") and k.isidentifier() and not k.startswith("_")):
            raise ModelFileError(f"{str(p)!r}: {k!r} is not a fitted attribute name")
        setattr(model, k, _decode(v, arrays, k))
    for required in ("X_fit_", "y_fit_", "bandwidth_"):
        if not isinstance(getattr(model, required, None), np.ndarray):
            raise ModelFileError(f"{str(p)!r} lacks the fitted array {required!r}")
    if model.X_fit_.ndim != 2 or model.y_fit_.shape[0] != model.X_fit_.shape[0]:
        raise ModelFileError(
            f"{str(p)!r}: inconsistent shapes X_fit_ {model.X_fit_.shape}, y_fit_ {model.y_fit_.shape}"
        )
    return model
