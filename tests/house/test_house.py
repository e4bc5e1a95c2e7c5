"""The house rules: every module stands in a layer, rooms stay small (docs/design.md)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "nadaraya"
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def _layer_names(container: str | None = None) -> set[str]:
    """The modules named by the layers contract of ``container`` (None: the wings contract)."""
    contract = next(c for c in _contracts()
                    if c["type"] == "layers" and c.get("containers", [None])[0] == container)
    names: set[str] = set()
    for layer in contract["layers"]:
        for part in layer.replace("|", ":").split(":"):
            name = part.strip().strip("()")
            names.add(f"{container}.{name}" if container else name)
    return names


def _children(package: Path, prefix: str) -> set[str]:
    """A package's own modules and subpackages, one level down (``prefix.x``)."""
    found = set()
    for path in package.iterdir():
        if path.suffix == ".py" and path.name != "__init__.py":
            found.add(f"{prefix}.{path.stem}")
        elif path.is_dir() and (path / "__init__.py").exists():
            found.add(f"{prefix}.{path.name}")
    return found


def test_every_module_stands_in_a_layer() -> None:
    """A new module outside the layers contracts would escape `lint-imports`: name it there. The
    wings contract holds nadaraya's top level; each package's own contract holds its rooms."""
    layers = _layer_names()
    top = _children(SRC, "nadaraya")
    missing = sorted(top - layers)
    assert not missing, f"add these modules to the wings contract in pyproject.toml: {missing}"
    stale = sorted(name for name in layers if name not in top)
    assert not stale, f"the wings contract names modules that do not exist: {stale}"
    for package in sorted(p for p in SRC.iterdir() if (p / "__init__.py").exists()):
        name = f"nadaraya.{package.name}"
        rooms = _children(package, name)
        if not rooms:
            continue
        named = _layer_names(name)
        assert rooms == named, f"{name}: its contract in pyproject.toml lacks {sorted(rooms - named)} " \
                               f"and names {sorted(named - rooms)} that do not exist"


def test_the_backends_and_the_core_sit_below_pooling() -> None:
    """The order the design states: a backend never sits above pooling or bandwidth."""
    layers = next(c for c in _contracts() if c["type"] == "layers" and "containers" not in c)["layers"]
    position = {}
    for i, layer in enumerate(layers):
        for part in layer.replace("|", ":").split(":"):
            position[part.strip()] = i
    order = ["nadaraya.cli", "nadaraya.nn", "nadaraya.estimator", "nadaraya.pooling", "nadaraya.bandwidth",
             "nadaraya.local", "nadaraya._core", "nadaraya.backends", "nadaraya.kernels", "nadaraya._support"]
    assert [position[name] for name in order] == sorted(position[name] for name in order)
    assert position["nadaraya.kernels"] == position["nadaraya.partials"]


def _numba_compiled(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("njit" in ast.unparse(d) or "numba.jit" in ast.unparse(d) for d in node.decorator_list)


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_rooms_stay_small(path: Path) -> None:
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_FILE_LINES, f"{path.name}: over {MAX_FILE_LINES} lines"
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
        and not _numba_compiled(node)
    ]
    assert not long, f"{path.name}: functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_every_module_says_what_it_holds() -> None:
    """A module starts with a docstring whose first line says what it holds."""
    silent = [
        str(p.relative_to(SRC))
        for p in sorted(SRC.rglob("*.py"))
        if not (ast.get_docstring(ast.parse(p.read_text())) or "").strip()
    ]
    assert not silent, f"modules without a docstring: {silent}"
