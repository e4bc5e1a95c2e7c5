"""Safe model files: round trips, and refusal of tampered, truncated, foreign and pickled files."""

from __future__ import annotations

import io
import json
import pickle
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

import nadaraya
from nadaraya._support.files import atomic_write
from nadaraya.persist import FORMAT_VERSION, ModelFileError, load, save


@pytest.fixture
def model() -> nadaraya.NadarayaWatson:
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 5, (40, 2))
    y = np.sin(X[:, 0]) + X[:, 1]
    return nadaraya.NadarayaWatson(kernel="epanechnikov", bandwidth=[0.8, 1.5], empty="nearest").fit(
        X, y, sample_weight=rng.uniform(0.5, 2, 40)
    )


@pytest.fixture
def saved(model: nadaraya.NadarayaWatson, tmp_path: Path) -> Path:
    return model.save(tmp_path / "model.npz")


def _rewrite(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, blob in members.items():
            z.writestr(name, blob)


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def test_round_trip_predicts_identically(model: nadaraya.NadarayaWatson, saved: Path) -> None:
    back = nadaraya.load(saved)
    assert type(back) is type(model)
    assert back.get_params() == {**model.get_params(), "bandwidth": [0.8, 1.5]}
    Xq = np.random.default_rng(2).uniform(-1, 6, (30, 2))
    np.testing.assert_array_equal(back.predict(Xq), model.predict(Xq))
    np.testing.assert_array_equal(back.sample_weight_, model.sample_weight_)
    assert back.backend_ == model.backend_


def test_string_bandwidth_and_feature_names_survive(tmp_path: Path) -> None:
    X = np.linspace(0, 1, 20)[:, None]
    m = nadaraya.NadarayaWatson(bandwidth="silverman").fit(X, X[:, 0] ** 2)
    m.feature_names_in_ = np.asarray(["x"], dtype=object)
    back = load(save(m, tmp_path / "m.bin"))
    assert back.bandwidth == "silverman"
    assert back.feature_names_in_.tolist() == ["x"] and back.feature_names_in_.dtype == object
    np.testing.assert_array_equal(back.bandwidth_, m.bandwidth_)


def test_settings_are_plain_json_with_a_version(saved: Path) -> None:
    settings = json.loads(_members(saved)["settings.json"])
    assert settings["format"] == "nadaraya-model"
    assert settings["version"] == FORMAT_VERSION
    assert settings["class"] == "NadarayaWatson"


def test_unknown_version_is_refused(saved: Path) -> None:
    members = _members(saved)
    settings = json.loads(members["settings.json"])
    settings["version"] = FORMAT_VERSION + 1
    members["settings.json"] = json.dumps(settings).encode()
    _rewrite(saved, members)
    with pytest.raises(ModelFileError, match=f"format version {FORMAT_VERSION + 1};"):
        load(saved)


def test_object_array_is_refused(saved: Path) -> None:
    members = _members(saved)
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    members["X_fit_.npy"] = buf.getvalue()
    _rewrite(saved, members)
    with pytest.raises(ModelFileError, match="has dtype object; only numbers"):
        load(saved)


class _Payload:
    """Unpickling this calls Path.touch on the marker: proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (Path.touch, (str(self.marker),))  # type: ignore[return-value]


def test_pickle_payload_in_an_array_is_never_executed(saved: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    members = _members(saved)
    buf = io.BytesIO()
    np.save(buf, np.array([_Payload(marker)], dtype=object), allow_pickle=True)
    members["y_fit_.npy"] = buf.getvalue()
    _rewrite(saved, members)
    with pytest.raises(ModelFileError):
        load(saved)
    assert not marker.exists()


def test_bare_pickle_file_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "model.npz"
    path.write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(ModelFileError, match="not a nadaraya model"):
        load(path)
    assert not marker.exists()


@pytest.mark.parametrize("keep", [0.3, 0.9])
def test_truncated_file_is_refused(saved: Path, keep: float) -> None:
    blob = saved.read_bytes()
    saved.write_bytes(blob[: int(len(blob) * keep)])
    with pytest.raises(ModelFileError):
        load(saved)


def test_tampered_bytes_are_detected(saved: Path) -> None:
    blob = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as z:
        info = z.getinfo("X_fit_.npy")
    # flip a byte inside the compressed data of a member: the zip CRC no longer matches
    name_len, extra_len = struct.unpack("<HH", bytes(blob[info.header_offset + 26 : info.header_offset + 30]))
    start = info.header_offset + 30 + name_len + extra_len + info.compress_size // 2
    blob[start] ^= 0xFF
    saved.write_bytes(bytes(blob))
    with pytest.raises(ModelFileError):
        load(saved)


@pytest.mark.parametrize(
    "content",
    [b"", b"hello, this is text", b"\x93NUMPY\x01\x00", json.dumps({"format": "nadaraya-model"}).encode()],
)
def test_foreign_files_are_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "foreign.npz"
    path.write_bytes(content)
    with pytest.raises(ModelFileError, match="not a nadaraya model"):
        load(path)


def test_other_zip_or_npz_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plain.npz"
    np.savez(path, a=np.arange(3))
    with pytest.raises(ModelFileError, match=r"no settings\.json"):
        load(path)


def test_foreign_class_or_record_is_refused(saved: Path) -> None:
    members = _members(saved)
    settings = json.loads(members["settings.json"])
    settings["class"] = "os.system"
    members["settings.json"] = json.dumps(settings).encode()
    _rewrite(saved, members)
    with pytest.raises(ModelFileError, match="not a nadaraya model"):
        load(saved)
    settings["class"] = "NadarayaWatson"
    settings["fitted"]["evil_"] = {"__record__": "subprocess:Popen", "fields": {"args": "true"}}
    members["settings.json"] = json.dumps(settings).encode()
    _rewrite(saved, members)
    with pytest.raises(ModelFileError, match="not a nadaraya record type"):
        load(saved)


def test_missing_file_and_unfitted_model(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load(tmp_path / "nope.npz")
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        save(nadaraya.NadarayaWatson(), tmp_path / "m.npz")
    assert not list(tmp_path.iterdir())


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_write(target, "w") as f:
        f.write("half")
        raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    with pytest.raises(OSError, match="cannot write"), atomic_write(tmp_path / "missing" / "x.txt"):
        pass


@pytest.mark.parametrize("bandwidth", [np.array([0.7, 1.2]), np.array(0.9), [1, 2], "scott"])
def test_round_trip_of_every_bandwidth_form_and_several_outputs(tmp_path: Path, bandwidth: object) -> None:
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 5, (25, 2))
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2, X.sum(axis=1)])
    m = nadaraya.NadarayaWatson(bandwidth=bandwidth).fit(X, Y)
    back = load(save(m, tmp_path / "m.npz"))
    Xq = rng.uniform(0, 5, (10, 2))
    np.testing.assert_array_equal(back.predict(Xq), m.predict(Xq))
    assert back.predict(Xq).shape == (10, 3)
    np.testing.assert_array_equal(np.asarray(back.bandwidth), np.asarray(bandwidth))
