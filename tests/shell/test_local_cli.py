"""The nadaraya command with --degree, --ordered and --categorical, end to end on a CSV with a text column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("typer")
from pyarrow import csv  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import nadaraya  # noqa: E402
from nadaraya.cli import app  # noqa: E402

runner = CliRunner()
COLOURS = ["red", "green", "blue"]


def _run(*args: object):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def data(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    n = 60
    x = rng.uniform(0, 1, n)
    colour = rng.choice(COLOURS, n)
    size = rng.integers(0, 3, n)
    y = np.sin(3 * x) + 0.5 * (colour == "red") + 0.2 * size + rng.normal(0, 0.1, n)
    path = tmp_path / "d.csv"
    csv.write_csv(pa.table({"x": x, "colour": colour, "size": size, "y": y}), path)
    return path


def _encoded(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The features as the command should see them: colour coded by its sorted values."""
    t = csv.read_csv(path)
    code = {c: j for j, c in enumerate(sorted(COLOURS))}  # blue 0, green 1, red 2
    colour = np.array([code[c] for c in t.column("colour").to_pylist()], dtype=float)
    X = np.column_stack([t.column("x").to_numpy(), colour, t.column("size").to_numpy().astype(float)])
    return X, t.column("y").to_numpy()


def test_fit_and_predict_with_a_text_category(data: Path, tmp_path: Path):
    model = tmp_path / "m.npz"
    r = _run("fit", data, "-x", "x,colour,size", "-y", "y", "--categorical", "colour", "--ordered", "size",
             "--degree", "1", "--bandwidth", "0.2,0.1,0.3", "-m", model)
    assert r.exit_code == 0, r.output
    assert "lambda colour=0.1" in r.output and "degree 1" in r.output
    est = nadaraya.load(model)
    assert (est.degree, est.var_types, est.var_types_) == (1, "cuo", "cuo")
    assert est.category_labels_["colour"].tolist() == sorted(COLOURS)
    np.testing.assert_array_equal(est.levels_, [0, 3, 3])
    X, y = _encoded(data)
    reference = nadaraya.NadarayaWatson(bandwidth=[0.2, 0.1, 0.3], degree=1, var_types="cuo").fit(X, y)
    queries = tmp_path / "q.csv"
    csv.write_csv(pa.table({"x": [0.5, 0.2, 0.9], "colour": ["red", "purple", "blue"], "size": [1, 0, 2]}),
                  queries)
    out = tmp_path / "p.csv"
    r = _run("predict", queries, "-m", model, "-o", out)
    assert r.exit_code == 0, r.output
    assert "column 'colour' holds values not seen in training ('purple')" in r.output
    got = csv.read_csv(out).column("predicted_y").to_numpy()
    # 'purple' is different from every training colour: any code no training row has
    expect = reference.predict(np.array([[0.5, 2.0, 1.0], [0.2, 99.0, 0.0], [0.9, 0.0, 2.0]]))
    np.testing.assert_allclose(got, expect, rtol=1e-12)


def test_fit_with_cv_and_select_choose_the_library_bandwidths(data: Path, tmp_path: Path):
    X, y = _encoded(data)
    ref = nadaraya.select_bandwidth(X, y, method="cv", per_feature=True, degree=1, var_types="cuo")
    r = _run("select", data, "-x", "x,colour,size", "-y", "y", "--categorical", "colour", "--ordered", "size",
             "--degree", "1", "-q")
    assert r.exit_code == 0, r.output
    line = next(s for s in r.output.splitlines() if s.startswith("chosen bandwidth: "))
    assert line == (f"chosen bandwidth: x={ref.bandwidth[0]:.6g}, lambda colour={ref.bandwidth[1]:.6g}, "
                    f"lambda size={ref.bandwidth[2]:.6g}")
    assert "unordered" in r.output and "ordered" in r.output
    model = tmp_path / "m.npz"
    r = _run("fit", data, "-x", "x,colour,size", "-y", "y", "--categorical", "colour", "--ordered", "size",
             "--degree", "1", "-m", model, "-q")
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(nadaraya.load(model).bandwidth_, ref.bandwidth, rtol=1e-12)


def test_numeric_categorical_columns_need_no_encoding(data: Path, tmp_path: Path):
    model = tmp_path / "m.npz"
    r = _run("fit", data, "-x", "x,size", "-y", "y", "--categorical", "size", "--bandwidth", "scott", "-m",
             model, "-q")
    assert r.exit_code == 0, r.output
    est = nadaraya.load(model)
    assert est.var_types_ == "cu" and not hasattr(est, "category_labels_")


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--ordered", "colour"],
         "column 'colour' is ordered (--ordered) but holds text ('blue', 'green', 'red')"),
        (["--degree", "5"], "--degree 5 is not valid"),
        (["--degree", "-1"], "--degree -1 is not valid"),
        (["--categorical", "weight"],
         "--categorical 'weight' is not one of the feature columns (--x): x, colour"),
        (["--categorical", "colour", "--ordered", "colour"], "column 'colour' is given both"),
        ([], "column 'colour' is not numeric"),
        (["--categorical", "colour", "--bandwidth", "0.2,0.9"],
         "bandwidth entry 0.9 of feature 'colour' (unordered, c = 3 categories) is its lambda"),
    ],
)
def test_a_failing_fit_says_why_and_writes_no_file(data: Path, tmp_path: Path, flags, fragment):
    model = tmp_path / "m.npz"
    r = _run("fit", data, "-x", "x,colour", "-y", "y", *flags, "-m", model)
    assert r.exit_code == 2, r.output
    assert fragment in " ".join(r.output.split()), r.output
    assert r.output.strip().startswith("error:") and len(r.output.strip().splitlines()) == 1
    assert not model.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["d.csv"]


def test_a_failing_predict_writes_no_file(data: Path, tmp_path: Path):
    model = tmp_path / "m.npz"
    assert _run("fit", data, "-x", "x,colour", "-y", "y", "--categorical", "colour", "-b", "scott", "-m",
                model, "-q").exit_code == 0
    queries = tmp_path / "q.csv"
    csv.write_csv(pa.table({"x": [0.5, 0.2], "hue": ["red", "blue"]}), queries)
    out = tmp_path / "p.csv"
    r = _run("predict", queries, "-m", model, "-o", out)
    assert r.exit_code == 2 and "column 'colour' is not in" in r.output, r.output
    assert not out.exists()


def test_empty_text_fields_are_missing_values(tmp_path: Path):
    path = tmp_path / "d.csv"
    path.write_text("x,colour,y\n0.1,red,1\n0.2,,2\n0.3,blue,3\n0.4,red,4\n0.5,blue,5\n0.6,,6\n")
    model = tmp_path / "m.npz"
    args = ("fit", path, "-x", "x,colour", "-y", "y", "--categorical", "colour", "-b", "0.2,0.1", "-m", model)
    r = _run(*args)
    assert r.exit_code == 2 and "2 row(s)" in r.output and "--dropna" in r.output, r.output
    assert not model.exists()
    r = _run(*args, "--dropna")
    assert r.exit_code == 0, r.output
    est = nadaraya.load(model)
    assert est.category_labels_["colour"].tolist() == ["blue", "red"] and est.X_fit_.shape == (4, 2)
