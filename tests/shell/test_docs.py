"""The documentation site: it builds with warnings as errors, runs its gallery, lists every public
name, runs the guide's code, fetches nothing, and renders in headless Chromium without errors."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import offline_tab

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
GALLERY = ROOT / "examples" / "gallery"
TOOLCHAIN = ("sphinx", "pydata_sphinx_theme", "numpydoc", "sphinx_gallery", "myst_parser")

#: modules whose ``__all__`` the API reference must cover (``nadaraya`` re-exports some names
#: that are documented under the module defining them)
PUBLIC_MODULES = ("nadaraya", "nadaraya.kernels", "nadaraya.partials", "nadaraya.backends",
                  "nadaraya.bandwidth", "nadaraya.nn", "nadaraya.plot", "nadaraya.datasets",
                  "nadaraya.persist")


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built once for this module, as `make docs` builds it (-W --keep-going, fresh)."""
    for name in TOOLCHAIN:
        pytest.importorskip(name, reason=f"{name} is missing: pip install '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    # run_stale_examples: sphinx-gallery would skip a script that did not change since the last
    # build, even when the library under it did
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-E",
           "-D", "sphinx_gallery_conf.run_stale_examples=True",
           "-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"the docs build failed:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    return out / "html"


def test_site_has_its_pages_and_every_gallery_example_ran(site: Path) -> None:
    for page in ("index.html", "guide/index.html", "guide/choosing.html", "guide/exactness.html",
                 "guide/model-files.html", "guide/scale-out.html", "api/index.html",
                 "api/generated/nadaraya.pool.html", "api/generated/nadaraya.NadarayaWatson.html",
                 "benchmarks.html", "design.html", "distributed.html", "testing.html",
                 "auto_examples/index.html", "search.html"):
        assert (site / page).is_file(), f"{page} was not built"
    scripts = sorted(GALLERY.glob("plot_*.py"))
    for script in scripts:
        page = site / "auto_examples" / f"{script.stem}.html"
        assert page.is_file(), f"{script.name} has no gallery page"
        html = page.read_text(encoding="utf-8")
        assert re.search(r"sphx-glr-(single-img|multi-img|script-out)", html), (
            f"{script.name} shows neither a figure nor output in the gallery")
    index = (site / "auto_examples" / "index.html").read_text(encoding="utf-8")
    assert index.count("sphx-glr-thumbcontainer") >= len(scripts)


def test_api_reference_covers_every_public_name(site: Path) -> None:
    """Each name in a public module's ``__all__`` has a page (or is the same object as one that
    has: ``nadaraya.load`` is ``nadaraya.persist.load``)."""
    from sphinx.util.inventory import InventoryFile

    with open(site / "objects.inv", "rb") as f:
        inventory = InventoryFile.load(f, "", lambda base, uri: uri)
    documented = {name for kind, entries in inventory.items() if kind.startswith("py:") for name in entries}

    def resolve(full: str) -> object:
        module, _, attr = full.rpartition(".")
        return getattr(importlib.import_module(module), attr)

    by_identity = {}
    for name in documented:
        try:
            by_identity.setdefault(id(resolve(name)), name)
        except (ImportError, AttributeError, ValueError):
            continue
    missing = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if name == "__version__" or type(obj).__name__ == "module":
                continue
            full = f"{module_name}.{name}"
            if full not in documented and id(obj) not in by_identity:
                missing.append(full)
    assert not missing, f"not in the API reference (add them to docs/api/*.rst): {missing}"
    for page in (site / "api").rglob("*.html"):  # a constant shows its own comment, not its type's
        assert "int([x]) -&gt; integer" not in page.read_text(encoding="utf-8"), page.name


def test_built_site_fetches_nothing(site: Path) -> None:
    """No page, script or style sheet refers to the network (no CDN, fonts or analytics)."""
    remote = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|@import\s+url\(\s*["']?(?:https?:)?//""")
    for path in site.rglob("*"):
        if path.suffix not in (".html", ".css", ".js"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".html":
            # links the reader may follow are fine; what the page itself loads is not
            text = re.sub(r"<a\s[^>]*>", "", text)
        hit = remote.search(text)
        assert hit is None, f"{path.relative_to(site)} loads {text[hit.start():hit.start() + 120]!r}"


@pytest.mark.parametrize("page", [*sorted((DOCS / "guide").glob("*.md")), DOCS / "index.md"],
                         ids=lambda p: p.name)
def test_guide_code_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ```python block of a guide page runs as it is, in order, in one namespace."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__guide__"}
    for block in _python_blocks(page):
        if "import dask" in block:
            pytest.importorskip("dask.array", reason="the dask extra is not installed")
        exec(compile(block, str(page), "exec"), namespace)


@pytest.mark.browser
def test_pages_render_offline_in_chromium(site: Path) -> None:
    """The index, an API page and a gallery page render in headless Chromium with their heading
    visible, no console error, and no request to anything but the files themselves."""
    examples = sorted(GALLERY.glob("plot_*.py"))
    pages = {"index.html": "nadaraya", "api/generated/nadaraya.pool.html": "nadaraya.pool"}
    if examples:
        pages[f"auto_examples/{examples[0].stem}.html"] = None  # the script's own title
    with offline_tab() as (tab, errors, requests):
        for page, heading in pages.items():
            tab.goto((site / page).as_uri())
            tab.wait_for_load_state("load")
            h1 = tab.locator("article h1").first
            assert h1.is_visible(), f"{page}: no visible heading"
            text = h1.inner_text().strip().rstrip("#").strip()
            if heading is not None:
                assert text == heading, f"{page}: heading {text!r}"
            else:
                assert text, f"{page}: empty heading"
                figure = tab.locator("img.sphx-glr-single-img, img.sphx-glr-multi-img").first
                assert figure.is_visible(), f"{page}: no figure visible"
                assert tab.evaluate("el => el.naturalWidth", figure.element_handle()) > 0
    assert errors == []
    assert requests == []
