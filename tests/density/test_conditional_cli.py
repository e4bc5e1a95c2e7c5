"""``nadaraya density``: the conditional density's columns and picture, the plain density, and
bad input that leaves no file behind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("typer")
pytest.importorskip("matplotlib")
from pyarrow import csv, parquet  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from nadaraya import ConditionalDensity, KernelDensity  # noqa: E402
from nadaraya.cli import app  # noqa: E402

runner = CliRunner()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, 70)
    y = x + (0.1 + 0.3 * x) * rng.standard_normal(70)
    table = pa.table({"x": x, "y": y, "g": rng.integers(0, 3, 70)})
    path = tmp_path / "data.csv"
    csv.write_csv(table, path)
    return path


def _run(*args: object):  # type: ignore[no-untyped-def]
    return runner.invoke(app, [str(a) for a in args])


def test_conditional_columns_match_the_estimator(data: Path, tmp_path: Path) -> None:
    out, pic = tmp_path / "out.parquet", tmp_path / "pic.png"
    res = _run("density", data, "-x", "x", "-y", "y", "-b", "0.1,0.08", "--quantile", "0.1,0.9",
               "--level", "0.5", "--out", out, "--plot", pic, "-q")
    assert res.exit_code == 0, res.output
    table = parquet.read_table(out)
    src = csv.read_csv(data)
    x, y = src.column("x").to_numpy(), src.column("y").to_numpy()
    cd = ConditionalDensity(bandwidth=[0.1, 0.08]).fit(x, y)
    np.testing.assert_allclose(table.column("pdf_y").to_numpy(), cd.pdf(x, y), rtol=1e-12)
    np.testing.assert_allclose(table.column("cdf_y").to_numpy(), cd.cdf(x, y), rtol=1e-12)
    np.testing.assert_allclose(table.column("quantile_0.9_y").to_numpy(), cd.quantile(x, 0.9), rtol=1e-9)
    np.testing.assert_allclose(table.column("upper_y").to_numpy(), cd.quantile(x, 0.75), rtol=1e-9)
    assert pic.stat().st_size > 1000


def test_at_file_and_plain_density(data: Path, tmp_path: Path) -> None:
    at = tmp_path / "at.csv"
    csv.write_csv(pa.table({"x": [0.2, 0.8]}), at)
    out = tmp_path / "q.csv"
    res = _run("density", data, "-x", "x", "-y", "y", "-b", "0.1,0.08", "--at", at, "--quantile", "0.5",
               "--out", out, "-q")
    assert res.exit_code == 0, res.output
    assert csv.read_csv(out).column_names == ["x", "quantile_0.5_y"]
    res = _run("density", data, "-x", "x,g", "--categorical", "g", "-b", "0.2,0.3", "--out", out)
    assert res.exit_code == 0, res.output
    src = csv.read_csv(data)
    X = np.column_stack([src.column("x").to_numpy(), src.column("g").to_numpy()])
    kde = KernelDensity(bandwidth=[0.2, 0.3], var_types="cu").fit(X)
    np.testing.assert_allclose(csv.read_csv(out).column("log_density").to_numpy(), kde.score_samples(X),
                               rtol=1e-12)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-y", "y", "--level", "1.5"], "--level"),
        (["-y", "y", "--quantile", "0,0.5"], "--quantile"),
        (["--quantile", "0.5"], "need --y"),
        (["-y", "y", "-b", "scott"], "without --y"),
        (["-y", "y,g", "--plot", "PIC"], "--plot draws one continuous"),
        (["-y", "nope"], "column 'nope' is not in"),
        (["-y", "y", "-b", "0.1,-1"], "positive and finite"),
        (["-y", "x"], "both conditioned on"),
        (["-y", "y", "-k", "constant"],
         ("'kernel' parameter of ConditionalDensity", "Got 'constant' instead")),
    ],
)
def test_bad_input_writes_nothing(
    data: Path, tmp_path: Path, args: list[str], message: str | tuple[str, ...]
) -> None:
    out, pic = tmp_path / "out.csv", tmp_path / "pic.png"
    full = ["density", data, "-x", "x", *[pic if a == "PIC" else a for a in args], "--out", out]
    res = _run(*full)
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert all(part in text for part in ((message,) if isinstance(message, str) else message)), text
    assert not out.exists() and not pic.exists()


def test_refuses_to_overwrite_its_input_and_a_failed_picture_removes_the_table(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = _run("density", data, "-x", "x", "-y", "y", "--out", data)
    assert res.exit_code == 2 and "refusing to overwrite" in res.output
    import nadaraya.plot

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("the picture failed")

    monkeypatch.setattr(nadaraya.plot, "conditional_density", broken)
    out, pic = tmp_path / "out.csv", tmp_path / "pic.png"
    res = _run("density", data, "-x", "x", "-y", "y", "-b", "0.1,0.1", "--out", out, "--plot", pic)
    assert res.exit_code == 2 and "the picture failed" in res.output
    assert not out.exists() and not pic.exists()
