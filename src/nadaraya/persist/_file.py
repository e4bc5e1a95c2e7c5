"""Reading a model file safely: the format's limits, its error, and the archive reading and checks of load.

The public names here (the ``MAX_*`` limits, :data:`FORMAT`, :data:`FORMAT_VERSION`,
:data:`READABLE_VERSIONS` and :class:`ModelFileError`) are re-exported by :mod:`nadaraya.persist`,
which documents the guarantees; import them from there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import tokenize
import warnings
import zipfile
import zlib
from typing import IO, Any

import numpy as np

#: The ``format`` field of every model file.
FORMAT = "nadaraya-model"
#: The version this code writes (2: the settings carry a manifest of every array's dtype and shape).
FORMAT_VERSION = 2
#: The versions this code reads; version 1 files (no manifest) take their shapes from the
#: ``.npy`` headers, checked by the same rules.
READABLE_VERSIONS: tuple[int, ...] = (1, 2)
#: Largest ``settings.json`` accepted, in bytes (inflated).
MAX_SETTINGS_BYTES = 16 * 2**20
#: Deepest nesting of lists and objects accepted in ``settings.json`` (a saved model needs about 8).
MAX_JSON_DEPTH = 32
#: Most members a model file may hold (a NadarayaWatson file has at most 12).
MAX_MEMBERS = 64
#: Largest zip central directory accepted, in bytes (read whole by :mod:`zipfile`).
MAX_DIRECTORY_BYTES = 64 * 2**10
#: Largest ``.npy`` header accepted, in bytes (NumPy writes 128 for the arrays of a model).
MAX_NPY_HEADER_BYTES = 4096
#: Default bound on the total bytes of the arrays a load may allocate (``load(max_bytes=...)``).
MAX_MODEL_BYTES = 16 * 2**30

_SETTINGS = "settings.json"
_READ_CHUNK = 4 * 2**20
# Classes a model file may name: name -> module. Nothing outside this table is ever imported.
_CLASSES: dict[str, str] = {"NadarayaWatson": "nadaraya.estimator"}
# Result records (dataclasses) a model file may hold; nothing else is ever constructed.
_RECORDS: dict[str, tuple[str, str]] = {
    "nadaraya.bandwidth:BandwidthSelection": ("nadaraya.bandwidth", "BandwidthSelection"),
}
# Fitted attributes every saved model has (fit sets them all; sample_weight_ may be null).
_REQUIRED = ("n_features_in_", "X_fit_", "y_fit_", "bandwidth_", "sample_weight_")
_TOP_KEYS = frozenset({"format", "version", "class", "params", "fitted", "nadaraya_version", "arrays"})

_F8 = frozenset({"<f8"})
_BOOL = frozenset({"|b1"})
_NUMBERS = frozenset({"<f8", "<f4", "<f2", "<i8", "<i4", "<i2", "|i1", "<u8", "<u4", "<u2", "|u1", "|b1"})
# Every array a class may save, by the name save gives it (its place in the model), with the
# dtypes (NumPy descr) and shapes allowed. Shapes name their dimensions: d is the settings'
# n_features_in_, n the training rows, p the outputs, k the bandwidths tried by a search; a
# dimension takes its value from the first array that has it, in this order.
_ARRAYS: dict[str, dict[str, tuple[frozenset[str], tuple[tuple[str | int, ...], ...]]]] = {
    "NadarayaWatson": {
        "X_fit_": (_F8, (("n", "d"),)),
        "y_fit_": (_F8, (("n",), ("n", "p"))),
        "sample_weight_": (_F8, (("n",),)),
        "bandwidth_": (_F8, (("d",),)),
        "levels_": (frozenset({"<i8"}), (("d",),)),
        "fit_order_": (frozenset({"<i8"}), (("n",),)),
        "robustness_weights_": (_F8, (("n",),)),
        "param.bandwidth": (_NUMBERS, ((), ("d",))),
        # the search record (files from before selection_ keep it as cv_results_, now never saved)
        **{f"{owner}.{name}": spec for owner in ("selection_", "cv_results_") for name, spec in {
            "bandwidth": (_F8, (("d",),)),
            "smoothed_out": (_BOOL, (("d",),)),
            "rule_of_thumb": (_F8, (("d",),)),
            "bounds": (_F8, (("d", 2),)),
            "search.scores": (_F8, (("k",),)),
            "search.bandwidths": (_F8, (("k", "d"),)),
        }.items()},
    }
}


class ModelFileError(ValueError):
    """A model file is not a valid nadaraya model (foreign, truncated, tampered, too large or too new)."""

    __module__ = "nadaraya.persist"  # its public home (re-exported there)


# ---------------------------------------------------------------------------------------------
# decoding of the settings (save's encoding is in persist)


def _decode(value: Any, arrays: dict[str, np.ndarray] | None, key: str, refs: set[str], src: str) -> Any:
    """The Python value of an encoded entry at the place ``key`` (as ``persist._encode`` names it).

    With ``arrays=None`` only checks the structure and collects the array names in ``refs``.
    """
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, dict):
        keys = set(value)
        if keys == {"__array__"}:
            if value["__array__"] != key:
                other = str(value["__array__"])[:60]
                raise ModelFileError(f"{src}: the entry {key!r} refers to the array {other!r}")
            refs.add(key)
            if arrays is None:
                return None
            return arrays[key]
        if keys == {"__float__"} and value["__float__"] in ("nan", "inf", "-inf"):
            return float(value["__float__"])
        if keys == {"__strings__", "dtype"} and value["dtype"] in ("object", "str"):
            items = value["__strings__"]
            if isinstance(items, list) and all(isinstance(v, str) for v in items):
                return np.array(items, dtype=object if value["dtype"] == "object" else str)
        if keys == {"__list__"} and isinstance(value["__list__"], list):
            return [_decode(v, arrays, f"{key}.{i}", refs, src) for i, v in enumerate(value["__list__"])]
        if keys == {"__dict__"} and isinstance(value["__dict__"], dict):
            return {k: _decode(v, arrays, f"{key}.{k}", refs, src) for k, v in value["__dict__"].items()}
        if keys == {"__record__", "fields"} and isinstance(value["fields"], dict):
            record = value["__record__"]
            if not isinstance(record, str) or record not in _RECORDS:
                raise ModelFileError(f"{src}: {key}: {str(record)[:80]!r} is not a nadaraya record type")
            fields = {k: _decode(v, arrays, f"{key}.{k}", refs, src) for k, v in value["fields"].items()}
            return None if arrays is None else _record(value["__record__"], fields, key, src)
    raise ModelFileError(f"{src}: unexpected entry {str(value)[:60]!r} at {key!r}")


def _record(name: Any, fields: dict[str, Any], key: str, src: str) -> Any:
    """Rebuild a result record from :data:`_RECORDS`; nothing else is ever imported or built."""
    import importlib

    if not isinstance(name, str) or name not in _RECORDS:
        raise ModelFileError(f"{src}: {key}: {str(name)[:80]!r} is not a nadaraya record type")
    module, qualname = _RECORDS[name]
    cls = getattr(importlib.import_module(module), qualname)
    expected = {f.name for f in dataclasses.fields(cls) if f.init}
    if set(fields) != expected:
        raise ModelFileError(
            f"{src}: {key}: the fields of {name!r} do not match (missing {sorted(expected - set(fields))}, "
            f"unknown {sorted(set(fields) - expected)[:5]})"
        )
    return cls(**fields)


def _parse_settings(blob: bytes, src: str) -> dict[str, Any]:
    """The settings document: UTF-8 JSON, no duplicate keys, no NaN or inf, at most MAX_JSON_DEPTH deep."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        if len(out) != len(items):
            raise ValueError("duplicate keys in an object")
        return out

    def constant(name: str) -> Any:
        raise ValueError(f"the number {name} is not allowed")

    def number(text: str) -> float:
        x = float(text)
        if not math.isfinite(x):
            raise ValueError(f"the number {text[:20]} is out of range")
        return x

    try:
        settings = json.loads(
            blob.decode("utf-8"), object_pairs_hook=pairs, parse_constant=constant, parse_float=number
        )
    except RecursionError:
        raise ModelFileError(f"{src}: {_SETTINGS} is nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        raise ModelFileError(f"{src}: {_SETTINGS} is not valid JSON ({str(exc)[:200]})") from None
    stack: list[tuple[Any, int]] = [(settings, 1)]
    while stack:
        obj, depth = stack.pop()
        if isinstance(obj, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise ModelFileError(f"{src}: {_SETTINGS} is nested more than {MAX_JSON_DEPTH} deep")
            stack.extend((v, depth + 1) for v in (obj.values() if isinstance(obj, dict) else obj))
    if not isinstance(settings, dict) or settings.get("format") != FORMAT:
        raise ModelFileError(f"{src} is not a nadaraya model file (format field missing)")
    return settings


# ---------------------------------------------------------------------------------------------
# shapes: what the settings imply


def _bind_shapes(
    cls_name: str, shapes: dict[str, tuple[str, tuple[int, ...]]], d: int, src: str, max_bytes: int
) -> int:
    """Check every array's dtype and shape against the class's rules; the total bytes.

    ``shapes`` maps array names to (descr, shape). Raises ModelFileError naming the array.
    """
    rules = _ARRAYS[cls_name]
    unknown = sorted(set(shapes) - set(rules))
    if unknown:
        raise ModelFileError(f"{src}: {unknown[0]!r} is not an array a {cls_name} has")
    dims: dict[str, int] = {"d": d}
    total = 0
    for name, (dtypes, templates) in rules.items():
        if name not in shapes:
            continue
        descr, shape = shapes[name]
        if descr not in dtypes:
            raise ModelFileError(
                f"{src}: the array {name!r} has dtype {descr!r}; allowed: {', '.join(sorted(dtypes))}"
            )
        for template in templates:
            if len(template) == len(shape) and all(
                (t == s) if isinstance(t, int) else (dims.get(t, s) == s) for t, s in zip(template, shape)
            ):
                for t, s in zip(template, shape):
                    if isinstance(t, str):
                        dims.setdefault(t, s)
                break
        else:
            implied = " or ".join(
                "(" + ", ".join(str(dims.get(t, t)) for t in tpl) + ("," if len(tpl) == 1 else "") + ")"
                for tpl in templates
            )
            raise ModelFileError(
                f"{src}: the array {name!r} has shape {tuple(shape)}; the model's settings imply {implied}"
            )
        total += math.prod(shape) * np.dtype(descr).itemsize
    if dims.get("n", 1) < 1:
        raise ModelFileError(f"{src}: the model has no training rows")
    if total > max_bytes:
        raise ModelFileError(
            f"{src}: its arrays declare {total} bytes, more than max_bytes={max_bytes} "
            f"(pass a larger max_bytes to load a model this large)"
        )
    return total


def _manifest(value: Any, src: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The settings' ``arrays`` entry as {name: (descr, shape)}, its types checked."""
    if not isinstance(value, dict):
        raise ModelFileError(f"{src}: the settings' 'arrays' manifest is missing or not an object")
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name, entry in value.items():
        ok = isinstance(entry, dict) and set(entry) == {"dtype", "shape"}
        ok = ok and isinstance(entry["dtype"], str) and entry["dtype"] in _NUMBERS
        ok = ok and isinstance(entry["shape"], list) and len(entry["shape"]) <= 2
        ok = ok and all(type(s) is int and 0 <= s < 2**62 for s in entry["shape"])
        if not ok:
            raise ModelFileError(f"{src}: the manifest entry of {name!r} is not valid: {str(entry)[:80]}")
        out[name] = (entry["dtype"], tuple(entry["shape"]))
    return out


# ---------------------------------------------------------------------------------------------
# reading the archive


class _Limited:
    """A read-only view of a member stream that never returns more than ``limit`` bytes in all."""

    def __init__(self, raw: IO[bytes], limit: int) -> None:
        self.raw, self.limit, self.consumed = raw, limit, 0

    def read(self, n: int = -1) -> bytes:
        left = self.limit - self.consumed
        n = left if n is None or n < 0 else min(n, left)
        if n <= 0:
            return b""
        data = self.raw.read(n)
        self.consumed += len(data)
        return data


# Everything the zip, deflate and .npy parsers raise on bytes they cannot read. Any of these
# while reading a file means the file is damaged; none can come from the checks of this module.
_DAMAGED = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    OverflowError,
    NotImplementedError,
    RuntimeError,  # RecursionError included
    tokenize.TokenError,
    UserWarning,  # numpy's "header needed Python 2 filtering", raised as an error here
)


def _open_zip(f: IO[bytes], size: int, src: str) -> zipfile.ZipFile:
    end = getattr(zipfile, "_EndRecData", None)  # what ZipFile itself uses (zip64 included)
    if end is not None:
        rec = end(f)
        if rec is None:
            raise zipfile.BadZipFile("no end of central directory record")
        if not 0 <= rec[5] <= min(size, MAX_DIRECTORY_BYTES):
            raise ModelFileError(
                f"{src}: its zip directory declares {rec[5]} bytes, more than "
                f"{MAX_DIRECTORY_BYTES} (or than the file); a model file has a few hundred"
            )
    z = zipfile.ZipFile(f)
    infos = z.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ModelFileError(f"{src} holds {len(infos)} members, more than {MAX_MEMBERS}")
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ModelFileError(f"{src} holds the member {dup[:80]!r} more than once")
    for info in infos:
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ModelFileError(
                f"{src}: the member {info.filename[:80]!r} uses compression method {info.compress_type}; "
                "only stored (0) and deflated (8) members are read"
            )
        if info.flag_bits & 0x61:  # 0x01 encrypted, 0x20 patched data, 0x40 strong encryption
            raise ModelFileError(f"{src}: the member {info.filename[:80]!r} is encrypted or patched")
    return z


def _read_settings(z: zipfile.ZipFile, src: str) -> dict[str, Any]:
    try:
        info = z.getinfo(_SETTINGS)
    except KeyError:
        raise ModelFileError(f"{src} is not a nadaraya model file (no {_SETTINGS})") from None
    if info.file_size > MAX_SETTINGS_BYTES:
        raise ModelFileError(
            f"{src}: {_SETTINGS} declares {info.file_size} bytes, more than {MAX_SETTINGS_BYTES}"
        )
    with z.open(info) as raw:
        blob = _Limited(raw, MAX_SETTINGS_BYTES + 1).read()
    if len(blob) != info.file_size:
        raise ModelFileError(
            f"{src}: {_SETTINGS} inflates to {len(blob)} bytes, "
            f"not the {info.file_size} its zip entry declares"
        )
    return _parse_settings(blob, src)


def _read_header(raw: IO[bytes], name: str, src: str) -> tuple[_Limited, str, tuple[int, ...]]:
    """Read a member's .npy header through a capped reader: (reader, descr, shape)."""
    fmt = np.lib.format
    stream = _Limited(raw, 12 + MAX_NPY_HEADER_BYTES)
    version = fmt.read_magic(stream)
    if version not in ((1, 0), (2, 0)):
        raise ModelFileError(f"{src}: the array {name!r} has .npy version {version}; 1.0 and 2.0 are read")
    read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shape, fortran, dtype = read(stream, max_header_size=MAX_NPY_HEADER_BYTES)
    if fortran:
        raise ModelFileError(f"{src}: the array {name!r} is stored in Fortran order; save writes C order")
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise ModelFileError(f"{src}: the array {name!r} has dtype {dtype}; only numbers are read")
    return stream, fmt.dtype_to_descr(dtype), tuple(shape)


def _read_data(
    stream: _Limited, raw: IO[bytes], descr: str, shape: tuple[int, ...], name: str, src: str
) -> np.ndarray:
    """Inflate the data of one member into a new array, never more than its header declares."""
    arr = np.empty(shape, dtype=np.dtype(descr))
    nbytes = arr.nbytes
    stream.limit = stream.consumed + nbytes
    view = memoryview(arr.reshape(-1).view(np.uint8)) if nbytes else memoryview(b"")
    pos = 0
    while pos < nbytes:
        chunk = stream.read(min(_READ_CHUNK, nbytes - pos))
        if not chunk:
            raise ModelFileError(f"{src}: the array {name!r} is truncated ({pos} of {nbytes} bytes)")
        view[pos : pos + len(chunk)] = chunk
        pos += len(chunk)
    if raw.read(1):  # also makes zipfile check the CRC-32 if it has not yet
        raise ModelFileError(f"{src}: the member {name + '.npy'!r} holds more data than its header declares")
    return arr


def _read_model(
    f: IO[bytes], size: int, src: str, max_bytes: int
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The settings and the arrays of a model file, every archive-level check applied."""
    z = _open_zip(f, size, src)
    settings = _read_settings(z, src)
    version = settings.get("version")
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise ModelFileError(
            f"{src} has format version {repr(version)[:20]}; this nadaraya reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))} (save the model again with a matching nadaraya)"
        )
    cls_name = settings.get("class")
    if not isinstance(cls_name, str) or cls_name not in _CLASSES:
        raise ModelFileError(f"{src} names the class {str(cls_name)[:80]!r}, which is not a nadaraya model")
    unknown = set(settings) - _TOP_KEYS
    if unknown:
        raise ModelFileError(f"{src}: the settings hold unknown entries {sorted(unknown)[:5]}")
    params, fitted = settings.get("params"), settings.get("fitted")
    if not isinstance(params, dict) or not isinstance(fitted, dict):
        raise ModelFileError(f"{src}: settings lack 'params' or 'fitted'")
    missing = [k for k in _REQUIRED if k not in fitted]
    if missing:
        raise ModelFileError(f"{src} lacks the fitted attribute {missing[0]!r}")
    d = fitted.get("n_features_in_")
    if type(d) is not int or not 1 <= d < 2**40:
        raise ModelFileError(f"{src}: n_features_in_ must be a positive integer; got {str(d)[:40]!r}")
    refs: set[str] = set()
    for k, v in params.items():
        _decode(v, None, f"param.{k}", refs, src)
    for k, v in fitted.items():
        _decode(v, None, k, refs, src)
    members = {i.filename for i in z.infolist()} - {_SETTINGS}
    wanted = {f"{r}.npy" for r in refs}
    if members - wanted:
        raise ModelFileError(f"{src} holds an unexpected member {sorted(members - wanted)[0][:80]!r}")
    if wanted - members:
        lost = sorted(wanted - members)[0][: -len(".npy")]
        raise ModelFileError(f"{src}: the array {lost!r} is missing from the file")
    manifest = _manifest(settings.get("arrays"), src) if version >= 2 else None
    if manifest is not None:
        if set(manifest) != refs:
            raise ModelFileError(
                f"{src}: the settings' manifest lists {sorted(manifest)[:12]} but the model refers to "
                f"{sorted(refs)[:12]}"
            )
        _bind_shapes(cls_name, manifest, d, src, max_bytes)
    elif "arrays" in settings:
        raise ModelFileError(f"{src}: a version 1 file has no 'arrays' manifest")
    # headers first (nothing inflated beyond MAX_NPY_HEADER_BYTES each), checked, then the data
    with contextlib.ExitStack() as stack:
        opened: dict[str, tuple[IO[bytes], _Limited, str, tuple[int, ...]]] = {}
        for name in sorted(refs):
            info = z.getinfo(f"{name}.npy")
            raw = stack.enter_context(z.open(info))
            stream, descr, shape = _read_header(raw, name, src)
            if manifest is not None and manifest[name] != (descr, shape):
                raise ModelFileError(
                    f"{src}: the array {name!r} is {descr} {shape} in its .npy header, but "
                    f"{manifest[name][0]} {manifest[name][1]} in the settings"
                )
            opened[name] = (raw, stream, descr, shape)
        if manifest is None:
            _bind_shapes(cls_name, {k: (v[2], v[3]) for k, v in opened.items()}, d, src, max_bytes)
        for name, (_, stream, descr, shape) in opened.items():
            declared = z.getinfo(f"{name}.npy").file_size
            expected = stream.consumed + math.prod(shape) * np.dtype(descr).itemsize
            if declared != expected:
                raise ModelFileError(
                    f"{src}: the member {name + '.npy'!r} declares {declared} bytes; "
                    f"its header implies {expected}"
                )
        arrays = {name: _read_data(stream, raw, descr, shape, name, src)
                  for name, (raw, stream, descr, shape) in opened.items()}
    return settings, arrays


# ---------------------------------------------------------------------------------------------
# the model's own rules, shared by save and load


def _check_model(model: Any, src: str) -> None:
    """Validate a model's parameters and fitted attributes as ``fit`` validates its input.

    Raises ModelFileError (naming ``src`` and the attribute) for anything ``fit`` would refuse or
    ``predict`` would fail on.
    """
    from nadaraya import backends
    from nadaraya._support.validation import as_empty, as_points, as_sample_weight, as_tol, as_values
    from nadaraya.backends import check_device
    from nadaraya.bandwidth import METHODS, RULES, BandwidthSelection
    from nadaraya.bandwidth.plugin import PLUGINS
    from nadaraya.bandwidth.resolve import _mixed_bandwidth
    from nadaraya.kernels import get as get_kernel

    def fail(what: str, exc: BaseException | str) -> ModelFileError:
        return ModelFileError(f"{src}: {what}: {exc}")

    f64 = np.dtype(np.float64)
    kernel, empty, backend, bw = model.kernel, model.empty, model.backend, model.bandwidth
    if not isinstance(kernel, str):
        raise fail("kernel", f"must be a kernel name; got {str(kernel)[:60]!r}")
    if not isinstance(empty, str) or not isinstance(backend, str):
        raise fail("empty" if not isinstance(empty, str) else "backend", "must be a string")
    for name, check in (("kernel", lambda: get_kernel(kernel)), ("empty", lambda: as_empty(empty))):
        try:
            check()
        except ValueError as exc:
            raise fail(name, exc) from None
    if backend not in backends.NAMES:
        raise fail("backend", f"{backend!r} is not known; valid names are: {', '.join(backends.NAMES)}")
    for name, check in (("tol", lambda: as_tol(getattr(model, "tol", None))),
                        ("device", lambda: check_device(getattr(model, "device", None), backend))):
        try:
            check()
        except (ValueError, ImportError) as exc:
            raise fail(name, exc) from None
    d = model.n_features_in_
    if type(d) is not int or d < 1:
        raise fail("n_features_in_", f"must be a positive integer; got {str(d)[:40]!r}")
    for name in ("X_fit_", "y_fit_", "bandwidth_"):
        a = getattr(model, name, None)
        if not (isinstance(a, np.ndarray) and a.dtype == f64):
            raise fail(name, f"must be a float64 array; got {type(a).__name__}")
    X, y, h = model.X_fit_, model.y_fit_, model.bandwidth_
    if X.ndim != 2 or X.shape[1] != d:
        raise fail("X_fit_", f"must have shape (n, {d}) (n_features_in_={d}); got {X.shape}")
    try:
        as_points("X_fit_", X, f64, d)
    except ValueError as exc:
        raise ModelFileError(f"{src}: {exc}") from None
    n = X.shape[0]
    if y.ndim not in (1, 2) or y.shape[0] != n:
        raise fail("y_fit_", f"must have {n} rows, as X_fit_ has; got shape {y.shape}")
    try:
        as_values(y, n, f64)
    except ValueError as exc:
        raise fail("y_fit_", exc) from None
    vt, levels, ck = _check_local(model, X, d, fail)
    cont = np.array([t == "c" for t in vt]) if h.shape == (d,) else np.ones(h.shape, dtype=bool)
    if not (h.shape == (d,) and np.isfinite(h[cont]).all() and (h[cont] > 0).all()):
        shown = np.array2string(h, threshold=6)
        raise fail("bandwidth_", f"must be {d} positive finite numbers (lambdas in categorical "
                   f"columns); got {shown}")
    try:
        _mixed_bandwidth(h, vt, levels, ck)
    except ValueError as exc:
        raise fail("bandwidth_", exc) from None
    sw = getattr(model, "sample_weight_", None)
    if sw is not None:
        if not (isinstance(sw, np.ndarray) and sw.dtype == f64 and sw.shape == (n,)):
            raise fail("sample_weight_", f"must be None or a float64 array of shape ({n},)")
        try:
            as_sample_weight(sw, n, f64)
        except ValueError as exc:
            raise fail("sample_weight_", exc) from None
    if isinstance(bw, str):
        if bw not in (names := (*METHODS, *RULES, *PLUGINS)):
            raise fail("bandwidth", f"{bw!r} is not valid; allowed: a number or one of {names}")
    else:
        try:
            given = _mixed_bandwidth(bw, vt, levels, ck)
        except (ValueError, TypeError) as exc:
            raise fail("bandwidth", exc) from None
        if not np.array_equal(given, h) and getattr(model, "bandwidth_type", "fixed") == "fixed":
            raise fail("bandwidth_", "differs from the bandwidth parameter, which fit copies")
    names = getattr(model, "feature_names_in_", None)
    if names is not None and not (
        isinstance(names, np.ndarray) and names.shape == (d,) and all(isinstance(s, str) for s in names)
    ):
        raise fail("feature_names_in_", f"must be {d} strings")
    cv = getattr(model, "selection_", None)
    if cv is not None:
        if not isinstance(cv, BandwidthSelection):
            raise fail("selection_", "must be a BandwidthSelection or None")
        search = cv.search
        ok = isinstance(search, dict) and set(search) == {"bandwidths", "scores", "stages"}
        ok = ok and all(isinstance(getattr(cv, a), np.ndarray) for a in
                        ("bandwidth", "smoothed_out", "rule_of_thumb", "bounds"))
        ok = ok and all(isinstance(search[a], np.ndarray) for a in ("bandwidths", "scores", "stages"))
        ok = ok and search["stages"].shape == search["scores"].shape
        ok = ok and all(isinstance(s, str) for s in search["stages"])
        ok = ok and isinstance(cv.method, str) and isinstance(cv.kernel, str) and isinstance(cv.message, str)
        ok = ok and isinstance(cv.per_feature, bool) and isinstance(cv.converged, bool)
        ok = ok and type(cv.n_passes) is int and isinstance(cv.score, (int, float))
        if not ok:
            raise fail("selection_", "is not a valid bandwidth search record")
    for name in ("backend_", "backend_reason_"):
        if not isinstance(getattr(model, name, ""), str):
            raise fail(name, "must be a string")
    labels = getattr(model, "category_labels_", None)
    if labels is not None and not (
        isinstance(labels, dict) and set(labels) <= {str(v) for v in (range(d) if names is None else names)}
        and all(isinstance(v, np.ndarray) and v.ndim == 1 and v.size > 0 and len(set(v.tolist())) == v.size
                for v in labels.values())
    ):
        raise fail("category_labels_", "must map feature names (or numbers) to arrays of distinct strings")


def _check_local(model: Any, X: np.ndarray, d: int, fail: Any) -> tuple[str, np.ndarray, str]:
    """The local and mixed settings of a model: ``degree``, ``var_types``, ``categorical_kernel``
    valid, ``var_types_`` equal to ``var_types`` and ``levels_`` to the distinct values of the
    categorical columns of ``X_fit_``. Returns ``(var_types_, levels_, categorical_kernel)``."""
    from nadaraya.local.job import as_degree
    from nadaraya.local.mixed import _levels, as_categorical_kernel, as_var_types

    for name, check in (("degree", as_degree), ("var_types", lambda v: as_var_types(v, d)),
                        ("categorical_kernel", as_categorical_kernel)):
        try:
            check(getattr(model, name))
        except ValueError as exc:
            raise fail(name, exc) from None
    vt = as_var_types(model.var_types, d)
    if getattr(model, "var_types_", vt) != vt:
        raise fail("var_types_", f"must be {vt!r}, the var_types parameter that fit copies")
    levels = getattr(model, "levels_", None)
    expected = _levels(X, vt)
    if levels is not None and not (isinstance(levels, np.ndarray) and np.array_equal(levels, expected)):
        raise fail("levels_", "must count the distinct values of each categorical column of X_fit_, "
                   f"{expected.tolist()}")
    return vt, expected, as_categorical_kernel(model.categorical_kernel)
