"""The nadaraya command through typer's test runner: each command on CSV and Parquet, and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("typer")
from pyarrow import csv, parquet  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import nadaraya  # noqa: E402
from nadaraya.cli import app  # noqa: E402

runner = CliRunner()


def _table(n: int = 60) -> pa.Table:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 5, n)
    z = rng.normal(size=n)
    return pa.table({
        "age": x, "bmi": z, "target": 2 * np.sin(x) + x + rng.normal(0, 0.3, n),
        "name": [f"p{i}" for i in range(n)],
    })


@pytest.fixture(params=["csv", "parquet"])
def data(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / f"data.{request.param}"
    (csv.write_csv if request.param == "csv" else parquet.write_table)(_table(), path)
    return path


def _read(path: Path) -> pa.Table:
    return parquet.read_table(path) if path.suffix == ".parquet" else csv.read_csv(path)


def _run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_fit_predict_round_trip(data: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.npz"
    r = _run("fit", data, "-x", "age,bmi", "-y", "target", "--bandwidth", "0.5,2", "--model", model, "-q")
    assert r.exit_code == 0, r.output
    for ext in ("csv", "parquet"):
        out = tmp_path / f"pred.{ext}"
        r = _run("predict", "--model", model, data, "--out", out, "--quiet")
        assert r.exit_code == 0, r.output
        got = _read(out)
        src = _table()
        assert got.column_names == [*src.column_names, "predicted_target"]
        assert got.column("name").to_pylist() == src.column("name").to_pylist()
        X = np.column_stack([src.column("age").to_numpy(), src.column("bmi").to_numpy()])
        expected = nadaraya.pool(X, X, src.column("target").to_numpy(), bandwidth=[0.5, 2.0])
        np.testing.assert_allclose(got.column("predicted_target").to_numpy(), expected, rtol=1e-12)


def test_select_prints_the_search_and_the_choice(data: Path, tmp_path: Path) -> None:
    png = tmp_path / "cv.png"
    r = _run("select", data, "-x", "age", "-y", "target", "--plot", png, "-q")
    assert r.exit_code == 0, r.output
    line = next(s for s in r.output.splitlines() if s.startswith("chosen bandwidth"))
    h = float(line.split("age=")[1])
    t = _table()
    x, y = t.column("age").to_numpy(), t.column("target").to_numpy()

    def cv(bw: float) -> float:
        return float(np.mean((nadaraya.loo_pool(x, y, bandwidth=bw) - y) ** 2))

    # the choice is no worse than nearby bandwidths and the rules of thumb
    scott = float(nadaraya.NadarayaWatson(bandwidth="scott").fit(x[:, None], y).bandwidth_[0])
    assert cv(h) <= min(cv(h * 1.3), cv(h / 1.3), cv(scott)) + 1e-12
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_fit_with_cv_bandwidth(data: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.npz"
    r = _run("fit", data, "-x", "age", "-y", "target", "-b", "cv", "--model", model)
    assert r.exit_code == 0, r.output
    assert "saved" in r.output
    assert 0.01 < nadaraya.load(model).bandwidth_[0] < 5


def test_help_shows_an_example_for_every_command() -> None:
    for command in ("demo", "fit", "predict", "select", "bench"):
        r = _run(command, "--help")
        assert r.exit_code == 0
        assert f"Example: nadaraya {command}" in " ".join(r.output.split())


def test_demo_writes_figures_report_and_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nadaraya import report

    real = report.textbook_study
    # a short slider keeps the test fast; the learnable models are tested in test_nn
    def small(split, **kw):
        return real(split, **{**kw, "slider": [0.2, 0.5, 1.0], "learnable": False})

    monkeypatch.setattr(report, "textbook_study", small)
    out = tmp_path / "demo"
    r = _run("demo", "--out", out, "--n", "30", "-q")
    assert r.exit_code == 0, r.output
    assert {"kernels.png", "fit.png", "attention.png", "bandwidth.png", "report.html"} <= {
        p.name for p in out.iterdir()
    }
    assert "average pooling" in r.output and "selected by leave-one-out CV" in r.output
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left
    # the data go along, so that the README's commands run from a checkout
    assert (out / "textbook.csv").read_text().splitlines()[0] == '"x","y"'
    assert len((out / "textbook.csv").read_text().splitlines()) == 31
    model, pred = tmp_path / "model.npz", tmp_path / "predictions.csv"
    assert _run("fit", out / "textbook.csv", "-x", "x", "-y", "y", "--model", model, "-q").exit_code == 0
    r = _run("predict", "--model", model, out / "textbook-validation.csv", "--out", pred, "-q")
    assert r.exit_code == 0, r.output
    assert pred.read_text().splitlines()[0] == '"x","truth","predicted_y"'
    r = _run("select", out / "diabetes.csv", "-x", "bmi,bp,s5", "-y", "progression", "--per-feature", "-q")
    assert r.exit_code == 0 and "chosen bandwidth: bmi=" in r.output, r.output


def test_bench_finds_the_runner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import nadaraya.cli as cli

    calls = []
    monkeypatch.setattr(cli.subprocess, "call", lambda cmd, env=None: calls.append(cmd) or 0)
    r = _run("bench", "engine", "--quick")
    assert r.exit_code == 0, r.output
    assert calls[0][1].endswith("benchmarks/run.py") and calls[0][2:] == ["engine", "--quick"]
    monkeypatch.setattr(cli, "_benchmark_runner", lambda: None)
    r = _run("bench")
    assert r.exit_code == 2 and "needs a source checkout" in r.output


# --- bad input: exit code 2, one line, no output file ------------------------------------------


def _bad(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [s for s in result.output.splitlines() if s.strip()]
    assert len(lines) == 1, result.output
    for f in fragments:
        assert f in lines[0], lines[0]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "data.csv"
    csv.write_csv(_table(), path)
    m = tmp_path / "model.npz"
    assert _run("fit", path, "-x", "age", "-y", "target", "--model", m, "-q").exit_code == 0
    return m


def _write_csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    return path


def test_missing_file(tmp_path: Path) -> None:
    out = tmp_path / "m.npz"
    r = _run("fit", tmp_path / "nope.csv", "-x", "a", "-y", "b", "--model", out)
    _bad(r, "does not exist", "nope.csv")
    assert not out.exists()


def test_misspelt_column_suggests_the_closest(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.npz"
    _bad(_run("fit", data, "-x", "agee", "-y", "target", "--model", out), "'agee'", "did you mean 'age'")
    _bad(_run("fit", data, "-x", "age", "-y", "zzzz", "--model", out), "'zzzz'", "columns are: age")
    assert not out.exists()


def test_non_numeric_column(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.npz"
    _bad(_run("fit", data, "-x", "name", "-y", "target", "--model", out), "'name' is not numeric", "'p0'")
    assert not out.exists()


def test_nan_rows_refused_or_dropped(tmp_path: Path, model: Path) -> None:
    rows = "age,target\n" + "".join(
        f"{'' if i in (3, 7) else i * 0.1},{'nan' if i == 12 else i}\n" for i in range(20)
    )
    path = _write_csv(tmp_path, rows)
    out = tmp_path / "m2.npz"
    _bad(_run("fit", path, "-x", "age", "-y", "target", "--model", out), "3 row(s)", "data rows 4, 8, 13",
         "--dropna")
    assert not out.exists()
    r = _run("fit", path, "-x", "age", "-y", "target", "--model", out, "--dropna")
    assert r.exit_code == 0 and "fitted on 17 rows" in r.output
    pred = tmp_path / "p.csv"
    _bad(_run("predict", "--model", model, path, "--out", pred), "data rows 4, 8")
    assert not pred.exists()
    assert _run("predict", "--model", model, path, "--out", pred, "--dropna", "-q").exit_code == 0
    assert _read(pred).num_rows == 18


def test_empty_data(tmp_path: Path) -> None:
    out = tmp_path / "m.npz"
    _bad(_run("fit", _write_csv(tmp_path, "age,target\n"), "-x", "age", "-y", "target", "--model", out),
         "has no rows")
    _bad(_run("fit", _write_csv(tmp_path, ""), "-x", "age", "-y", "target", "--model", out), "empty")
    _bad(_run("fit", _write_csv(tmp_path, "age,target\n,\n,\n"), "-x", "age", "-y", "target", "--model", out,
              "--dropna"), "no rows", "left")
    assert not out.exists()


def test_unwritable_output(data: Path, tmp_path: Path, model: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    _bad(_run("fit", data, "-x", "age", "-y", "target", "--model", blocker / "m.npz"), "cannot write")
    _bad(_run("predict", "--model", model, data, "--out", tmp_path / "no" / "p.csv"), "cannot write",
         "does not exist")
    _bad(_run("predict", "--model", model, data, "--out", tmp_path / "p.xlsx"), "cannot tell the format")
    _bad(_run("demo", "--out", blocker), "is a file")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted({"a_file", "model.npz", "data.csv", data.name})


def test_bad_options_and_model(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.npz"
    _bad(_run("fit", data, "-x", "age", "-y", "target", "-b", "wide", "--model", out), "--bandwidth 'wide'")
    _bad(_run("fit", data, "-x", "age", "-y", "target", "-b", "-1", "--model", out), "-1")
    _bad(_run("fit", data, "-x", "age", "-y", "target", "-k", "gausian", "--model", out), "gausian")
    assert not out.exists()
    fake = tmp_path / "fake.npz"
    fake.write_text("not a model")
    _bad(_run("predict", "--model", fake, data, "--out", tmp_path / "p.csv"), "not a nadaraya model")
    assert not (tmp_path / "p.csv").exists()
