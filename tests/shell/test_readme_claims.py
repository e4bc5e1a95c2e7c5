"""The README's and the public docstrings' statements of fact, read from their text and checked
against what the library does: the degrees offered, the kernels and their aliases, where ``tol=``
takes a faster method, the extras, the defaults and limits, the peers' features.

Each test parses the claim from the text it checks, so that the text and the behaviour cannot
drift apart silently: a test fails when either changes alone."""

from __future__ import annotations

import inspect
import itertools
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import tomllib

import nadaraya
import nadaraya._core.attention
import nadaraya.local.fit
import nadaraya.local.job
import nadaraya.persist
from nadaraya import backends
from nadaraya.kernels import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LOCAL_GUIDE = (ROOT / "docs" / "guide" / "local.md").read_text(encoding="utf-8")


def _row(table_header: str) -> list[str]:
    """The cells of the README's comparison-table row that starts with ``table_header``."""
    start = f"| {table_header} |" if table_header else "| | nadaraya |"
    line = next((ln for ln in README.splitlines() if ln.startswith(start)), None)
    assert line is not None, f"the README has no table row {table_header!r}"
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


# --- degrees -------------------------------------------------------------------------------------
def _readme_degrees() -> set[int]:
    cell = _row("local constant / linear / quadratic / cubic fits")[1]
    found = re.search(r"`degree=([\d, ]+)`", cell)
    assert found, cell
    return {int(v) for v in found.group(1).split(",")}


def _accepted(call) -> set[int]:  # type: ignore[no-untyped-def]
    ok = set()
    for degree in range(-1, 6):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a bandwidth on its search's bound says so
                call(degree)
        except ValueError as err:
            assert "degree" in str(err) or "moments" in str(err), err
        else:
            ok.add(degree)
    return ok


X1 = np.linspace(0.0, 1.0, 30)
Y1 = np.sin(3 * X1)


@pytest.mark.parametrize("entry", ["pool", "loo_pool", "NadarayaWatson", "select_bandwidth"])
def test_degrees_the_readme_lists_are_exactly_those_accepted(entry: str) -> None:
    calls = {
        "pool": lambda r: nadaraya.pool([0.5], X1, Y1, bandwidth=0.2, degree=r),
        "loo_pool": lambda r: nadaraya.loo_pool(X1, Y1, bandwidth=0.2, degree=r),
        "NadarayaWatson": lambda r: nadaraya.NadarayaWatson(bandwidth=0.2, degree=r).fit(X1[:, None], Y1),
        "select_bandwidth": lambda r: nadaraya.select_bandwidth(X1, Y1, degree=r),
    }
    assert _accepted(calls[entry]) == _readme_degrees()


def _backend_degrees() -> dict[tuple[str, int], int]:
    """(backend, features) -> the highest degree the README's table row gives a named backend."""
    cell = _row("local constant / linear / quadratic / cubic fits")[1]
    named = cell.split("of the backends named:", 1)[1]
    out: dict[tuple[str, int], int] = {}
    for part in named.split(","):
        names = re.findall(r"`(\w+)`", part)
        limits = re.findall(r"(\d) in 1-D and (\d) in 2-3 features", part)
        top = re.search(r"(?:up to )?(\d)\s*$", part.strip())
        for name in names:
            for d in (1, 2, 3):
                if limits:
                    out[name, d] = int(limits[0][0] if d == 1 else limits[0][1])
                else:
                    assert top, part
                    out[name, d] = int(top.group(1))
    return out


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("backend", sorted(backends.available()))
def test_each_backend_takes_the_degrees_the_readme_gives_it(backend: str, d: int) -> None:
    """Every backend takes degree 0-3 but those the README's row names with a lower limit."""
    if backend == "dask":
        pytest.importorskip("dask")
    if backend == "torch":
        pytest.importorskip("torch")
    if backend in ("laplace", "logistic") and d > 1:
        pytest.skip(f"the {backend} backend is 1-D")
    limits = _backend_degrees()
    special = {"laplace": "laplacian", "windowed": "epanechnikov", "constant": "constant",
               "logistic": "logistic"}
    kernel = special.get(backend, "gaussian")
    x = np.random.default_rng(0).uniform(0.0, 1.0, (200, d))
    extra = {"tol": 1e-6} if backend in ("taylor", "binned") else {}
    accepted = _accepted(lambda r: nadaraya.pool(x[:3], x, x.sum(axis=1), kernel=kernel, bandwidth=0.3,
                                                 degree=r, backend=backend, **extra))
    assert accepted == set(range(limits.get((backend, d), max(_readme_degrees())) + 1))


def test_degrees_named_in_the_prose_and_the_guide_are_those_accepted() -> None:
    named = re.search(r"intercept is the prediction: (.*?)\. Which to choose", README, flags=re.S)
    assert named, "the README's local-fits section no longer names the degrees"
    prose = {int(v) for v in re.findall(r"(?:^|, )(\d) ", named.group(1).replace("\n", " "))}
    guide = {int(v) for v in re.findall(r"^\| (\d) \| ", LOCAL_GUIDE, flags=re.M)}
    assert prose == guide == _readme_degrees() == set(range(nadaraya.local.job.MAX_DEGREE + 1))


# --- kernels -------------------------------------------------------------------------------------
def _kernel_table() -> dict[str, tuple[str, set[str]]]:
    """name -> (support cell, aliases) from the README's Kernels table."""
    section = README.split("## Kernels", 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 4 and re.fullmatch(r"`\w+`", cells[0]):
            out[cells[0].strip("`")] = (cells[2], set(re.findall(r"`(\w+)`", cells[3])))
    return out


def test_kernels_listed_are_exactly_the_registry_with_its_aliases_and_supports() -> None:
    table = _kernel_table()
    assert set(table) == set(REGISTRY)
    for name, (support, aliases) in table.items():
        kernel = REGISTRY[name]
        assert aliases == set(kernel.aliases), name
        assert (support == "∞") == (kernel.support == np.inf), (name, support, kernel.support)
        for alias in aliases:
            assert nadaraya.kernels.get(alias) is nadaraya.kernels.get(name)


def test_the_kernel_count_stated_is_the_registry_size() -> None:
    count = re.match(r"(\d+),", _row("kernels")[1])
    assert count and int(count.group(1)) == len(REGISTRY)
    words = {"twelve": 12, "eleven": 11, "thirteen": 13}
    stated = re.search(r"`kernels\.png` \(all (\w+) kernels\)", README)
    assert stated and words[stated.group(1)] == len(REGISTRY)


# --- tol= ----------------------------------------------------------------------------------------
class _Chosen(Exception):
    pass


def _tol_claim() -> tuple[tuple[int, int, int, int], tuple[int, int, int]]:
    """From :func:`nadaraya.pool`'s ``tol`` entry: the Gaussian's (features lo, hi, degree lo,
    hi) and the logistic kernel's (features lo, hi, degree), plain pooling only."""
    doc = " ".join(inspect.getdoc(nadaraya.pool).split("tol : float", 1)[1].split("Returns\n")[0].split())
    gauss = re.search(r"Gaussian kernel \(:mod:`nadaraya\.backends\.taylor`\) in (\d) to (\d) continuous "
                      r"features at ``degree`` (\d) to (\d), also in leave-one-out sums", doc)
    logistic = re.search(r"logistic kernel \(:mod:`nadaraya\.backends\.binned`\) in (\d) or (\d) features "
                         r"at ``degree=(\d)``, in plain pooling only", doc)
    assert gauss and logistic, f"pool's tol entry no longer says where it serves: {doc}"
    return tuple(map(int, gauss.groups())), tuple(map(int, logistic.groups()))  # type: ignore[return-value]


def _claimed(kernel: str, d: int, degree: int, loo: bool) -> bool:
    (g_lo, g_hi, r_lo, r_hi), (l_lo, l_hi, l_degree) = _tol_claim()
    if kernel == "gaussian":
        return g_lo <= d <= g_hi and r_lo <= degree <= r_hi
    if kernel == "logistic":
        return l_lo <= d <= l_hi and degree == l_degree and not loo
    return False


#: per number of features: data (keys = queries) and bandwidths on which the faster methods pay
#: wherever they serve (found by the cost models of nadaraya.backends; the sums are not computed)
_TOL_DATA = {1: (20_000, (0.001, 5.0)), 2: (20_000, (0.5, 10.0)), 3: (20_000, (5.0, 10.0, 20.0)),
             4: (20_000, (5.0, 20.0))}


@pytest.fixture(scope="module")
def served(request: pytest.FixtureRequest) -> dict[tuple[str, int, int, bool], set[str]]:
    """The backends ``backend="auto"`` picks with ``tol`` for every kernel, number of features (1
    to 4), degree (0 to 3) and leave-one-out or not, on data where a faster method pays: the
    engine is replaced by one that only reports its choice."""
    mp = pytest.MonkeyPatch()

    def report(name: str, *args: object, **kwargs: object) -> None:
        raise _Chosen(name)

    mp.setattr(backends, "compute", report)
    out: dict[tuple[str, int, int, bool], set[str]] = {}
    rng = np.random.default_rng(0)
    try:
        for d, (n, bandwidths) in _TOL_DATA.items():
            x = rng.uniform(0.0, 5.0, (n, d))
            y = rng.normal(size=n)
            for kernel in REGISTRY:
                for degree in range(4):
                    for loo in (False, True):
                        got = out.setdefault((kernel, d, degree, loo), set())
                        for tol, h in itertools.product((1e-3, 1e-8), bandwidths):
                            try:
                                args = dict(kernel=kernel, bandwidth=h, degree=degree, tol=tol)
                                if loo:
                                    nadaraya.loo_pool(x, y, **args)
                                else:
                                    nadaraya.pool(x, x, y, **args)
                            except _Chosen as chosen:
                                got.add(str(chosen))
                            if got & {"taylor", "binned"}:
                                break  # one faster method found is enough
    finally:
        mp.undo()
    return out


@pytest.mark.parametrize("loo", [False, True], ids=["pool", "loo_pool"])
@pytest.mark.parametrize("degree", range(4))
@pytest.mark.parametrize("d", range(1, 5))
def test_tol_takes_a_faster_method_exactly_where_pool_says(served, d: int, degree: int, loo: bool) -> None:
    for kernel in REGISTRY:
        chosen = served[kernel, d, degree, loo]
        fast = chosen & {"taylor", "binned"}
        assert bool(fast) == _claimed(kernel, d, degree, loo), (kernel, d, degree, loo, chosen)
        if fast:
            assert fast == ({"taylor"} if kernel == "gaussian" else {"binned"})


def test_tol_below_the_floor_is_exact() -> None:
    """``tol >= 1e-12`` in pool's entry: a smaller tol is served exactly."""
    doc = " ".join(inspect.getdoc(nadaraya.pool).split())
    assert "both for ``tol >= 1e-12``" in doc
    x = np.linspace(0.0, 5.0, 20_000)[:, None]
    for kernel in ("gaussian", "logistic"):
        for h in (0.01, 1.0):
            choice = backends.choose_for_data(REGISTRY[kernel], x, x, np.array([h]), tol=0.9e-12)
            assert choice is None or choice.name not in ("taylor", "binned")
    choice = backends.choose_for_data(REGISTRY["gaussian"], x, x, np.array([0.1]), tol=1e-12)
    assert choice is not None and choice.name == "taylor"


def test_the_readme_and_the_estimator_say_what_pool_says_about_tol() -> None:
    (g_lo, g_hi, r_lo, r_hi), (l_lo, l_hi, l_degree) = _tol_claim()
    cell = _row("sums to a stated tolerance")[1]
    assert f"the Gaussian in {g_lo}-{g_hi} features at degree {r_lo}-{r_hi}" in cell, cell
    assert f"the logistic kernel in {l_lo}-{l_hi} features at degree {l_degree}" in cell, cell
    assert "not in leave-one-out sums" in cell
    # the other entry points defer to pool's statement rather than narrow it
    for doc in (inspect.getdoc(nadaraya.NadarayaWatson), inspect.getdoc(nadaraya.select_bandwidth)):
        entry = doc.split("tol : float", 1)[1].split("\n\n")[0]
        assert "in 1-D;" not in entry and "(today the Gaussian kernel in 1-D" not in entry, entry


@pytest.mark.parametrize(("d", "degree", "n"), [(1, 0, 10_000), (1, 1, 3000), (1, 2, 3000), (2, 1, 2000),
                                                (2, 2, 4000)])
def test_the_search_takes_the_series_where_select_bandwidth_says(d: int, degree: int, n: int,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """select_bandwidth's ``tol`` entry: the Gaussian's passes at degree 0 in 1-D and at degree 1
    or 2 in 1 to 3 features take the series where they pay (here: its first primitive pass; in 2-D
    at degree 2 from n = 4000: below, the exact grid with moments or the fused loop costs less)."""
    doc = " ".join(inspect.getdoc(nadaraya.select_bandwidth).split())
    assert ("at ``degree=0`` in 1-D, at ``degree`` 1 or 2 in 1 to 3 continuous features" in doc)

    def report(name: str, *args: object, **kwargs: object) -> None:
        raise _Chosen(name)

    monkeypatch.setattr(backends, "compute", report)
    rng = np.random.default_rng(1)
    x = rng.uniform(0.0, 5.0, (n, d))
    y = np.sin(x).sum(axis=1) + 0.3 * rng.normal(size=n)
    with pytest.raises(_Chosen, match=r"^taylor$"):
        nadaraya.select_bandwidth(x, y, degree=degree, tol=1e-8, per_feature=d > 1)


# --- the comparison table, extras, defaults and limits -------------------------------------------
def test_np_cluster_support_is_stated() -> None:
    """R's np runs on MPI clusters through its sibling package npRmpi."""
    header = _row("")  # the header row's first cell is empty
    cells = dict(zip(header, _row("Dask arrays and clusters"), strict=True))
    assert "npRmpi" in cells["R `np`"] and "MPI" in cells["R `np`"]


def test_extras_table_matches_pyproject() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    section = README.split("| extra | brings | for |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (.*?) \|", section, flags=re.M)
    assert {name for name, _ in rows} == set(extras)

    def names(extra: str) -> set[str]:
        out = set()
        for req in extras[extra]:
            base = re.match(r"[\w.-]+", req).group(0).lower()
            if base == "nadaraya":
                for inner in re.search(r"\[(.*)\]", req).group(1).split(","):
                    out |= names(inner)
            else:
                out.add(base)
        return out

    spelled = {"pytorch": "torch", "pydata-sphinx-theme": "pydata-sphinx-theme"}
    for name, brings in rows:
        if name in ("all", "dev"):  # "all of the above"; dev ends with "..."
            continue
        listed = {spelled.get(w.lower(), w.lower()) for w in re.findall(r"[\w-]+", brings)}
        assert listed <= names(name), (name, listed)
    assert names("all") == names("torch") | names("dask") | names("plot") | names("cli")


def test_defaults_and_limits_stated() -> None:
    config = nadaraya.get_config()
    assert "(default 256 MiB)" in README and config["working_memory"] == 256
    assert "four times the working memory: 1 GiB" in README
    assert nadaraya._core.attention._dense_limit(None) == 4 * 256 * 2**20
    assert "16 GiB by default (`MAX_MODEL_BYTES`" in README and nadaraya.persist.MAX_MODEL_BYTES == 16 * 2**30
    sig = inspect.signature(nadaraya.select_bandwidth).parameters
    stated = re.search(r"select_bandwidth\(X, y, method=\"cv\" \| \"aicc\", kernel=\.\.\., "
                       r"per_feature=(\w+),\s+sample_weight=(\w+)\)", README)
    assert stated
    assert (sig["method"].default, repr(sig["per_feature"].default), repr(sig["sample_weight"].default)) == (
        "cv", stated.group(1), stated.group(2))
    est = inspect.signature(nadaraya.NadarayaWatson).parameters
    assert est["bandwidth"].default == "cv" and est["empty"].default == "nearest"
    assert inspect.signature(nadaraya.pool).parameters["empty"].default == "nan"
    assert "`NadarayaWatson` defaults to `empty=\"nearest\"`" in README


def test_datasets_and_plot_functions_stated() -> None:
    pytest.importorskip("matplotlib")
    import nadaraya.datasets
    import nadaraya.plot

    stated = re.search(r"`textbook\(n=(\d+), noise=([\d.]+), seed=(\d+),\s+variant=\"(.*?)\" \| \"(.*?)\"\)`",
                       README)
    assert stated
    sig = inspect.signature(nadaraya.datasets.textbook).parameters
    assert (sig["n"].default, sig["noise"].default, sig["seed"].default, sig["variant"].default) == (
        int(stated.group(1)), float(stated.group(2)), int(stated.group(3)), stated.group(4))
    nadaraya.datasets.textbook(variant=stated.group(5))
    listed = re.search(r"draws the same figures on any matplotlib Axes \((.*?); each takes `ax=None`", README,
                       flags=re.S)
    assert listed
    for name in re.findall(r"`(\w+)`", listed.group(1)):
        assert inspect.signature(getattr(nadaraya.plot, name)).parameters["ax"].default is None, name


#: the README's kernel formulas, as written there and as plain Python
_FORMULAS = {
    "gaussian": ("exp(-u²/2) / √(2π) (computed in the log domain)",
                 lambda u: np.exp(-u**2 / 2) / np.sqrt(2 * np.pi)),
    "epanechnikov": ("3/4 (1 - u²)", lambda u: 0.75 * (1 - u**2)),
    "boxcar": ("1/2", lambda u: 0.5 + 0 * u),
    "triangular": ("1 - |u|", lambda u: 1 - abs(u)),
    "biweight": ("15/16 (1 - u²)²", lambda u: 15 / 16 * (1 - u**2) ** 2),
    "triweight": ("35/32 (1 - u²)³", lambda u: 35 / 32 * (1 - u**2) ** 3),
    "tricube": ("70/81 (1 - |u|³)³", lambda u: 70 / 81 * (1 - abs(u) ** 3) ** 3),
    "cosine": ("π/4 cos(πu/2)", lambda u: np.pi / 4 * np.cos(np.pi * u / 2)),
    "parzen": ("cubic B-spline: 4/3 - 8u² + 8|u|³, then 8/3 (1 - |u|)³",
               lambda u: np.where(abs(u) <= 0.5, 4 / 3 - 8 * u**2 + 8 * abs(u) ** 3,
                                  8 / 3 * (1 - abs(u)) ** 3)),
    "constant": ("1: average pooling", lambda u: 1 + 0 * u),
    "laplacian": ("exp(-|u|) / 2 (log domain)", lambda u: np.exp(-abs(u)) / 2),
    "logistic": ("1 / (eᵘ + 2 + e⁻ᵘ) (log domain)", lambda u: 1 / (np.exp(u) + 2 + np.exp(-u))),
}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_kernel_formulas_in_the_readme_are_the_kernels(name: str) -> None:
    """Each formula of the README's table, written out here, equals the kernel's profile inside
    its support (0 outside), and integrates to 1 (but average pooling's constant)."""
    section = README.split("## Kernels", 1)[1].split("\n## ", 1)[0]
    row = next(ln for ln in section.splitlines() if ln.startswith(f"| `{name}` |"))
    cell = re.split(r"(?<!\\)\|", row)[2].strip().replace("\\|", "|").replace("\u2212", "-")
    text, formula = _FORMULAS[name]
    assert cell == text
    kernel = REGISTRY[name]
    u = np.linspace(-3.0, 3.0, 601)
    inside = np.abs(u) <= kernel.support
    want = np.where(inside, formula(u), 0.0)
    np.testing.assert_allclose(kernel.profile(u), want, rtol=1e-12, atol=1e-15)
    if name != "constant":
        from scipy.integrate import quad

        lim = min(kernel.support, 60.0)
        total = sum(quad(formula, a, b)[0] for a, b in ((-lim, 0.0), (0.0, lim)))
        assert total == pytest.approx(1.0, rel=1e-8), name
