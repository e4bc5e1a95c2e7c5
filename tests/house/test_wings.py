"""The house's shape: no circle of imports, few rooms at the top, the contracts bind, and what
release 0.1.0 wrote or exported still loads."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "nadaraya"
RELEASE = ROOT / "tests" / "fixtures" / "release_0_1_0"


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        rel = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        out[rel.removesuffix(".__init__")] = path
    return out


def _edges() -> dict[str, set[str]]:
    """Every import among nadaraya's modules: top level, inside functions and type-only alike
    (a package's face importing its own rooms is its door, not an edge back)."""
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = m.split(".") if is_pkg else m.split(".")[:-1]
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                tail = [node.module] if node.module else []
                b = ".".join(base + tail) if node.level else node.module or ""
                targets = [b] + [f"{b}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != m and not (is_pkg and t.startswith(m + ".")):
                    edges[m].add(t)
    return edges


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.append(w)
                    if w == node:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return out


def test_no_circle_among_modules() -> None:
    assert _circles(_edges()) == []


def test_no_circle_among_packages() -> None:
    """Collapse every module into its wing (``nadaraya.x``): the wings form no circle either."""
    wings: dict[str, set[str]] = {}
    for m, targets in _edges().items():
        w = ".".join(m.split(".")[:2])
        wings.setdefault(w, set())
        wings[w] |= {".".join(t.split(".")[:2]) for t in targets} - {w, "nadaraya"}
    for w in list(wings.values()):
        for t in w:
            wings.setdefault(t, set())
    assert _circles(wings) == []


def test_the_detector_finds_a_circle() -> None:
    """The check above could fail: a made-up circle is found."""
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_few_private_rooms_at_the_top() -> None:
    flat = sorted(p.name for p in SRC.glob("_*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(flat) <= 4, flat


def test_the_contracts_bind_every_import() -> None:
    """Type-only imports count, and no layer joins many siblings with ``:``."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert config["exclude_type_checking_imports"] is False
    for contract in config["contracts"]:
        for layer in contract.get("layers", []):
            assert ":" not in layer, f"{contract['name']}: {layer!r} joins siblings that import each other"
    forbidden = {tuple(c["forbidden_modules"]) for c in config["contracts"] if c["type"] == "forbidden"}
    assert {("dask", "distributed"), ("torch",), ("matplotlib", "typer", "rich")} <= forbidden


@pytest.mark.parametrize("name", ["constant", "linear_cv", "mixed_aicc", "weighted"])
def test_release_0_1_0_pickles_and_model_files_still_load(name: str) -> None:
    """Fixtures written by release 0.1.0 (tests/fixtures/release_0_1_0/make_fixtures.py): pickles
    carrying its private classes (``nadaraya._fit.Job``, ``nadaraya._inference._Training``,
    ``nadaraya.pooling.Call``...) and model files load and predict exactly as they did."""
    from nadaraya import persist

    X = np.load(RELEASE / f"{name}_X.npy")
    expected = np.load(RELEASE / f"{name}_predict.npy")
    model = pickle.loads((RELEASE / f"{name}.pkl").read_bytes())
    # the local-linear fixture to the rounding of its per-query solve (0.1.0 solved with LAPACK's
    # LU, the compiled solve by Cholesky): a few ulp; the others bit for bit
    rtol = 1e-13 if name == "linear_cv" else 0.0
    np.testing.assert_allclose(model.predict(X), expected, rtol=rtol, atol=0)
    band = model.confidence_band(X[:3])
    assert np.all(band.lower <= band.upper)
    np.testing.assert_allclose(persist.load(RELEASE / f"{name}.npz").predict(X), expected, rtol=rtol, atol=0)


def test_release_0_1_0_names_still_import() -> None:
    import importlib

    names = json.loads((RELEASE / "names.json").read_text())
    for module, listed in names.items():
        mod = importlib.import_module(module)
        missing = [n for n in listed if not hasattr(mod, n)]
        assert not missing, f"{module} lost {missing}"


def test_no_code_reads_the_old_paths() -> None:
    """The old module paths of release 0.1.0 (``nadaraya._compat.MOVED``) are for its pickles
    only: no module of the project imports one, relatively or not (it would hide a move)."""
    from nadaraya._compat import MOVED

    found = []
    for folder in ("src", "tests", "benchmarks", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "_compat.py" or "fixtures" in path.parts:
                continue
            here = ".".join(path.relative_to(ROOT / "src").with_suffix("").parts) if folder == "src" else ""
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = here.split(".")[: len(here.split(".")) - node.level] if node.level else []
                    mod = ".".join(base + ([node.module] if node.module else []))
                    names = [mod] + [f"{mod}.{a.name}" for a in node.names]
                found += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names if n in MOVED]
    assert not found, "\n".join(found)
