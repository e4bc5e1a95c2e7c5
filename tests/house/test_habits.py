"""A practitioner's habits: model selection over every kernel, warnings, cv_results_, reprs, the CLI."""

from __future__ import annotations

import contextlib
import json
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

import nadaraya
from nadaraya import NadarayaWatson
from nadaraya.bandwidth import BandwidthSelection, BandwidthWarning, select_bandwidth
from nadaraya.datasets import diabetes

pytest.importorskip("typer")
from typer.testing import CliRunner

from nadaraya.cli import app


def _run(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


def _lower_bound_data() -> tuple[np.ndarray, np.ndarray]:
    """Triples of close points with y linear within each: CV's choice is the search's lower bound."""
    e = np.array([-0.02, 0.0, 0.02])
    x = (np.arange(5.0)[:, None] + e).ravel()
    y = (np.array([0.0, 5.0, 0.0, 5.0, 0.0])[:, None] + 10 * e).ravel()
    return x[:, None], y


# -- model selection over every kernel --------------------------------------------------------


def test_grid_search_over_every_kernel_scores_every_fold_on_diabetes():
    # before: with empty="nan", 8 of the 12 kernels scored NaN (Scott's rule per feature leaves
    # product windows of compact kernels empty in 10 dimensions)
    from sklearn.model_selection import GridSearchCV

    data = diabetes()
    kernels = nadaraya.kernels.names()
    assert len(kernels) == 12
    search = GridSearchCV(NadarayaWatson(bandwidth="scott"), {"kernel": kernels}, cv=5, error_score="raise")
    search.fit(data.X, data.y)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert np.isfinite(search.cv_results_["split4_test_score"]).all()


@pytest.mark.slow
def test_grid_search_over_every_kernel_with_the_default_cv_bandwidth():
    # the default bandwidth ("cv"), on one feature of the diabetes data (the per-feature search
    # with compact kernels takes minutes on all ten)
    from sklearn.model_selection import GridSearchCV

    data = diabetes()
    X = data.X[:, [data.feature_names.index("bmi")]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grid = {"kernel": nadaraya.kernels.names()}
        search = GridSearchCV(NadarayaWatson(), grid, cv=5, error_score="raise")
        search.fit(X, data.y)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    fits = 12 * 5 + 1
    assert sum(issubclass(w.category, BandwidthWarning) for w in caught) <= fits  # at most one per fit


def test_the_estimator_predicts_where_pool_gives_nan():
    import inspect

    assert inspect.signature(NadarayaWatson).parameters["empty"].default == "nearest"
    assert inspect.signature(nadaraya.pool).parameters["empty"].default == "nan"
    X = np.array([[0.0], [1.0], [3.0]])
    y = np.array([1.0, 2.0, 7.0])
    model = NadarayaWatson(kernel="epanechnikov", bandwidth=0.5).fit(X, y)
    # no training point within 0.5 of 2.2 or of -4: the nearest one's target
    np.testing.assert_array_equal(model.predict([[2.2], [-4.0]]), [7.0, 1.0])
    with pytest.warns(UserWarning):
        assert np.isnan(nadaraya.pool([[2.2]], X, y, kernel="epanechnikov", bandwidth=0.5)).all()


# -- warnings: once per fit, at the caller's line; a smoothed-out feature is not one ------------


def test_a_bound_warning_comes_once_per_fit_at_the_callers_line():
    # before: the warning pointed into the library (stacklevel counted from a private helper)
    X, y = _lower_bound_data()
    for call in (lambda: NadarayaWatson().fit(X, y), lambda: select_bandwidth(X, y)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        ours = [w for w in caught if issubclass(w.category, BandwidthWarning)]
        assert len(ours) == 1, [str(w.message) for w in ours]
        assert ours[0].filename == __file__
        assert "lower bound" in str(ours[0].message)


def test_a_smoothed_out_feature_is_an_attribute_not_a_warning():
    # before: "feature 1 ... smoothed out" warned on every fit (11 times in one 5-fold search)
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.uniform(0, 5, 250), rng.normal(0, 2.0, 250)])
    y = 2 * np.sin(X[:, 0]) + X[:, 0] + rng.normal(0, 0.5, 250)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BandwidthWarning)
        model = NadarayaWatson().fit(X, y)
        # y does not follow x: the scalar search smooths x out too (before: on the top of its
        # grid, 3 times the range, where it was neither smoothed out nor silent)
        x1, y1 = np.arange(1.0, 7.0)[:, None], np.array([1.0, 5.0, 1.0, 7.0, 1.0, 3.0])
        alone = NadarayaWatson(kernel="epanechnikov").fit(x1, y1)
    assert model.selection_.smoothed_out.tolist() == [False, True]
    assert alone.selection_.smoothed_out.tolist() == [True]
    # the fit is then (nearly) the mean: the feature's weights vary by under 1 %
    np.testing.assert_allclose(alone.predict(x1), y1.mean(), rtol=0.01)


# -- cv_results_ as scikit-learn keeps it, the record in selection_ -----------------------------


def test_cv_results_is_a_dict_of_arrays_that_pandas_reads():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(4)
    x = rng.uniform(0, 5, 80)
    y = np.sin(x) + rng.normal(0, 0.3, 80)
    model = NadarayaWatson().fit(x[:, None], y)
    frame = pd.DataFrame(model.cv_results_)
    sel = model.selection_
    assert isinstance(sel, BandwidthSelection)
    assert list(frame.columns) == ["bandwidth", "score", "rank", "stage"]
    assert len(frame) == sel.search["scores"].size
    np.testing.assert_array_equal(frame["bandwidth"], sel.search["bandwidths"][:, 0])
    best = frame.loc[frame["rank"] == 1].iloc[0]
    assert best["score"] == sel.score == frame["score"].min()
    assert best["bandwidth"] == model.bandwidth_[0]
    assert NadarayaWatson(bandwidth=0.3).fit(x[:, None], y).cv_results_ is None

    df = pd.DataFrame({"size": x, "noise": rng.normal(size=80)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        named = NadarayaWatson().fit(df, y)
    frame = pd.DataFrame(named.cv_results_)
    assert list(frame.columns) == ["bandwidth_size", "bandwidth_noise", "score", "rank", "stage"]
    assert set(frame["stage"]) == {"grid", "per_feature"}


def test_model_files_keep_selection_and_read_the_old_layout(tmp_path: Path):
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 5, (40, 2))
    y = np.sin(X[:, 0]) + rng.normal(0, 0.2, 40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        model = NadarayaWatson(kernel="biweight").fit(X, y)
    path = model.save(tmp_path / "new.npz")
    back = nadaraya.load(path)
    assert repr(back.selection_) == repr(model.selection_)
    for k, v in model.cv_results_.items():
        np.testing.assert_array_equal(back.cv_results_[k], v)
    # files written before the record moved to selection_ held it as cv_results_ (format 2)
    old = tmp_path / "old.npz"
    with zipfile.ZipFile(path) as z, zipfile.ZipFile(old, "w") as w:
        for name in z.namelist():
            blob = z.read(name)
            if name == "settings.json":
                blob = blob.replace(b'"selection_', b'"cv_results_')
                assert json.loads(blob)["version"] == 2
            w.writestr(name.replace("selection_.", "cv_results_."), blob)
    with zipfile.ZipFile(old) as z:
        assert "cv_results_.search.scores.npy" in z.namelist()
    was = nadaraya.load(old)
    assert repr(was.selection_) == repr(model.selection_)
    np.testing.assert_array_equal(was.cv_results_["score"], model.cv_results_["score"])
    np.testing.assert_array_equal(was.predict(X), model.predict(X))


def test_bandwidth_selection_repr_is_a_summary():
    # before: the dataclass repr printed every array (bandwidth, smoothed_out, rule, bounds)
    d = 40
    sel = BandwidthSelection(
        bandwidth=np.linspace(0.1, 4.0, d), score=1.25, method="aicc", kernel="tricube", per_feature=True,
        smoothed_out=np.arange(d) % 2 == 0, rule_of_thumb=np.ones(d), bounds=np.ones((d, 2)),
        search={"bandwidths": np.ones((500, d)), "scores": np.ones(500), "stages": np.array(["grid"] * 500)},
        n_passes=77, converged=True,
    )
    text = repr(sel)
    assert len(text) < 300, text
    for part in ("method='aicc'", "kernel='tricube'", "score=1.25", "n_passes=77", "n_evaluated=500", "..."):
        assert part in text, text


# -- attention_weights with the fitted settings ------------------------------------------------


def test_model_attention_weights_are_the_primitives_with_the_fitted_settings():
    rng = np.random.default_rng(6)
    X = rng.uniform(0, 4, (30, 2))
    y = X[:, 0] - X[:, 1] ** 2
    sw = rng.uniform(0.5, 2.0, 30)
    h = np.array([0.9, 1.3])
    model = NadarayaWatson(kernel="epanechnikov", bandwidth=h).fit(X, y, sample_weight=sw)
    Q = np.vstack([rng.uniform(0, 4, (6, 2)), [[40.0, 40.0]]])  # the last: no point in its window
    W = model.attention_weights(Q)
    same = nadaraya.attention_weights(Q, X, kernel="epanechnikov", bandwidth=model.bandwidth_,
                                      sample_weight=sw, empty=model.empty)
    np.testing.assert_allclose(W, same, rtol=1e-12, atol=1e-15)
    # written plainly: weight s_i prod_k 3/4 (1 - u_k^2)_+, normalised; the columns follow the
    # training rows in the order given to fit
    Xf, sf = X, sw
    for q, row in zip(Q[:-1], W[:-1]):
        u = (q - Xf) / h
        k = np.prod(np.clip(0.75 * (1 - u**2), 0, None), axis=1) * sf
        np.testing.assert_allclose(row, k / k.sum(), rtol=1e-12, atol=1e-15)
    nearest = np.argmin((((Xf - Q[-1]) / h) ** 2).sum(axis=1))
    np.testing.assert_array_equal(W[-1], np.eye(30)[nearest])  # empty="nearest", the default
    np.testing.assert_allclose(W @ y, model.predict(Q), rtol=1e-12)
    assert model.attention_weights(Q, sparse=True).nnz == np.count_nonzero(W)


# -- the command line --------------------------------------------------------------------------


def test_flags_show_no_value_and_dropna_is_a_flag(tmp_path: Path):
    r = _run("fit", "--help")
    assert r.exit_code == 0
    line = next(s for s in r.output.splitlines() if "--dropna" in s)
    assert "<bool>" not in line, line  # before: "--dropna <bool>", which read as `--dropna true`
    data = tmp_path / "d.csv"
    data.write_text("x,y\n" + "".join(f"{i},{i % 4}\n" for i in range(12)) + "3,\n")
    r = _run("fit", data, "-x", "x", "-y", "y", "-b", "1", "--model", tmp_path / "m.npz", "--dropna", "-q")
    assert r.exit_code == 0, r.output


def test_version():
    r = _run("--version")
    assert r.exit_code == 0 and r.output.strip() == f"nadaraya {nadaraya.__version__}"


def test_bench_quiet_silences_library_warnings(monkeypatch: pytest.MonkeyPatch):
    import nadaraya.cli as cli

    calls = []
    monkeypatch.setattr(cli, "_benchmark_runner", lambda: Path("benchmarks/run.py"))
    monkeypatch.setattr(cli.subprocess, "call", lambda cmd, env=None: calls.append((cmd, env)) or 0)
    assert _run("bench", "engine", "--quick", "--quiet").exit_code == 0
    assert _run("bench", "engine").exit_code == 0
    (cmd, env), (_, plain) = calls
    assert cmd[2:] == ["engine", "--quick"] and env["PYTHONWARNINGS"] == "ignore" and plain is None


def _xy_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 5, (80, 3))
    y = np.sin(x[:, 0]) + 0.3 * x[:, 1] + rng.normal(0, 0.2, 80)
    path = tmp_path / "d.csv"
    path.write_text("age,bmi,noise,target\n" + "".join(f"{a},{b},{c},{t}\n" for (a, b, c), t in zip(x, y)))
    return path


def test_select_prints_a_labelled_table_and_plots_one_panel_per_feature(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    from nadaraya import plot

    figures = []
    monkeypatch.setattr(plot, "savefig", lambda fig, path, **kw: figures.append(fig))
    path = _xy_file(tmp_path)
    r = _run("select", path, "-x", "age,bmi,noise", "-y", "target", "--per-feature",
             "--plot", tmp_path / "c.png")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert len(lines) < 16, r.output  # before: one row per bandwidth tried (about 40)
    header = next(s for s in lines if "age" in s and "bmi" in s)
    assert "noise" in header and "h[" not in r.output
    assert any(s.startswith("score (leave-one-out CV") for s in lines)
    assert any(s.startswith("search: ") and "passes" in s for s in lines)
    assert any(s.startswith("chosen bandwidth: age=") for s in lines)
    # before: one panel, feature 0's bandwidth against the score
    (fig,) = figures
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.has_data()]
    assert len(panels) == 3

    figures.clear()
    r = _run("select", path, "-x", "age", "-y", "target", "--method", "aicc", "--plot", tmp_path / "a.png")
    assert r.exit_code == 0, r.output
    assert "AICc" in r.output
    (fig,) = figures
    assert "AICc" in fig.axes[0].get_ylabel()  # before: "leave-one-out CV score (MSE)"


def test_fit_progress_shows_the_search_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import nadaraya.cli as cli

    shown: list[str] = []

    @contextlib.contextmanager
    def recorder(quiet: bool, description: str):
        yield lambda done, total, what: shown.append(what)

    monkeypatch.setattr(cli, "_progress", recorder)
    path = _xy_file(tmp_path)
    r = _run("fit", path, "-x", "age", "-y", "target", "--model", tmp_path / "m.npz", "-q")
    assert r.exit_code == 0, r.output
    # before: "fitting" once, the bar at 0/1 until the end
    assert any("grid of bandwidths" in s for s in shown) and any("refining" in s for s in shown)


def test_command_help_paragraphs_are_not_broken_mid_line():
    import typer.main

    demo = typer.main.get_command(app).commands["demo"]
    for paragraph in demo.help.split("\n\n"):
        assert "\n" not in paragraph, paragraph
    r = CliRunner().invoke(app, ["demo", "--help"], terminal_width=200, env={"COLUMNS": "200"})
    assert "the CV choice, and the learnable models" in r.output


def test_no_help_suggests_a_value_for_a_flag() -> None:
    """typer with click 8.5 printed ``--help <bool>`` (and ``--flag <bool>`` for every flag
    without an empty metavar), which reads as if a flag took a value."""
    from typer.testing import CliRunner

    from nadaraya.cli import app

    for args in ([], ["demo"], ["fit"], ["predict"], ["select"], ["test"], ["bench"]):
        out = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "120"}).output
        assert "--help" in out and "<bool>" not in out, (args, out)


def test_empty_window_warnings_point_at_the_callers_line() -> None:
    """EmptyWindowWarning pointed into pooling.py for pool and loo_pool, and at ``sys:1`` for
    attention_weights (a fixed stacklevel, one frame off for each)."""
    import warnings

    import nadaraya

    calls = [
        lambda: nadaraya.pool([5.0], [0.0, 1.0], [1.0, 2.0], kernel="boxcar", bandwidth=0.1),
        lambda: nadaraya.loo_pool([0.0, 5.0], [1.0, 2.0], kernel="boxcar", bandwidth=0.1),
        lambda: nadaraya.attention_weights([5.0], [0.0, 1.0], kernel="boxcar", bandwidth=0.1),
        lambda: nadaraya.NadarayaWatson(kernel="boxcar", bandwidth=0.1, empty="nan")
        .fit([[0.0], [1.0]], [1.0, 2.0]).predict([[5.0]]),
    ]
    for call in calls:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        found = [w for w in caught if issubclass(w.category, nadaraya.EmptyWindowWarning)]
        assert len(found) == 1 and found[0].filename == __file__, [(w.filename, w.lineno) for w in found]
