"""Hostile input to the nadaraya command (issue 12): nothing lost, nothing executed, one clear line.

Each test drives the command as a user would (typer's CliRunner, or a real process where the
test is about what reaches the terminal) and checks that a refused command exits with code 2
and one line naming what is wrong, writes no file, and leaves its inputs byte-identical.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("typer")
from pyarrow import csv, parquet  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import nadaraya  # noqa: E402
import nadaraya.cli as cli  # noqa: E402
from nadaraya.cli import app  # noqa: E402

runner = CliRunner()


def _table(n: int = 40) -> pa.Table:
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 5, n)
    return pa.table({
        "age": x, "bmi": rng.normal(size=n), "target": 2 * np.sin(x) + x + rng.normal(0, 0.3, n),
        "name": [f"p{i}" for i in range(n)],
    })


def _run(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def _process(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command in a fresh process: what really reaches a (non-terminal) stderr."""
    return subprocess.run([sys.executable, "-m", "nadaraya", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def _bad(result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    lines = [s for s in result.output.splitlines() if s.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: "), lines[0]
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


def _digest(folder: Path) -> dict[str, str]:
    """Name -> sha256 of every file in ``folder`` (links followed): the folder's exact state."""
    files = sorted(p for p in folder.iterdir() if p.is_file())
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "d.csv"
    csv.write_csv(_table(), path)
    return path


@pytest.fixture
def model(data: Path) -> Path:
    m = data.parent / "m.npz"
    r = _run("fit", data, "-x", "age", "-y", "target", "--bandwidth", "0.7", "--model", m, "-q")
    assert r.exit_code == 0, r.output
    return m


def _alias(target: Path, how: str) -> Path:
    """``target`` itself, a symbolic link to it, or a hard link to it (in another folder)."""
    if how == "same":
        return target
    other = target.parent / "elsewhere"
    other.mkdir(exist_ok=True)
    alias = other / f"alias{target.suffix}"
    if how == "symlink":
        alias.symlink_to(target)
    else:
        os.link(target, alias)
    return alias


ALIASES = ["same", "symlink", "hardlink"]


# --- 1. never overwrite an input ----------------------------------------------------------------


@pytest.mark.parametrize("how", ALIASES)
def test_fit_refuses_to_save_the_model_onto_the_data(data: Path, how: str) -> None:
    target = _alias(data, how)
    before = _digest(data.parent)
    line = _bad(_run("fit", data, "-x", "age", "-y", "target", "--bandwidth", "1", "--model", target),
                f"--model '{target}'", f"'{data}'", "refusing to overwrite")
    assert "data file" in line
    assert _digest(data.parent) == before  # d.csv is still the CSV, nothing else was written
    assert data.read_bytes().startswith(b'"age"')


@pytest.mark.parametrize("dropna", [False, True])
@pytest.mark.parametrize("how", ALIASES)
def test_predict_refuses_to_write_onto_the_data(data: Path, model: Path, how: str, dropna: bool) -> None:
    target = _alias(data, how)
    before = _digest(data.parent)
    _bad(_run("predict", "--model", model, data, "--out", target, *(["--dropna"] if dropna else [])),
         f"--out '{target}'", f"the data file '{data}'")
    assert _digest(data.parent) == before


@pytest.mark.parametrize("how", ALIASES)
def test_predict_refuses_to_write_onto_the_model(data: Path, model: Path, how: str) -> None:
    target = _alias(model, how)
    before = _digest(data.parent)
    _bad(_run("predict", "--model", model, data, "--out", target), f"--out '{target}'",
         f"the model file '{model}'")
    assert _digest(data.parent) == before
    # a model saved under a name predict could write (.csv) is protected as well
    odd = data.parent / "model.csv"
    assert _run("fit", data, "-x", "age", "-y", "target", "-b", "1", "--model", odd, "-q").exit_code == 0
    before = _digest(data.parent)
    _bad(_run("predict", "--model", odd, data, "--out", odd), "the model file")
    assert _digest(data.parent) == before
    assert nadaraya.load(odd).bandwidth_[0] == 1.0


@pytest.mark.parametrize("how", ALIASES)
def test_select_refuses_to_draw_onto_the_data(data: Path, how: str) -> None:
    target = _alias(data, how)
    before = _digest(data.parent)
    _bad(_run("select", data, "-x", "age", "-y", "target", "--plot", target), f"--plot '{target}'",
         f"the data file '{data}'")
    assert _digest(data.parent) == before


def test_the_overwrite_check_comes_before_any_work(data: Path, model: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def no_work(*args, **kwargs):
        raise AssertionError("the command did work before refusing its output path")

    monkeypatch.setattr(cli, "read_table", no_work)
    monkeypatch.setattr("nadaraya.persist.load", no_work)
    _bad(_run("fit", data, "-x", "age", "-y", "target", "--model", data), "refusing to overwrite")
    _bad(_run("predict", "--model", model, data, "--out", data), "refusing to overwrite")
    _bad(_run("select", data, "-x", "age", "-y", "target", "--plot", data), "refusing to overwrite")


def test_demo_replaces_links_in_its_folder_never_their_targets(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from nadaraya import report

    real = report.textbook_study
    monkeypatch.setattr(report, "textbook_study",
                        lambda split, **kw: real(split, **{**kw, "slider": [0.5, 1.0], "learnable": False}))
    precious = tmp_path / "precious.html"
    precious.write_text("keep me")
    out = tmp_path / "demo"
    out.mkdir()
    (out / "report.html").symlink_to(precious)
    r = _run("demo", "--out", out, "--n", "20", "-q", "--no-learn")
    assert r.exit_code == 0, r.output
    assert precious.read_text() == "keep me"
    assert not (out / "report.html").is_symlink() and "<html" in (out / "report.html").read_text().lower()


# --- 2. the output format follows the extension ------------------------------------------------


@pytest.mark.parametrize("ext", [".tsv", ".csv", ".txt", ".parquet", ".pq"])
def test_predict_writes_the_format_of_the_extension(data: Path, model: Path, ext: str) -> None:
    out = data.parent / f"p{ext}"
    r = _run("predict", "--model", model, data, "--out", out, "-q")
    assert r.exit_code == 0, r.output
    if ext in (".parquet", ".pq"):
        got = parquet.read_table(out)
    else:
        text = out.read_text()
        header = text.splitlines()[0]
        sep = "\t" if ext == ".tsv" else ","
        assert header.split(sep) == ['"age"', '"bmi"', '"target"', '"name"', '"predicted_target"'], header
        got = csv.read_csv(out, parse_options=csv.ParseOptions(delimiter=sep))
    src = _table()
    x, y = src.column("age").to_numpy(), src.column("target").to_numpy()
    np.testing.assert_allclose(got.column("predicted_target").to_numpy(),
                               nadaraya.pool(x, x, y, bandwidth=0.7), rtol=1e-12)
    assert got.column("name").to_pylist() == src.column("name").to_pylist()


def test_unknown_output_extension_is_refused_before_computing(data: Path, model: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("nadaraya.persist.load", lambda *a, **k: pytest.fail("loaded the model"))
    before = _digest(data.parent)
    for name in ("p.xlsx", "p", "p.json"):
        _bad(_run("predict", "--model", model, data, "--out", data.parent / name), "cannot tell the format",
             name, ".tsv")
    assert _digest(data.parent) == before


def test_tsv_input(tmp_path: Path) -> None:
    path = tmp_path / "d.tsv"
    csv.write_csv(_table(), path, write_options=csv.WriteOptions(delimiter="\t"))
    m = tmp_path / "m.npz"
    r = _run("fit", path, "-x", "age,bmi", "-y", "target", "-b", "0.5,2", "--model", m, "-q")
    assert r.exit_code == 0, r.output
    out = tmp_path / "p.tsv"
    assert _run("predict", "--model", m, path, "--out", out, "-q").exit_code == 0
    got = csv.read_csv(out, parse_options=csv.ParseOptions(delimiter="\t"))
    src = _table()
    X = np.column_stack([src.column("age").to_numpy(), src.column("bmi").to_numpy()])
    np.testing.assert_allclose(got.column("predicted_target").to_numpy(),
                               nadaraya.pool(X, X, src.column("target").to_numpy(), bandwidth=[0.5, 2.0]),
                               rtol=1e-12)


# --- 3. duplicate column names ------------------------------------------------------------------


def test_a_duplicated_column_is_named(tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text("a,a,x,y\n" + "".join(f"{i},{-i},{i * 0.5},{i % 3}\n" for i in range(12)))
    out = tmp_path / "m.npz"
    _bad(_run("fit", path, "-x", "a", "-y", "y", "-b", "1", "--model", out), "column 'a'", "2 columns",
         "dup.csv")
    _bad(_run("select", path, "-x", "x", "-y", "a"), "column 'a'", "ambiguous")
    assert not out.exists()
    # the other columns stay usable, and predict keeps both 'a' columns in its output
    assert _run("fit", path, "-x", "x", "-y", "y", "-b", "1", "--model", out, "-q").exit_code == 0
    pred = tmp_path / "p.csv"
    assert _run("predict", "--model", out, path, "--out", pred, "-q").exit_code == 0
    assert pred.read_text().splitlines()[0] == '"a","a","x","y","predicted_y"'


# --- 4. unclear errors ------------------------------------------------------------------------


def test_a_latin1_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "latin.csv"
    path.write_bytes("\u00e2ge,target\n1,2\n2,3\n3,5\n".encode("latin-1"))
    out = tmp_path / "m.npz"
    _bad(_run("fit", path, "-x", "\u00e2ge", "-y", "target", "-b", "1", "--model", out), "latin.csv", "UTF-8")
    assert not out.exists()


def test_errors_are_one_line_without_a_blank_line_before(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("age,flat,target\n" + "".join(f"{i},1.0,{i % 4}\n" for i in range(20)))
    r = _process("fit", path, "-x", "age,flat", "-y", "target", "--model", tmp_path / "m.npz", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, repr(r.stderr)
    assert r.stdout == ""
    # and a successful command prints nothing but its result
    r = _process("fit", path, "-x", "age", "-y", "target", "-b", "1", "--model", tmp_path / "m.npz",
                 cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", repr(r.stderr)


def test_warnings_are_clean_lines_and_silent_under_quiet(tmp_path: Path) -> None:
    # triples of close points, y linear within each: the CV choice is on the lower bound of the
    # search, a warning (smoothing x out, on the upper bound, is an outcome, not a warning)
    path = tmp_path / "d.csv"
    rows = [(c + e, (5.0 if c % 2 else 0.0) + 10 * e) for c in range(5) for e in (-0.02, 0.0, 0.02)]
    path.write_text("x,y\n" + "".join(f"{a!r},{b!r}\n" for a, b in rows))
    r = _process("select", path, "-x", "x", "-y", "y", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", repr(r.stderr)
    r = _process("select", path, "-x", "x", "-y", "y", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines and all(s.startswith("warning: ") for s in lines), r.stderr
    assert "feature 'x'" in r.stderr and "feature 0" not in r.stderr
    assert "Warning:" not in r.stderr and ".py:" not in r.stderr


def _small_study(monkeypatch: pytest.MonkeyPatch) -> None:
    from nadaraya import report

    real = report.textbook_study
    monkeypatch.setattr(report, "textbook_study",
                        lambda split, **kw: real(split, **{**kw, "slider": [0.5], "learnable": False}))


def test_demo_validates_n_before_making_its_folder(tmp_path: Path) -> None:
    out = tmp_path / "new" / "demo"
    for n in ("1", "2", "0", "-5"):
        _bad(_run("demo", "--out", out, "--n", n, "-q"), f"--n {n}", "at least 3")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fail_in", ["write_figures", "write_html"])
def test_a_failing_demo_removes_only_the_folder_it_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        fail_in: str) -> None:
    from nadaraya import report

    _small_study(monkeypatch)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report, fail_in, broken)
    made = tmp_path / "a" / "b" / "demo"
    _bad(_run("demo", "--out", made, "--n", "20", "-q"), "No space left")
    assert list(tmp_path.iterdir()) == []  # demo made a/b/demo, and took all of it back
    kept = tmp_path / "mine"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    _bad(_run("demo", "--out", kept, "--n", "20", "-q"), "No space left")
    assert _digest(kept) == {"notes.txt": hashlib.sha256(b"mine").hexdigest()}


def test_a_constant_feature_is_named_by_its_column(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("age,flat,target\n" + "".join(f"{i},2.5,{np.sin(i):.6f}\n" for i in range(20)))
    out = tmp_path / "m.npz"
    for args in (("fit", "--model", out), ("fit", "-b", "aicc", "--model", out),
                 ("fit", "-b", "scott", "--model", out), ("select",), ("select", "--per-feature")):
        line = _bad(_run(args[0], path, "-x", "age,flat", "-y", "target", *args[1:]), "feature 'flat'",
                    "constant", "2.5", "pass a numeric bandwidth")
        assert "feature 1" not in line and "bandwidth='scott'" not in line, line
    assert not out.exists()
    # as the message says, a numeric bandwidth works
    r = _run("fit", path, "-x", "age,flat", "-y", "target", "-b", "1,1", "--model", out, "-q")
    assert r.exit_code == 0, r.output


def test_the_library_says_a_constant_feature_is_constant() -> None:
    X = np.column_stack([np.arange(20.0), np.full(20, 2.5)])
    for call in (lambda: nadaraya.select_bandwidth(X, np.sin(X[:, 0])),
                 lambda: nadaraya.NadarayaWatson(bandwidth="cv").fit(X, np.sin(X[:, 0]))):
        expected = r"feature 1 has zero spread: it is constant \(every value is 2\.5\).*no rule can choose"
        with pytest.raises(ValueError, match=expected + r" its bandwidth.*drop the feature") as info:
            call()
        assert "bandwidth='scott'" not in str(info.value)


# --- 5. damaged model files -------------------------------------------------------------------


def test_damaged_model_files_end_in_one_line(data: Path, model: Path) -> None:
    raw = model.read_bytes()
    cases = {
        "truncated.npz": raw[: len(raw) // 2],
        "random.npz": np.random.default_rng(3).bytes(len(raw)),
        "empty.npz": b"",
    }
    # the settings member rewritten as deeply nested JSON (Python's json recursion limit)
    with zipfile.ZipFile(model) as z:
        members = {name: z.read(name) for name in z.namelist()}
    nested = data.parent / "nested.npz"
    with zipfile.ZipFile(nested, "w") as z:
        for name, blob in members.items():
            z.writestr(name, b"[" * 200_000 + b"]" * 200_000 if name.endswith(".json") else blob)
    for name, blob in cases.items():
        (data.parent / name).write_bytes(blob)
    for name in (*cases, "nested.npz"):
        out = data.parent / "p.csv"
        _bad(_run("predict", "--model", data.parent / name, data, "--out", out), name)
        assert not out.exists()
    _bad(_run("predict", "--model", data.parent, data, "--out", data.parent / "p.csv"), "folder")


@pytest.mark.parametrize("raised", [RecursionError("maximum recursion depth exceeded"), MemoryError(),
                                    KeyError("X_fit_"), EOFError(), TypeError("bad shape")])
def test_whatever_loading_raises_is_one_line(data: Path, model: Path, monkeypatch: pytest.MonkeyPatch,
                                             raised: BaseException) -> None:
    def load(path):
        raise raised

    monkeypatch.setattr("nadaraya.persist.load", load)
    _bad(_run("predict", "--model", model, data, "--out", data.parent / "p.csv"), f"'{model}'", "damaged")
    assert not (data.parent / "p.csv").exists()


# --- 6. a failing command leaves no file and its inputs untouched -------------------------------


def test_a_failure_mid_way_leaves_no_output_and_the_inputs_intact(tmp_path: Path, model: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    text = tmp_path / "text.csv"
    text.write_text("age,target\n1.0,2\n2.0,3\nthree,4\n")
    folder = _digest(tmp_path)
    out = tmp_path / "p.csv"
    _bad(_run("predict", "--model", model, text, "--out", out), "'age' is not numeric", "'three'")
    assert _digest(tmp_path) == folder  # no output, inputs byte-identical
    # an earlier output survives a failed rerun unchanged
    out.write_text("earlier results\n")
    _bad(_run("predict", "--model", model, text, "--out", out), "not numeric")
    assert out.read_text() == "earlier results\n"

    # a write that fails half-way leaves neither a partial file nor a temporary one
    def half(table, f, **kwargs):
        f.write(b"age,target,predicted_target\n1.0,")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(csv, "write_csv", half)
    good = tmp_path / "d.csv"  # the model fixture's data
    folder = _digest(tmp_path)
    _bad(_run("predict", "--model", model, good, "--out", out), "No space left")
    assert _digest(tmp_path) == folder
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# --- the README's options, against the Python API ---------------------------------------------


def _xy(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    t = _table()
    return np.column_stack([t.column(n).to_numpy() for n in names]), t.column("target").to_numpy()


@pytest.mark.parametrize(("cols", "form"), [
    (cols, form)
    for cols in (["age"], ["age", "bmi"])
    for form in ("0.8", "0.5,2", "scott", "silverman", "cv", "aicc")
    if not (form == "0.5,2" and len(cols) == 1)
])
def test_every_bandwidth_form_of_fit(data: Path, cols: list[str], form: str) -> None:
    from nadaraya.bandwidth import rule_of_thumb

    m = data.parent / "m.npz"
    r = _run("fit", data, "-x", ",".join(cols), "-y", "target", "--bandwidth", form, "--model", m, "-q")
    assert r.exit_code == 0, r.output
    got = nadaraya.load(m).bandwidth_
    X, y = _xy(cols)
    if form in ("cv", "aicc"):
        expected = nadaraya.select_bandwidth(X, y, method=form, per_feature=len(cols) > 1).bandwidth
    elif form in ("scott", "silverman"):
        expected = rule_of_thumb(X, form)
    else:
        expected = np.broadcast_to(np.array([float(v) for v in form.split(",")]), (len(cols),))
    np.testing.assert_allclose(got, np.broadcast_to(expected, (len(cols),)), rtol=1e-12, atol=0)


@pytest.mark.parametrize(("method", "per_feature"), [("cv", False), ("aicc", False), ("cv", True),
                                                     ("aicc", True)])
def test_select_methods_match_the_api(data: Path, method: str, per_feature: bool) -> None:
    cols = ["age", "bmi"]
    r = _run("select", data, "-x", ",".join(cols), "-y", "target", "--method", method,
             *(["--per-feature"] if per_feature else []), "-q")
    assert r.exit_code == 0, r.output
    line = next(s for s in r.output.splitlines() if s.startswith("chosen bandwidth: "))
    X, y = _xy(cols)
    h = nadaraya.select_bandwidth(X, y, method=method, per_feature=per_feature).bandwidth
    h = np.broadcast_to(h, (2,))
    assert line == "chosen bandwidth: " + ", ".join(f"{n}={v:.6g}" for n, v in zip(cols, h))
    if per_feature:
        assert h[0] != h[1]  # the per-feature search really chose two bandwidths


def test_predict_warnings_are_clean_lines_and_silent_under_quiet(tmp_path: Path) -> None:
    train = tmp_path / "train.csv"
    train.write_text("x,y\n" + "".join(f"{i * 0.1},{i % 3}\n" for i in range(20)))
    m = tmp_path / "m.npz"
    assert _run("fit", train, "-x", "x", "-y", "y", "-k", "epanechnikov", "-b", "0.3", "--model", m,
                "--empty", "nan", "-q").exit_code == 0  # (the default, "nearest", predicts and says nothing)
    far = tmp_path / "far.csv"  # two queries with no training point in their window
    far.write_text("x\n0.5\n50\n-50\n")
    out = tmp_path / "p.csv"
    r = _process("predict", "--model", m, far, "--out", out, "-q", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", repr(r.stderr)
    r = _process("predict", "--model", m, far, "--out", out, cwd=tmp_path)
    assert r.returncode == 0
    assert r.stderr.startswith("warning: ") and r.stderr.count("\n") == 1, repr(r.stderr)
    assert "2" in r.stderr and "Warning:" not in r.stderr and ".py:" not in r.stderr
