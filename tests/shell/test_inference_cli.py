"""The command's inference: ``predict --std/--band`` columns and ``test``'s table, against the library."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("typer")
from pyarrow import csv  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import nadaraya  # noqa: E402
from nadaraya.cli import app  # noqa: E402

# the saved model records its column names; the library is called here on plain arrays
pytestmark = pytest.mark.filterwarnings("ignore:X does not have valid feature names")
runner = CliRunner()
N = 80
BW = "0.4,1.5"


def _run(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def _table() -> pa.Table:
    rng = np.random.default_rng(11)
    x = rng.uniform(0, 5, N)
    z = rng.normal(size=N)
    # heteroscedastic noise, and a second target, so that the two variance rules differ
    y = 2 * np.sin(x) + rng.normal(0, 0.1 + 0.1 * x, N)
    y2 = x + rng.normal(0, 0.5, N)
    return pa.table({"x": x, "z": z, "y": y, "y2": y2, "id": [f"r{i}" for i in range(N)]})


def _X(t: pa.Table) -> np.ndarray:
    return np.column_stack([t.column("x").to_numpy(), t.column("z").to_numpy()])


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "d.csv"
    csv.write_csv(_table(), path)
    return path


def _fit(data: Path, tmp_path: Path, targets: str = "y", degree: int = 0) -> Path:
    model = tmp_path / f"m{degree}{targets.replace(',', '')}.npz"
    r = _run("fit", data, "-x", "x,z", "-y", targets, "-b", BW, "--degree", degree, "-m", model, "-q")
    assert r.exit_code == 0, r.output
    return model


def _digest(*paths: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("variance", [None, "homoscedastic", "heteroscedastic"])
def test_std_column_is_the_models_standard_error(data: Path, tmp_path: Path, degree: int,
                                                 variance: str | None) -> None:
    model = _fit(data, tmp_path, degree=degree)
    out = tmp_path / "p.csv"
    rule = ["--variance", variance] if variance else []
    r = _run("predict", data, "-m", model, "-o", out, "--std", *rule, "-q")
    assert r.exit_code == 0, r.output
    got = csv.read_csv(out)
    assert got.column_names == [*_table().column_names, "predicted_y", "std_y"]
    est = nadaraya.load(model)
    X = _X(_table())
    _, std = est.predict(X, return_std=True, variance=variance or "heteroscedastic")
    np.testing.assert_allclose(got.column("std_y").to_numpy(), std, rtol=1e-12)
    np.testing.assert_allclose(got.column("predicted_y").to_numpy(), est.predict(X), rtol=1e-12, atol=1e-14)
    assert np.all(std > 0)


def test_the_variance_rule_changes_the_column(data: Path, tmp_path: Path) -> None:
    """--variance reaches the library: the two rules give different standard errors here."""
    model = _fit(data, tmp_path)
    cols = {}
    for rule in ("homoscedastic", "heteroscedastic"):
        out = tmp_path / f"{rule}.csv"
        assert _run("predict", data, "-m", model, "-o", out, "--std", "--variance", rule, "-q").exit_code == 0
        cols[rule] = csv.read_csv(out).column("std_y").to_numpy()
    assert np.max(np.abs(cols["homoscedastic"] / cols["heteroscedastic"] - 1)) > 0.05


@pytest.mark.parametrize(
    ("method", "simultaneous"),
    [("asymptotic", False), ("asymptotic", True), ("bootstrap", False), ("bootstrap", True), ("rbc", False)],
)
def test_band_columns_are_the_confidence_band(data: Path, tmp_path: Path, method: str,
                                              simultaneous: bool) -> None:
    model = _fit(data, tmp_path, degree=1)
    out = tmp_path / "p.parquet"
    args = ["--band", "0.9", "--band-method", method, "--n-boot", "59", "--seed", "3"]
    args += ["--simultaneous"] if simultaneous else []
    r = _run("predict", data, "-m", model, "-o", out, *args, "-q")
    assert r.exit_code == 0, r.output
    from pyarrow import parquet

    got = parquet.read_table(out)
    assert got.column_names[-3:] == ["predicted_y", "lower_y", "upper_y"]
    est = nadaraya.load(model)
    band = est.confidence_band(_X(_table()), level=0.9, method=method, n_boot=59, random_state=3,
                               kind="simultaneous" if simultaneous else "pointwise")
    lower, upper = got.column("lower_y").to_numpy(), got.column("upper_y").to_numpy()
    np.testing.assert_allclose(lower, band.lower, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(upper, band.upper, rtol=1e-12, atol=1e-14)
    assert np.all(lower < upper)
    if method != "rbc":  # the rbc band is centred on the degree p + 1 fit, not on the prediction
        pred = got.column("predicted_y").to_numpy()
        assert np.all((lower < pred) & (pred < upper))


def test_a_simultaneous_band_is_wider_than_the_pointwise_one(data: Path, tmp_path: Path) -> None:
    model = _fit(data, tmp_path)
    width = {}
    for flag in ([], ["--simultaneous"]):
        out = tmp_path / f"p{len(flag)}.csv"
        r = _run("predict", data, "-m", model, "-o", out, "--band", "0.95", "--seed", "0", *flag, "-q")
        assert r.exit_code == 0, r.output
        t = csv.read_csv(out)
        width[bool(flag)] = t.column("upper_y").to_numpy() - t.column("lower_y").to_numpy()
    assert np.all(width[True] > width[False])


def test_several_targets_get_their_columns_in_turn(data: Path, tmp_path: Path) -> None:
    model = _fit(data, tmp_path, targets="y,y2")
    out = tmp_path / "p.csv"
    r = _run("predict", data, "-m", model, "-o", out, "--std", "--band", "0.8", "--variance", "homoscedastic",
             "-q")
    assert r.exit_code == 0, r.output
    got = csv.read_csv(out)
    assert got.column_names[len(_table().column_names) :] == [
        "predicted_y", "std_y", "lower_y", "upper_y", "predicted_y2", "std_y2", "lower_y2", "upper_y2"]
    est = nadaraya.load(model)
    X = _X(_table())
    _, std = est.predict(X, return_std=True, variance="homoscedastic")
    band = est.confidence_band(X, level=0.8, variance="homoscedastic")
    for j, t in enumerate(["y", "y2"]):
        np.testing.assert_allclose(got.column(f"std_{t}").to_numpy(), std[:, j], rtol=1e-12)
        np.testing.assert_allclose(got.column(f"lower_{t}").to_numpy(), band.lower[:, j], rtol=1e-12)
        np.testing.assert_allclose(got.column(f"upper_{t}").to_numpy(), band.upper[:, j], rtol=1e-12)
    # the asymptotic band is the prediction -+ z std, z the normal quantile of the level
    z = 1.2815515655446004  # scipy.stats.norm.ppf(0.9)
    np.testing.assert_allclose(band.upper[:, 1] - band.lower[:, 1], 2 * z * std[:, 1], rtol=1e-10)


def test_tsv_in_tsv_out(data: Path, tmp_path: Path) -> None:
    model = _fit(data, tmp_path)
    tsv = tmp_path / "q.tsv"
    csv.write_csv(_table().slice(0, 25), tsv, write_options=csv.WriteOptions(delimiter="\t"))
    out = tmp_path / "p.tsv"
    r = _run("predict", tsv, "-m", model, "-o", out, "--std", "--band", "0.95", "-q")
    assert r.exit_code == 0, r.output
    header = out.read_text().splitlines()[0].split("\t")
    assert header[-4:] == ['"predicted_y"', '"std_y"', '"lower_y"', '"upper_y"']
    got = csv.read_csv(out, parse_options=csv.ParseOptions(delimiter="\t"))
    assert got.column("id").to_pylist() == [f"r{i}" for i in range(25)]
    est = nadaraya.load(model)
    X = _X(_table())[:25]
    np.testing.assert_allclose(got.column("std_y").to_numpy(), est.predict(X, return_std=True)[1], rtol=1e-12)
    np.testing.assert_allclose(got.column("upper_y").to_numpy(), est.confidence_band(X).upper, rtol=1e-12)


def _table_rows(output: str) -> dict[str, tuple[float, float]]:
    """The rows of a printed significance table: name -> (statistic, p-value)."""
    lines = output.splitlines()
    start = next(i for i, s in enumerate(lines) if s.startswith("feature")) + 2
    rows = {}
    for line in lines[start:]:
        if line.startswith("---"):
            break
        m = re.match(r"(.+?)\s+(\S+)\s+(\S+)(?: \S+)?\s*$", line)
        assert m, line
        rows[m.group(1).strip()] = (float(m.group(2)), float(m.group(3)))
    return rows


def test_test_prints_the_librarys_p_values(data: Path) -> None:
    r = _run("test", data, "-x", "x,z", "-y", "y", "-b", BW, "--n-boot", "59", "--seed", "7")
    assert r.exit_code == 0, r.output
    rows = _table_rows(r.stdout)
    t = _table()
    X, y = _X(t), t.column("y").to_numpy()
    est = nadaraya.NadarayaWatson(bandwidth=[0.4, 1.5]).fit(X, y)
    res = est.significance_test(X, y, n_boot=59, random_state=7)
    assert list(rows) == ["x", "z"]
    np.testing.assert_allclose([rows[k][1] for k in rows], res.p_value, rtol=1e-3)
    np.testing.assert_allclose([rows[k][0] for k in rows], res.statistic, rtol=1e-5)
    # y depends on x: no replicate under the null reaches its statistic
    assert rows["x"][1] == pytest.approx(1 / 60, rel=1e-3)
    assert "59 wild-bootstrap replicates" in r.stdout


def test_test_defaults_to_the_cv_bandwidth_and_399_replicates(data: Path) -> None:
    r = _run("test", data, "-x", "x,z", "-y", "y", "--seed", "1", "--features", "z")
    assert r.exit_code == 0, r.output
    t = _table()
    X, y = _X(t), t.column("y").to_numpy()
    est = nadaraya.NadarayaWatson(bandwidth="cv").fit(X, y)
    res = est.significance_test(X, y, features=[1], random_state=1)
    rows = _table_rows(r.stdout)
    assert list(rows) == ["z"] and res.n_boot == 399 and "399 wild-bootstrap" in r.stdout
    assert rows["z"][1] == pytest.approx(res.p_value[0], rel=1e-3)


def test_test_joint_groups_the_features(data: Path) -> None:
    r = _run("test", data, "-x", "x,z", "-y", "y", "-b", BW, "--features", "z,x", "--joint", "--n-boot", "39",
             "--seed", "2", "-q")
    assert r.exit_code == 0, r.output
    rows = _table_rows(r.stdout)
    t = _table()
    X, y = _X(t), t.column("y").to_numpy()
    res = nadaraya.NadarayaWatson(bandwidth=[0.4, 1.5]).fit(X, y).significance_test(
        X, y, features=[[1, 0]], n_boot=39, random_state=2)
    assert list(rows) == ["z & x"]
    assert rows["z & x"][1] == pytest.approx(res.p_value[0], rel=1e-3)
    assert "fitted on" not in r.stdout  # -q: the table alone


def test_test_with_a_text_category(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    colour = rng.choice(["red", "blue", "green"], 90)
    x = rng.uniform(0, 1, 90)
    y = np.sin(3 * x) + 0.8 * (colour == "red") + rng.normal(0, 0.1, 90)
    path = tmp_path / "c.csv"
    csv.write_csv(pa.table({"x": x, "colour": colour, "y": y}), path)
    r = _run("test", path, "-x", "x,colour", "-y", "y", "--categorical", "colour", "-b", "0.2,0.2",
             "--n-boot", "39", "--seed", "0", "-q")
    assert r.exit_code == 0, r.output
    code = {"blue": 0.0, "green": 1.0, "red": 2.0}
    X = np.column_stack([x, [code[c] for c in colour]])
    res = nadaraya.NadarayaWatson(bandwidth=[0.2, 0.2], var_types="cu").fit(X, y).significance_test(
        X, y, n_boot=39, random_state=0)
    rows = _table_rows(r.stdout)
    np.testing.assert_allclose([rows["x"][1], rows["colour"][1]], res.p_value, rtol=1e-3)


PREDICT_ERRORS = [
    (["--band", "1.5"], "--band 1.5"),
    (["--band", "0"], "--band 0"),
    (["--band", "-0.95"], "--band -0.95"),
    (["--band", "95"], "--band 95"),
    (["--band", "nan"], "--band nan"),
    (["--std", "--variance", "robust"], "--variance 'robust'"),
    (["--band", "0.9", "--band-method", "jackknife"], "--band-method 'jackknife'"),
    (["--band", "0.9", "--band-method", "bootstrap", "--n-boot", "5"], "--n-boot 5"),
    (["--band", "0.9", "--seed", "-1"], "--seed -1"),
    (["--simultaneous"], "--simultaneous"),
    (["--band-method", "rbc"], "--band-method"),
    (["--variance", "homoscedastic"], "--variance"),
]


@pytest.mark.parametrize(("args", "named"), PREDICT_ERRORS)
def test_bad_predict_options_are_one_line_and_write_nothing(data: Path, tmp_path: Path, args: list[str],
                                                             named: str) -> None:
    model = _fit(data, tmp_path)
    out = tmp_path / "p.csv"
    before = _digest(data, model)
    r = _run("predict", data, "-m", model, "-o", out, *args)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], r.output
    assert not out.exists()
    assert _digest(data, model) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([data.name, model.name])


@pytest.mark.parametrize(("args", "named"), [
    (["--features", "w"], "--features 'w'"),
    (["--features", "x,x"], "'x' twice"),
    (["--n-boot", "10"], "--n-boot 10"),
    (["--seed", "-3"], "--seed -3"),
    (["-y", "y,y2"], "one target column"),
    (["--degree", "7"], "--degree 7"),
])
def test_bad_test_options_are_one_line(data: Path, args: list[str], named: str) -> None:
    before = _digest(data)
    base = ["test", data, "-x", "x,z", *([] if "-y" in args else ["-y", "y"]), "-b", BW]
    r = _run(*base, *args)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], r.output
    assert _digest(data) == before
    assert [p.name for p in data.parent.iterdir()] == [data.name]


def test_a_band_failing_in_the_library_leaves_no_file(data: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    model = _fit(data, tmp_path)
    out = tmp_path / "p.csv"
    out_before = b"an older file the failing call must not touch\n"
    out.write_bytes(out_before)
    before = _digest(data, model)

    def fail(*args: object, **kwargs: object) -> None:
        raise ValueError("the band cannot be computed")

    monkeypatch.setattr(nadaraya.NadarayaWatson, "confidence_band", fail)
    r = _run("predict", data, "-m", model, "-o", out, "--band", "0.95")
    assert r.exit_code == 2 and r.output.strip() == "error: the band cannot be computed", r.output
    assert out.read_bytes() == out_before  # neither replaced nor removed
    assert _digest(data, model) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([data.name, model.name, out.name])


def test_the_new_flags_show_no_value() -> None:
    for command, flags in (("predict", ["--std", "--simultaneous"]), ("test", ["--joint", "--dropna"])):
        out = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
        for flag in flags:
            line = next(s for s in out.splitlines() if flag in s)
            assert "<bool>" not in line, line
