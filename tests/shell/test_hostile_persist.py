"""Hostile model files: every damaged, oversized or inconsistent file raises ModelFileError naming it.

Each test builds the damage from a valid saved model (through :mod:`zipfile`, or byte by byte
where zipfile would not write it) and checks that :func:`nadaraya.load` refuses it with
:class:`ModelFileError` before predicting, or, where the damage touched nothing the model uses,
loads a model that predicts exactly as the original. The fuzzer at the end mutates a valid file
a few hundred times, seeded.
"""

from __future__ import annotations

import io
import json
import struct
import time
import tracemalloc
import warnings
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nadaraya
from nadaraya.persist import MAX_JSON_DEPTH, ModelFileError, load

# --------------------------------------------------------------------------------------------
# a fitted model with every kind of member (search record, sample weights), and helpers

QUERIES = np.random.default_rng(5).uniform(0.5, 4.5, (25, 2))


@pytest.fixture(scope="module")
def model() -> nadaraya.NadarayaWatson:
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 5, (30, 2))
    y = np.sin(X[:, 0]) + X[:, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the search may report a bandwidth on its bound
        return nadaraya.NadarayaWatson(kernel="epanechnikov", bandwidth="cv", empty="nearest").fit(
            X, y, sample_weight=rng.uniform(0.5, 2, 30)
        )


@pytest.fixture
def saved(model: nadaraya.NadarayaWatson, tmp_path: Path) -> Path:
    return model.save(tmp_path / "model.npz")


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def _write(
    path: Path, members: dict[str, bytes] | list[tuple[str, bytes]], method: int = zipfile.ZIP_DEFLATED
) -> None:
    items = members.items() if isinstance(members, dict) else members
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about duplicate names
        with zipfile.ZipFile(path, "w", compression=method) as z:
            for name, blob in items:
                z.writestr(name, blob)


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=True)
    return buf.getvalue()


def _edit(path: Path, change: Callable[[dict[str, Any], dict[str, bytes]], None]) -> None:
    """Rewrite ``path`` after ``change(settings, members)`` (a valid zip again)."""
    members = _members(path)
    settings = json.loads(members["settings.json"])
    change(settings, members)
    members["settings.json"] = json.dumps(settings).encode()
    _write(path, members)


def _put_array(path: Path, name: str, arr: np.ndarray) -> None:
    """Replace an array, and its manifest entry, so that the settings declare it as it is."""

    def change(settings: dict[str, Any], members: dict[str, bytes]) -> None:
        members[f"{name}.npy"] = _npy(arr)
        if "arrays" in settings:
            descr = np.lib.format.dtype_to_descr(arr.dtype)
            settings["arrays"][name] = {"dtype": descr, "shape": list(arr.shape)}

    _edit(path, change)


def _refused(path: Path, match: str | None = None) -> ModelFileError:
    with pytest.raises(ModelFileError, match=match) as info:
        load(path)
    assert str(path) in str(info.value), "the message names the file"
    return info.value


def _raw_zip(entries: list[dict[str, Any]], comment: bytes = b"") -> bytes:
    """A zip archive written byte by byte. Each entry: name, data (as stored), method, crc,
    size (inflated, as declared), and optionally flags."""
    out, central = bytearray(), bytearray()
    for e in entries:
        name, data, flags = e["name"].encode(), e["data"], e.get("flags", 0)
        offset = len(out)
        fields = (flags, e["method"], 0, 0x21, e["crc"], len(data), e["size"], len(name))
        out += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, *fields, 0) + name + data
        central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, *fields, 0, 0, 0, 0, 0, offset) + name
    count = len(entries)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, len(central), len(out), len(comment))
    return bytes(out + central + end + comment)


def _deflate(blob: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(blob) + c.flush()


def _entries(path: Path) -> list[dict[str, Any]]:
    """The members of a saved file as _raw_zip entries (deflated, true sizes and CRCs)."""
    return [
        {"name": n, "data": _deflate(b), "method": 8, "crc": zlib.crc32(b), "size": len(b)}
        for n, b in _members(path).items()
    ]


def _predicts_like(loaded: Any, model: nadaraya.NadarayaWatson) -> None:
    """A loaded model predicts exactly as the original where it holds the same model, and as a
    model fitted afresh from what it holds where a valid edit changed it."""
    same = (
        (loaded.kernel, loaded.empty, loaded.backend) == (model.kernel, model.empty, model.backend)
        and all(
            np.array_equal(getattr(loaded, a), getattr(model, a))
            for a in ("X_fit_", "y_fit_", "bandwidth_", "sample_weight_")
        )
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = loaded.predict(QUERIES)
        if same:
            np.testing.assert_array_equal(got, model.predict(QUERIES))
            return
        fresh = nadaraya.NadarayaWatson(
            kernel=loaded.kernel, bandwidth=loaded.bandwidth_, empty=loaded.empty, backend="reference"
        ).fit(loaded.X_fit_, loaded.y_fit_, sample_weight=loaded.sample_weight_)
        np.testing.assert_allclose(got, fresh.predict(QUERIES), rtol=1e-12, atol=0, equal_nan=True)


def _peak_bytes(action: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        action()
    except ModelFileError:
        pass
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


# --------------------------------------------------------------------------------------------
# the archive: compression, encryption, members, sizes


def test_round_trip_with_search_record_and_weights(model: nadaraya.NadarayaWatson, saved: Path) -> None:
    back = load(saved)
    np.testing.assert_array_equal(back.predict(QUERIES), model.predict(QUERIES))
    assert back.selection_.search["stages"].tolist() == model.selection_.search["stages"].tolist()
    np.testing.assert_array_equal(back.selection_.bounds, model.selection_.bounds)


def test_bit_flips_in_compressed_data_never_escape(model: nadaraya.NadarayaWatson, saved: Path) -> None:
    # before: about one flip in nine raised a bare zlib.error
    blob = saved.read_bytes()
    spans = []
    with zipfile.ZipFile(saved) as z:
        for info in z.infolist():
            at = info.header_offset
            name_len, extra_len = struct.unpack("<HH", blob[at + 26 : at + 30])
            start = info.header_offset + 30 + name_len + extra_len
            spans.extend(range(start, start + info.compress_size))
    rng = np.random.default_rng(11)
    for k, pos in enumerate(rng.choice(spans, size=120, replace=False)):
        damaged = bytearray(blob)
        damaged[pos] ^= 1 << int(rng.integers(8))
        path = saved.with_name(f"flip{k}.npz")
        path.write_bytes(bytes(damaged))
        try:
            back = load(path)
        except ModelFileError as exc:
            assert str(path) in str(exc)
        else:  # a flip past the end of a member's last block changes nothing read
            _predicts_like(back, model)


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_other_compression_methods_are_refused(saved: Path, method: int) -> None:
    # before: loaded (bzip2 and lzma inflate without a bound on each step)
    _write(saved, _members(saved), method=method)
    _refused(saved, f"compression method {method}")


def test_unknown_compression_method_is_refused(saved: Path) -> None:
    # before: NotImplementedError
    entries = _entries(saved)
    entries[1]["method"] = 99
    saved.write_bytes(_raw_zip(entries))
    _refused(saved, "compression method 99")


def test_encrypted_flag_is_refused(saved: Path) -> None:
    # before: RuntimeError (password required)
    entries = _entries(saved)
    entries[-1]["flags"] = 0x1
    saved.write_bytes(_raw_zip(entries))
    _refused(saved, "encrypted")


def test_unknown_member_is_refused_unread(saved: Path) -> None:
    # before: any extra .npy member was read (and ignored)
    members = _members(saved)
    members["evil.npy"] = _npy(np.zeros(3))
    _write(saved, members)
    _refused(saved, "unexpected member 'evil.npy'")


def test_duplicate_member_is_refused(saved: Path) -> None:
    # before: the last copy won silently
    members = list(_members(saved).items())
    members.append(("y_fit_.npy", _npy(np.zeros(30))))
    _write(saved, members)
    _refused(saved, "more than once")


def test_missing_member_is_refused(saved: Path) -> None:
    members = _members(saved)
    del members["y_fit_.npy"]
    _write(saved, members)
    _refused(saved, "'y_fit_' is missing")


def _zeros_member(header: bytes, zeros: int) -> dict[str, Any]:
    """A member of ``header`` then ``zeros`` zero bytes, deflated in 1 MiB blocks (a few KiB
    for hundreds of MiB), with the true CRC and size."""
    mib = 2**20
    assert zeros % mib == 0
    first = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = first.compress(header) + first.flush(zlib.Z_FULL_FLUSH)
    one = block.compress(bytes(mib)) + block.flush(zlib.Z_FULL_FLUSH)
    data += one * (zeros // mib) + zlib.compressobj(9, zlib.DEFLATED, -15).flush()
    crc, chunk = zlib.crc32(header), bytes(mib)
    for _ in range(zeros // mib):
        crc = zlib.crc32(chunk, crc)
    return {"data": data, "method": 8, "crc": crc, "size": len(header) + zeros}


def test_member_larger_than_the_settings_imply_is_refused_unread(saved: Path) -> None:
    # before: a file of a few hundred KiB with a 256 MiB X_fit_ was inflated whole (peak > 512 MiB)
    header = _npy(np.zeros((2**24, 2)))[:128]
    assert header.endswith(b"\n") and len(header) == 128
    entries = [e for e in _entries(saved) if e["name"] != "X_fit_.npy"]
    entries.append({"name": "X_fit_.npy", **_zeros_member(header, 2**28)})
    saved.write_bytes(_raw_zip(entries))
    assert saved.stat().st_size < 2**20
    _refused(saved, r"'X_fit_' is <f8 \(16777216, 2\) in its .npy header, but <f8 \(30, 2\)")
    assert _peak_bytes(lambda: load(saved)) < 16 * 2**20


def test_zip_bomb_behind_a_valid_header_is_refused_uninflated(saved: Path) -> None:
    # before: the 256 MiB after the array's data were inflated (and ignored); the model loaded
    members = _members(saved)
    entries = [e for e in _entries(saved) if e["name"] != "y_fit_.npy"]
    entries.append({"name": "y_fit_.npy", **_zeros_member(members["y_fit_.npy"], 2**28)})
    saved.write_bytes(_raw_zip(entries))
    _refused(saved, "member 'y_fit_.npy' declares 268435824 bytes; its header implies 368")
    assert _peak_bytes(lambda: load(saved)) < 16 * 2**20


def test_declared_size_that_lies_is_refused(saved: Path) -> None:
    # before: the zip's declared size was trusted as a bound only, and the model loaded
    entries = _entries(saved)
    x = next(e for e in entries if e["name"] == "X_fit_.npy")
    x["size"] = 2**32 - 1
    saved.write_bytes(_raw_zip(entries))
    _refused(saved, "member 'X_fit_.npy' declares 4294967295 bytes; its header implies 608")


def test_npy_header_declaring_2_to_the_40_elements_is_refused(saved: Path) -> None:
    # before: MemoryError (or an allocation of 8 TiB)
    members = _members(saved)
    text = "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 1), }".ljust(117) + "\n"
    header = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1")
    assert len(header) == 128
    members["X_fit_.npy"] = header + members["X_fit_.npy"][128:]
    _write(saved, members)
    _refused(saved, "1099511627776")


def test_version_1_file_without_manifest_still_loads_and_is_checked(
    model: nadaraya.NadarayaWatson, saved: Path
) -> None:
    def as_v1(settings: dict[str, Any], members: dict[str, bytes]) -> None:
        settings["version"] = 1
        settings.pop("arrays", None)

    _edit(saved, as_v1)
    _predicts_like(load(saved), model)
    # without a manifest the headers must still agree with each other and with n_features_in_
    members = _members(saved)
    members["y_fit_.npy"] = _npy(np.zeros(2**16))
    _write(saved, members)
    _refused(saved, r"'y_fit_' has shape \(65536,\); the model's settings imply \(30,\) or \(30, p\)")


def test_max_bytes_bounds_what_a_load_allocates(saved: Path) -> None:
    # the arrays this model holds (the search's record of every bandwidth it scored among them)
    with np.load(saved, allow_pickle=False) as z:
        need = sum(a.nbytes for a in (z[name] for name in z.files) if isinstance(a, np.ndarray))
    with pytest.raises(ModelFileError, match=f"declare {need} bytes, more than max_bytes={need - 1}"):
        load(saved, max_bytes=need - 1)
    load(saved, max_bytes=need)


def test_directory_is_refused(tmp_path: Path) -> None:
    _refused(tmp_path, "not a regular file")


# --------------------------------------------------------------------------------------------
# the settings document


def test_deeply_nested_json_is_refused(saved: Path) -> None:
    # before: RecursionError
    members = _members(saved)
    text = members["settings.json"].decode()
    deep = '{"__list__": [' * 100_000 + "]}" * 100_000
    members["settings.json"] = text.replace('"backend_": ', f'"junk_": {deep}, "backend_": ', 1).encode()
    _write(saved, members)
    _refused(saved, "nested")


def test_moderately_nested_json_is_refused_by_the_depth_limit(saved: Path) -> None:
    members = _members(saved)
    text = members["settings.json"].decode()
    deep = '{"__list__": [' * MAX_JSON_DEPTH + "1" + "]}" * MAX_JSON_DEPTH
    members["settings.json"] = text.replace('"backend_": ', f'"junk_": {deep}, "backend_": ', 1).encode()
    _write(saved, members)
    _refused(saved, f"nested more than {MAX_JSON_DEPTH} deep")


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ('"empty": "nearest"', '"empty": "nearest", "empty": "nan"', "duplicate keys"),
        ('"n_passes": ', '"n_passes": NaN, "x": ', "NaN is not allowed"),
        ('"n_passes": ', '"n_passes": 1e999, "x": ', "out of range"),
    ],
)
def test_json_duplicates_and_non_finite_numbers_are_refused(
    saved: Path, old: str, new: str, match: str
) -> None:
    members = _members(saved)
    text = members["settings.json"].decode()
    assert old in text
    members["settings.json"] = text.replace(old, new, 1).encode()
    _write(saved, members)
    _refused(saved, match)


def test_settings_that_are_not_utf8_are_refused(saved: Path) -> None:
    members = _members(saved)
    members["settings.json"] = members["settings.json"].replace(b'"nearest"', b'"n\xe9arest"')
    _write(saved, members)
    _refused(saved, "not valid JSON")


def test_record_outside_the_allowlist_is_refused(saved: Path) -> None:
    # before: any dataclass of any nadaraya module was imported and built
    def change(settings: dict[str, Any], members: dict[str, bytes]) -> None:
        settings["fitted"]["kernel_"] = {"__record__": "nadaraya.kernels:Kernel", "fields": {}}

    _edit(saved, change)
    _refused(saved, "not a nadaraya record type")


def test_array_reference_at_the_wrong_place_is_refused(saved: Path) -> None:
    def change(settings: dict[str, Any], members: dict[str, bytes]) -> None:
        settings["fitted"]["X_fit_"] = {"__array__": "y_fit_"}

    _edit(saved, change)
    _refused(saved, "the entry 'X_fit_' refers to the array 'y_fit_'")


# --------------------------------------------------------------------------------------------
# the model's own rules: dtypes, shapes, values, settings (refused at load, not at predict)


@pytest.mark.parametrize(
    "arr",
    [
        np.zeros((30, 2), dtype=np.float32),
        np.zeros((30, 2), dtype=np.int64),
        np.zeros((30, 2), dtype=">f8"),
        np.zeros((30, 2), dtype=np.complex128),
        np.zeros(30, dtype=[("a", "<f8"), ("b", "<f8")]),
        np.asfortranarray(np.zeros((30, 2))),
    ],
    ids=["float32", "int64", "big-endian", "complex", "structured", "fortran"],
)
def test_wrong_dtypes_are_refused(saved: Path, arr: np.ndarray) -> None:
    # before: float32, int64 and big-endian X_fit_ loaded
    _put_array(saved, "X_fit_", arr)
    _refused(saved, "'X_fit_'")


@pytest.mark.parametrize(
    ("name", "arr", "match"),
    [
        ("X_fit_", np.ones((30, 3)), r"'X_fit_' has shape \(30, 3\); the model's settings imply \(n, 2\)"),
        ("X_fit_", np.ones((30,)), r"'X_fit_' has shape \(30,\)"),
        ("y_fit_", np.ones(29), r"'y_fit_' has shape \(29,\); the model's settings imply \(30,\) or \(30, p"),
        ("sample_weight_", np.ones(31), r"'sample_weight_' has shape \(31,\)"),
        ("bandwidth_", np.ones(3), r"'bandwidth_' has shape \(3,\); the model's settings imply \(2,\)"),
        ("selection_.search.bandwidths", np.ones((4, 3)), r"'selection_.search.bandwidths' has shape"),
    ],
)
def test_wrong_shapes_are_refused(saved: Path, name: str, arr: np.ndarray, match: str) -> None:
    # before: X_fit_ with 3 columns, 31 sample weights or 3 bandwidths loaded and failed at predict
    _put_array(saved, name, arr)
    _refused(saved, match)


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("X_fit_", np.nan, r"X_fit_ contains NaN or inf"),
        ("X_fit_", np.inf, r"X_fit_ contains NaN or inf"),
        ("y_fit_", np.nan, r"y_fit_: .*NaN or inf"),
        ("y_fit_", -np.inf, r"y_fit_: .*NaN or inf"),
        ("bandwidth_", np.nan, r"bandwidth_: must be 2 positive finite numbers"),
        ("bandwidth_", 0.0, r"bandwidth_: must be 2 positive finite numbers"),
        ("sample_weight_", -1.0, r"sample_weight_: .*non-negative"),
        ("sample_weight_", np.inf, r"sample_weight_: .*finite"),
    ],
)
def test_non_finite_or_invalid_values_are_refused(
    model: nadaraya.NadarayaWatson, saved: Path, name: str, value: float, match: str
) -> None:
    # before: the model loaded and failed (or returned NaN) only at predict
    arr = np.array(getattr(model, name), copy=True)
    arr.flat[3 % arr.size] = value
    _put_array(saved, name, arr)
    _refused(saved, match)


def test_all_zero_sample_weights_are_refused(model: nadaraya.NadarayaWatson, saved: Path) -> None:
    _put_array(saved, "sample_weight_", np.zeros(30))
    _refused(saved, "sample_weight_: .*zero everywhere")


@pytest.mark.parametrize(
    ("param", "value", "match"),
    [
        ("kernel", "gausian", "kernel: kernel='gausian' is not a known kernel"),
        ("kernel", 3, "kernel: must be a kernel name"),
        ("empty", "never", "empty: empty='never' is not valid"),
        ("backend", "gpu9", "backend: 'gpu9' is not known"),
        ("bandwidth", "scot", "bandwidth: 'scot' is not valid"),
        ("bandwidth", -1.0, "bandwidth: bandwidth must be positive and finite"),
        ("bandwidth", {"__list__": [1.0, 2.0, 3.0]}, "bandwidth: bandwidth must be a scalar or have one"),
        ("bandwidth", 0.5, "bandwidth_: differs from the bandwidth parameter"),
        ("tol", 5.0, "tol: tol must be None .exact. or a number in"),
        ("tol", "1e-8", "tol: tol must be None"),
        ("device", "gpu", "device: device='gpu' is not a torch device name"),
    ],
)
def test_invalid_settings_are_refused_at_load(saved: Path, param: str, value: Any, match: str) -> None:
    # before: an unknown kernel name loaded and failed only at predict; the others loaded
    def change(settings: dict[str, Any], members: dict[str, bytes]) -> None:
        settings["params"][param] = value

    _edit(saved, change)
    _refused(saved, match)


@pytest.mark.parametrize(
    ("attr", "value", "match"),
    [
        ("n_features_in_", 3, r"'X_fit_' has shape \(30, 2\); the model's settings imply \(n, 3\)"),
        ("n_features_in_", True, "n_features_in_ must be a positive integer"),
        ("n_features_in_", 0, "n_features_in_ must be a positive integer"),
        ("feature_names_in_", {"__strings__": ["a"], "dtype": "object"}, "feature_names_in_: must be 2"),
        ("backend_", 1, "backend_: must be a string"),
    ],
)
def test_invalid_fitted_attributes_are_refused(saved: Path, attr: str, value: Any, match: str) -> None:
    def change(settings: dict[str, Any], members: dict[str, bytes]) -> None:
        settings["fitted"][attr] = value

    _edit(saved, change)
    _refused(saved, match)


def test_missing_sample_weight_entry_is_refused(saved: Path) -> None:
    # before: the file loaded as an unweighted model, predicting differently
    def change(settings: dict[str, Any], members: dict[str, bytes]) -> None:
        del settings["fitted"]["sample_weight_"]
        settings.get("arrays", {}).pop("sample_weight_", None)
        del members["sample_weight_.npy"]

    _edit(saved, change)
    _refused(saved, "lacks the fitted attribute 'sample_weight_'")


# --------------------------------------------------------------------------------------------
# saving: a model load would refuse is never written; a failed save leaves no file


def test_save_refuses_a_model_load_would_refuse(model: nadaraya.NadarayaWatson, tmp_path: Path) -> None:
    # before: the model was written, and its file failed only at predict
    import copy

    broken = copy.deepcopy(model)
    broken.X_fit_ = broken.X_fit_.copy()
    broken.X_fit_[0, 0] = np.nan
    target = tmp_path / "m.npz"
    target.write_bytes(b"old")
    with pytest.raises(ValueError, match=r"cannot save to .*m\.npz.*X_fit_ contains NaN"):
        broken.save(target)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]


def test_save_refuses_an_array_without_a_size_rule(model: nadaraya.NadarayaWatson, tmp_path: Path) -> None:
    import copy

    odd = copy.deepcopy(model)
    odd.extra_ = np.zeros(5)
    with pytest.raises(TypeError, match="'extra_' is not an array a NadarayaWatson has"):
        odd.save(tmp_path / "m.npz")
    assert not list(tmp_path.iterdir())


def test_failed_save_midway_leaves_no_file(
    model: nadaraya.NadarayaWatson, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "m.npz"
    target.write_bytes(b"old")
    real = np.lib.format.write_array
    calls = []

    def failing(fp: Any, arr: np.ndarray, *args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(fp, arr, *args, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", failing)
    with pytest.raises(OSError, match="No space left"):
        model.save(target)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]


# --------------------------------------------------------------------------------------------
# the fuzzer


def _flip(rng: np.random.Generator, blob: bytes, members: dict[str, bytes]) -> tuple[bytes, str]:
    pos = int(rng.integers(len(blob)))
    out = bytearray(blob)
    out[pos] ^= 1 << int(rng.integers(8))
    return bytes(out), f"bit flip at {pos}"


def _byte(rng: np.random.Generator, blob: bytes, members: dict[str, bytes]) -> tuple[bytes, str]:
    pos = int(rng.integers(len(blob)))
    out = bytearray(blob)
    out[pos] = int(rng.choice([0, 0xFF, int(rng.integers(256))]))
    return bytes(out), f"byte set at {pos}"


def _truncate(rng: np.random.Generator, blob: bytes, members: dict[str, bytes]) -> tuple[bytes, str]:
    at = int(rng.integers(len(blob)))
    return blob[:at], f"truncated at {at}"


def _append(rng: np.random.Generator, blob: bytes, members: dict[str, bytes]) -> tuple[bytes, str]:
    tail = rng.bytes(int(rng.integers(1, 64)))
    return blob + tail, f"{len(tail)} bytes appended"


def _zip_of(items: list[tuple[str, bytes]], comment: bytes = b"") -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, data in items:
                z.writestr(name, data)
            z.comment = comment
    return buf.getvalue()


def _members_op(rng: np.random.Generator, blob: bytes, members: dict[str, bytes]) -> tuple[bytes, str]:
    items = list(members.items())
    names = [n for n, _ in items]
    op = str(rng.choice(["swap", "rename", "drop", "duplicate", "reorder", "comment", "stored"]))
    i, j = (int(v) for v in rng.choice(len(items), size=2, replace=False))
    if op == "swap":
        items[i], items[j] = (items[i][0], items[j][1]), (items[j][0], items[i][1])
    elif op == "rename":
        others = ["X_fit.npy", "x_fit_.npy", "evil.npy", "settings.JSON", "../X_fit_.npy"]
        new = str(rng.choice([*names, *others]))
        items[i] = (new, items[i][1])
    elif op == "drop":
        del items[i]
    elif op == "duplicate":
        items.append((items[i][0], items[j][1]))
    elif op == "reorder":
        order = rng.permutation(len(items))
        items = [items[k] for k in order]
    elif op == "comment":
        return _zip_of(items, comment=rng.bytes(int(rng.integers(1, 200)))), "zip comment"
    else:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
            for name, data in items:
                z.writestr(name, data)
        return buf.getvalue(), "members stored uncompressed"
    return _zip_of(items), f"members: {op} {names[i]} / {names[j]}"


_VALUES: list[Any] = [
    None, True, False, 0, -1, 2, 3, 1.5, -0.0, 1e308, 2**70, "", "gaussian", "tophat", "gausian", "nan",
    "scott", "cv", "reference", "X_fit_", {"__float__": "nan"}, {"__float__": "inf"}, {"__list__": []},
    {"__list__": [0.5, 0.5]}, {"__array__": "X_fit_"}, {"__array__": "y_fit_"}, [], {}, [1, 2], "x" * 5000,
    {"__strings__": ["a", "b"], "dtype": "object"}, {"__record__": "os:system", "fields": {}},
    {"dtype": "<f8", "shape": [30, 2]}, {"dtype": "<f8", "shape": [2**40]}, {"dtype": "|O", "shape": [30]},
]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _settings_op(rng: np.random.Generator, blob: bytes, members: dict[str, bytes]) -> tuple[bytes, str]:
    settings = json.loads(members["settings.json"])
    paths = [p for p in _paths(settings) if p]
    path = paths[int(rng.integers(len(paths)))]
    parent = settings
    for k in path[:-1]:
        parent = parent[k]
    op = str(rng.choice(["replace", "replace", "delete", "add"]))
    value = _VALUES[int(rng.integers(len(_VALUES)))]
    if op == "replace":
        parent[path[-1]] = value
    elif op == "delete":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[str(rng.choice(["extra_", "zzz", "__array__", "kernel", "__list__"]))] = value
    else:
        parent.append(value)
    out = dict(members)
    out["settings.json"] = json.dumps(settings).encode()
    return _zip_of(list(out.items())), f"settings: {op} {'/'.join(map(str, path))} -> {str(value)[:40]}"


def _npy_op(rng: np.random.Generator, blob: bytes, members: dict[str, bytes]) -> tuple[bytes, str]:
    """A byte of one .npy member changed before zipping (the CRC then matches the damage)."""
    name = str(rng.choice([n for n in members if n.endswith(".npy")]))
    data = bytearray(members[name])
    pos = int(rng.integers(min(len(data), 140))) if rng.random() < 0.7 else int(rng.integers(len(data)))
    data[pos] = int(rng.integers(256))
    out = dict(members)
    out[name] = bytes(data)
    return _zip_of(list(out.items())), f"{name} byte {pos} set (valid CRC)"


MUTATIONS: list[Callable[[np.random.Generator, bytes, dict[str, bytes]], tuple[bytes, str]]] = [
    _flip, _flip, _flip, _byte, _truncate, _append, _members_op, _members_op, _settings_op, _settings_op,
    _settings_op, _npy_op, _npy_op,
]


def test_fuzzed_model_files_load_correctly_or_raise_model_file_error(
    model: nadaraya.NadarayaWatson, saved: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(20240612)
    blob, members = saved.read_bytes(), _members(saved)
    outcomes = {"refused": 0, "loaded": 0}
    for case in range(390):
        data, what = MUTATIONS[case % len(MUTATIONS)](rng, blob, members)
        path = tmp_path / f"case{case}.npz"
        path.write_bytes(data)
        start = time.perf_counter()
        try:
            back = load(path)
        except ModelFileError as exc:
            assert str(path) in str(exc), f"case {case} ({what}): the message does not name the file: {exc}"
            outcomes["refused"] += 1
        except Exception as exc:  # the property under test: nothing else escapes
            pytest.fail(f"case {case} ({what}) raised {type(exc).__name__}: {exc}")
        else:
            outcomes["loaded"] += 1
            try:
                _predicts_like(back, model)
            except Exception as exc:
                pytest.fail(f"case {case} ({what}) loaded but predicts wrongly: {type(exc).__name__}: {exc}")
        assert time.perf_counter() - start < 2.0, f"case {case} ({what}) took too long"
        path.unlink()
    # both outcomes occur: the mutations reach past the zip's checksums into the model's rules
    assert outcomes["refused"] > 200 and outcomes["loaded"] > 10, outcomes
