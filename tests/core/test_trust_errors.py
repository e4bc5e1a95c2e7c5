"""Issue 28, items 9 and 10: crashes, hangs and unclear errors, each refused naming the argument."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import nadaraya
from nadaraya import NadarayaWatson, select_bandwidth

Q = np.array([[1.0], [2.0]])


def _model(n: int = 80, **kw):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, (n, 1))
    y = np.sin(X[:, 0]) + rng.normal(0, 0.3, n)
    return X, y, NadarayaWatson(bandwidth=0.5, **kw).fit(X, y)


# ------------------------------------------------------------------ item 9: a range beyond float64


@pytest.mark.parametrize(
    "kw", [{}, {"kernel": "epanechnikov"}, {"degree": 1}, {"method": "aicc"}, {"var_types": "cu"}]
)
def test_a_range_overflowing_float64_is_searched(kw):
    """x spanning -1e308..1e308: its range (2e308) is inf in float64; the search ran into an
    OverflowError. It searches as at any other scale: the bandwidth in units of the range is
    the one chosen at unit scale (the search is scale-equivariant by powers of two)."""
    rng = np.random.default_rng(3)
    u = np.linspace(-1, 1, 60)
    y = np.sin(3 * u) + rng.normal(0, 0.1, 60)
    extra = [rng.integers(0, 3, 60)] if "var_types" in kw else []
    big = select_bandwidth(np.column_stack([u * 2.0**1023, *extra]), y, **kw)
    unit = select_bandwidth(np.column_stack([u, *extra]), y, **kw)
    assert np.isfinite(big.bandwidth).all() and np.isfinite(big.score)
    np.testing.assert_allclose(big.bandwidth[0] / 2.0**1023, unit.bandwidth[0], rtol=1e-6)
    np.testing.assert_allclose(big.score, unit.score, rtol=1e-9)
    x = u * 1e308
    model = NadarayaWatson(**{k: v for k, v in kw.items() if k != "method"}).fit(
        np.column_stack([x, *extra]), y
    )
    assert np.isfinite(model.bandwidth_).all()
    if "degree" not in kw:  # local fits at 1e308 are another matter (their moments overflow)
        assert np.isfinite(model.predict(np.column_stack([x, *extra])[:5])).all()


def test_a_bandwidth_beyond_float64_is_a_value_error_naming_x():
    """A feature that does not matter, spanning +-1.7e308, is smoothed out at a bandwidth of 100
    times its range: beyond float64. Refused naming the column of X, not an OverflowError."""
    rng = np.random.default_rng(1)
    X = np.c_[rng.uniform(-1, 1, 80) * 1.7e308, rng.uniform(0, 5, 80)]
    y = np.sin(2 * X[:, 1]) + rng.normal(0, 0.1, 80)
    with pytest.raises(ValueError, match=r"X column 0 spans .*e\+308.*beyond float64.*rescale"):
        select_bandwidth(X, y, per_feature=True)


# ------------------------------------------------------------------ item 9: n_boot bounded


@pytest.mark.parametrize("call", ["band", "simultaneous", "test"])
def test_n_boot_beyond_the_bound_is_refused_at_once(call):
    X, y, m = _model()
    with pytest.raises(ValueError, match=r"n_boot=9999999999999 is too large.*19 to 1000000"):
        if call == "test":
            m.significance_test(X, y, n_boot=9999999999999)
        else:
            m.confidence_band(
                Q,
                method="bootstrap" if call == "band" else "asymptotic",
                kind="simultaneous" if call == "simultaneous" else "pointwise",
                n_boot=9999999999999,
            )


def test_n_boot_bounded_by_time():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (4000, 1))
    m = NadarayaWatson(bandwidth=0.05).fit(X, X[:, 0])
    # 1e6 replicates x 4000 x 4000 pairs = 1.6e13 multiply-adds
    with pytest.raises(ValueError, match=r"n_boot=1000000 would cost about 1\.6e\+13 multiply-adds"):
        m.significance_test(X, X[:, 0], n_boot=10**6)
    with pytest.raises(ValueError, match=r"n_boot=1000000 would cost .*4000 queries x 4000 training points"):
        m.confidence_band(X, method="bootstrap", n_boot=10**6)


def test_n_boot_bounded_by_memory(monkeypatch):
    monkeypatch.setattr("nadaraya.inference.limits.physical_memory", lambda: 2.0**30)
    _, _, m = _model()
    X = np.linspace(0, 5, 200)[:, None]
    # 200 points x 1e6 replicates x 24 bytes = 4.5 GiB, more than half of 1 GiB
    with pytest.raises(
        ValueError, match=r"n_boot=1000000 needs about 4\.47 GiB .*half this machine's memory"
    ):
        m.confidence_band(X, kind="simultaneous", n_boot=10**6)
    m.confidence_band(X, kind="simultaneous", n_boot=99, random_state=0)  # within it


def test_cli_n_boot_beyond_the_bound(tmp_path):
    from typer.testing import CliRunner

    from nadaraya.cli import app

    data = tmp_path / "d.csv"
    data.write_text("x,y\n" + "".join(f"{i / 10},{np.sin(i / 10)}\n" for i in range(30)))
    r = CliRunner().invoke(
        app, ["test", str(data), "-x", "x", "-y", "y", "-b", "0.5", "--n-boot", "9999999999999"]
    )
    assert r.exit_code == 2
    assert "--n-boot 9999999999999 is too large" in r.output and "1000000" in r.output


# ------------------------------------------------------------------ item 10: unclear errors


@pytest.mark.parametrize("n", [1, 2])
def test_too_few_points_for_the_noise_variance(n):
    m = NadarayaWatson(bandwidth=0.5).fit(np.arange(float(n))[:, None], np.arange(float(n)) ** 2)
    if n == 2:
        with pytest.raises(
            ValueError,
            match=r"variance='heteroscedastic' .*at least 3 training points.*has 2.*"
            r"variance='homoscedastic'",
        ):
            m.predict([[0.5]], return_std=True)
        _, std = m.predict([[0.5]], return_std=True, variance="homoscedastic")
        assert np.isfinite(std).all()
    else:
        for variance in ("heteroscedastic", "homoscedastic"):
            with pytest.raises(ValueError, match=r"at least 2 training points of positive weight.*has 1"):
                m.predict([[0.5]], return_std=True, variance=variance)


def test_too_few_points_of_positive_weight():
    X = np.arange(6.0)[:, None]
    m = NadarayaWatson(bandwidth=0.5).fit(X, X[:, 0], sample_weight=[0, 0, 0, 0, 1, 2])
    with pytest.raises(ValueError, match=r"at least 3 training points of positive weight.*has 2"):
        m.confidence_band(Q)


@pytest.mark.parametrize("bad", ["abc", 1.5, -1, [1.0, "x"]])
def test_random_state_named(bad):
    X, y, m = _model()
    for call in (
        lambda: m.confidence_band(Q, method="bootstrap", random_state=bad),
        lambda: m.confidence_band(Q, random_state=bad),
        lambda: m.significance_test(X, y, n_boot=19, random_state=bad),
    ):
        with pytest.raises(ValueError, match=r"random_state=.* is not valid; give None, an integer"):
            call()


def test_level_numpy_floats_accepted():
    _, _, m = _model()
    for level in (np.float32(0.9), np.float64(0.9), np.float16(0.9)):
        got = m.confidence_band(Q, level=level)
        want = m.confidence_band(Q, level=float(level))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    with pytest.raises(ValueError, match="level must be a number in"):
        m.confidence_band(Q, level=np.True_)


@pytest.mark.parametrize("level", [1 - 1e-16, np.nextafter(1.0, 0.0)])
@pytest.mark.parametrize("method", ["asymptotic", "rbc"])
def test_level_with_an_infinite_quantile_refused(level, method):
    _, _, m = _model(degree=0)
    with pytest.raises(ValueError, match=r"level=0\.99999999999999.* too close to 1.*not finite"):
        m.confidence_band(Q, level=level, method=method)
    band = m.confidence_band(Q, level=1 - 1e-15, method=method)  # the largest level suggested: finite
    assert np.isfinite(band.lower).all() and np.isfinite(band.upper).all()


def test_n_boot_checked_only_where_the_band_bootstraps():
    _, _, m = _model()
    for n_boot in (5, 0):
        want = m.confidence_band(Q)
        got = m.confidence_band(Q, n_boot=n_boot)  # asymptotic pointwise: no replicates
        np.testing.assert_array_equal(got.lower, want.lower)
        got = m.confidence_band(Q, method="rbc", n_boot=n_boot)
        for kw in ({"method": "bootstrap"}, {"kind": "simultaneous"}):
            with pytest.raises(ValueError, match=rf"n_boot must be an integer of at least 19; got {n_boot}"):
                m.confidence_band(Q, n_boot=n_boot, **kw)


def test_cli_n_boot_checked_only_where_the_band_bootstraps(tmp_path):
    from typer.testing import CliRunner

    from nadaraya.cli import app

    data = tmp_path / "d.csv"
    data.write_text("x,y\n" + "".join(f"{i / 10},{np.sin(i / 10)}\n" for i in range(30)))
    model = tmp_path / "m.npz"
    run = CliRunner().invoke
    assert (
        run(app, ["fit", str(data), "-x", "x", "-y", "y", "-b", "0.5", "-m", str(model), "-q"]).exit_code == 0
    )
    r = run(
        app,
        [
            "predict",
            str(data),
            "-m",
            str(model),
            "-o",
            str(tmp_path / "p.csv"),
            "--band",
            "0.9",
            "--n-boot",
            "5",
            "-q",
        ],
    )
    assert r.exit_code == 0, r.output
    r = run(
        app,
        [
            "predict",
            str(data),
            "-m",
            str(model),
            "-o",
            str(tmp_path / "q.csv"),
            "--band",
            "0.9",
            "--simultaneous",
            "--n-boot",
            "5",
            "-q",
        ],
    )
    assert r.exit_code == 2 and "--n-boot 5 is too small" in r.output


def test_no_warning_leaks_from_the_checks():
    _, _, m = _model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.confidence_band(Q, level=np.float32(0.95), n_boot=3)
    assert nadaraya.NadarayaWatson  # the package imports its checks lazily


# ------------------------------------------------------------------ item 10: the CLI's files and columns


def _table(path):
    path.write_text("x,z,y\n" + "".join(f"{i / 10},{i % 3},{np.sin(i / 10)}\n" for i in range(400)))
    return path


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="file size limits are POSIX")
def test_cli_failed_write_names_the_file(tmp_path):
    """Under a file size limit the write fails with EFBIG: the message said "[Errno 27] File too
    large" and nothing about which file."""
    import subprocess
    import sys

    data = _table(tmp_path / "d.csv")
    model = tmp_path / "model.npz"
    out = tmp_path / "predictions.csv"
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4000, 4000))\n"
        "from nadaraya.cli import main\n"
        "sys.argv = ['nadaraya', *sys.argv[1:]]\n"
        "main()\n"
    )
    for args, name in (
        (["fit", str(data), "-x", "x", "-y", "y", "-b", "0.3", "-m", str(model), "-q"], model),
        (["predict", str(data), "-m", str(tmp_path / "small.npz"), "-o", str(out), "-q"], out),
    ):
        if args[0] == "predict":  # a model small enough to be written under the limit
            small = tmp_path / "s.csv"
            small.write_text("x,y\n0,0\n1,1\n2,4\n")
            from typer.testing import CliRunner

            from nadaraya.cli import app

            fit = [
                "fit",
                str(small),
                "-x",
                "x",
                "-y",
                "y",
                "-b",
                "1",
                "-m",
                str(tmp_path / "small.npz"),
                "-q",
            ]
            assert CliRunner().invoke(app, fit).exit_code == 0
        r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2, r.stderr
        assert str(name) in r.stderr and "File too large" in r.stderr, r.stderr
        assert "[Errno" not in r.stderr and "Traceback" not in r.stderr
        assert not name.exists()


@pytest.mark.parametrize("command", ["fit", "test", "select"])
def test_cli_target_among_the_features_refused(tmp_path, command):
    from typer.testing import CliRunner

    from nadaraya.cli import app

    data = _table(tmp_path / "d.csv")
    args = (
        [command, str(data), "-x", "x,y", "-y", "y", "-b", "0.3"]
        if command != "select"
        else [command, str(data), "-x", "x,y", "-y", "y"]
    )
    if command == "fit":
        args += ["-m", str(tmp_path / "m.npz")]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2, r.output
    assert "column 'y' is both a feature (--x) and a target (--y)" in r.output
    assert not (tmp_path / "m.npz").exists()


# ------------------------------------------------------------------ item 10: text and Categorical columns


def _colours(n: int = 120):
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 5, n)
    c = rng.choice(["red", "green", "blue"], n)
    y = np.sin(x) + 2.0 * (c == "red") + rng.normal(0, 0.2, n)
    return x, c, y


def _coded(c):
    return np.searchsorted(["blue", "green", "red"], c).astype(float)  # sorted labels, as the CLI codes


@pytest.mark.parametrize("form", ["frame", "categorical", "object array"])
def test_text_columns_declared_unordered_are_coded_as_the_cli_does(form, tmp_path):
    pd = pytest.importorskip("pandas")
    x, c, y = _colours()
    if form == "frame":
        X = pd.DataFrame({"x": x, "colour": c})
    elif form == "categorical":
        X = pd.DataFrame({"x": x, "colour": pd.Categorical(c)})
    else:
        X = np.array(list(zip(x, c)), dtype=object)
    kw = dict(bandwidth=[0.4, 0.1], var_types="cu")
    model = NadarayaWatson(**kw).fit(X, y)
    reference = NadarayaWatson(**kw).fit(np.c_[x, _coded(c)], y)  # the codes written out by hand
    np.testing.assert_array_equal(model.X_fit_, reference.X_fit_)
    qx, qc = [1.0, 2.0, 3.0], ["red", "blue", "purple"]  # purple: not seen in training, code -1
    Q = (
        pd.DataFrame({"x": qx, "colour": qc})
        if form != "object array"
        else np.array(list(zip(qx, qc)), dtype=object)
    )
    Qn = np.c_[qx, [2.0, 0.0, -1.0]]
    np.testing.assert_array_equal(model.predict(Q), reference.predict(Qn))
    for a, b in zip(model.predict(Q, return_std=True), reference.predict(Qn, return_std=True)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.confidence_band(Q).upper, reference.confidence_band(Qn).upper)
    key = "colour" if form != "object array" else "1"
    assert list(model.category_labels_[key]) == ["blue", "green", "red"]
    path = model.save(tmp_path / "m.npz")
    np.testing.assert_array_equal(nadaraya.load(path).predict(Q), model.predict(Q))


def test_ordered_categorical_keeps_its_order():
    pd = pytest.importorskip("pandas")
    x, _, y = _colours()
    rng = np.random.default_rng(1)
    size = rng.choice(["low", "mid", "high"], len(x))
    X = pd.DataFrame({"x": x, "size": pd.Categorical(size, categories=["low", "mid", "high"], ordered=True)})
    model = NadarayaWatson(bandwidth=[0.4, 0.3], var_types="co").fit(X, y)
    codes = np.select(
        [size == "low", size == "mid"], [0.0, 1.0], 2.0
    )  # the categories' order, not sorted text
    reference = NadarayaWatson(bandwidth=[0.4, 0.3], var_types="co").fit(np.c_[x, codes], y)
    q = pd.DataFrame(
        {"x": [1.0, 2.0], "size": pd.Categorical(["high", "low"], categories=["low", "mid", "high"])}
    )
    np.testing.assert_array_equal(model.predict(q), reference.predict(np.c_[[1.0, 2.0], [2.0, 0.0]]))


def test_ordered_text_without_an_order_refused_naming_the_column():
    pd = pytest.importorskip("pandas")
    x, c, y = _colours()
    with pytest.raises(ValueError, match=r"X column 'colour' is ordered \(var_types 'o'\) but holds text"):
        NadarayaWatson(bandwidth=[0.4, 0.3], var_types="co").fit(pd.DataFrame({"x": x, "colour": c}), y)


@pytest.mark.parametrize("form", ["frame", "categorical", "object array"])
def test_undeclared_text_column_named_with_var_types_suggested(form):
    pd = pytest.importorskip("pandas")
    x, c, y = _colours()
    if form == "object array":
        X, name = np.array(list(zip(x, c)), dtype=object), "X column 1"
    else:
        X = pd.DataFrame({"x": x, "colour": c if form == "frame" else pd.Categorical(c)})
        name = "X column 'colour'"
    with pytest.raises(ValueError, match=rf"{name} holds text \('blue', 'green', 'red'\).*var_types='cu'"):
        NadarayaWatson(bandwidth=0.4).fit(X, y)
    model = NadarayaWatson(bandwidth=0.4).fit(np.c_[x, _coded(c)], y)
    with pytest.raises(ValueError, match=rf"{name} holds text.*var_types='cu'"):
        model.predict(X)
