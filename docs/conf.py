"""Sphinx configuration of the nadaraya documentation site (built offline by `make docs`)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))

import nadaraya

project = "nadaraya"
author = "the nadaraya developers"
copyright = "the nadaraya developers, BSD-3-Clause"
release = nadaraya.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "auto_examples/*.ipynb", "auto_examples/*.py"]
templates_path = ["_templates"]
# Broken cross-references fail the build (with -W). Targets outside the site (no intersphinx:
# it would download inventories) and private modules are not checked.
nitpicky = True
_EXTERNAL = (r"(builtins|collections|dask|distributed|json|matplotlib|numba|numpy|os|pandas|pathlib|scipy"
             r"|sklearn|torch|typing|zarr|np|pd|da|Path|ArrayLike|NDArray)")
nitpick_ignore_regex = [
    (r"py:.*", _EXTERNAL + r"(\..*)?"),
    (r"py:.*", r"(.*\.)?_\w*(\..*)?"),  # private modules and names
    (r"py:mod", r"\.?\w+"),  # a package's own rooms, named relatively in its docstring
]
nitpick_ignore = [
    ("py:func", "nadaraya._core.call.compute_partials"),  # the pooling layer's internal entry point
    ("py:func", "reporting"),  # bandwidth/search.py's select_bandwidth names a helper of no page
]

# --- API reference -------------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_typehints = "none"  # numpydoc's Parameters section already says the types
# the class template documents the members in full (scikit-learn's generated metadata-routing
# setters skipped), so numpydoc's own summary table of them is not needed
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

# --- Markdown pages (design.md, distributed.md, testing.md, benchmarks.md, the guide) -------------
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# --- gallery -------------------------------------------------------------------------------------
# S2's scripts live in examples/gallery/ (every plot_*.py is executed). While that folder is
# missing or has no README.txt the site builds with a placeholder gallery page instead.
GALLERY = ROOT / "examples" / "gallery"
HAVE_GALLERY = (GALLERY / "README.txt").is_file() or (GALLERY / "GALLERY_HEADER.rst").is_file()

sphinx_gallery_conf = {
    "examples_dirs": [os.path.relpath(GALLERY, HERE)] if HAVE_GALLERY else [],
    "gallery_dirs": ["auto_examples"] if HAVE_GALLERY else [],
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py|/_",
    "only_warn_on_example_error": False,
    "abort_on_example_error": False,
    "plot_gallery": "True",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "reset_modules": ("matplotlib",),
    "show_memory": False,
    "show_signature": False,
    "promote_jupyter_magic": False,
    "first_notebook_cell": None,
    "line_numbers": False,
    "capture_repr": ("_repr_html_", "__repr__"),
    "doc_module": ("nadaraya",),
    "backreferences_dir": "api/backreferences",
    "reference_url": {"nadaraya": None},
    "inspect_global_variables": False,
    "write_computation_times": False,
}

if not HAVE_GALLERY:
    placeholder = HERE / "auto_examples" / "index.rst"
    placeholder.parent.mkdir(exist_ok=True)
    text = (
        "Gallery\n=======\n\nThe gallery's scripts (``examples/gallery/plot_*.py``) are not in this "
        "checkout yet.\n"
    )
    if not placeholder.exists() or placeholder.read_text() != text:
        placeholder.write_text(text)

# --- HTML: the pydata theme, with nothing fetched from the network --------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"nadaraya {release}"
html_static_path = ["_static"]
html_css_files = ["nadaraya.css"]
html_last_updated_fmt = None
html_context = {"default_mode": "auto"}  # light or dark as the reader's system prefers
html_show_sourcelink = False
html_copy_source = False
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "show_prev_next": True,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "secondary_sidebar_items": ["page-toc"],
    "header_links_before_dropdown": 5,
    "icon_links": [],
    "analytics": {},
}
html_sidebars = {"index": []}
html_math_renderer = "svg"
toc_object_entries_show_parents = "hide"  # the page TOC names members "fit()", not "NadarayaWatson.fit()"


def _math_image(tex: str) -> str | None:
    """``tex`` drawn by matplotlib's mathtext as an inline SVG data URI (None if it cannot)."""
    import base64
    import io

    from matplotlib import mathtext
    from matplotlib.font_manager import FontProperties

    buf = io.BytesIO()
    try:
        mathtext.math_to_image(f"${tex}$", buf, prop=FontProperties(size=15, math_fontfamily="cm"),
                               format="svg")
    except ValueError:
        return None
    svg = re.sub(rb"<metadata>.*?</metadata>", b"", buf.getvalue(), flags=re.S)
    svg = svg.replace(b'style="fill: #ffffff"', b'style="fill: none"', 1)  # transparent, for dark mode
    return "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")


def _math_visit(self, node):  # type: ignore[no-untyped-def]
    """Math drawn by matplotlib into inline SVG, in the page itself: MathJax would come from a
    CDN, and the site fetches nothing. TeX that mathtext cannot draw is shown as its source."""
    from docutils import nodes

    inline = isinstance(node, nodes.math)
    lines = [" ".join(part.split()) for part in re.split(r"\\\\", node.astext())]
    images = [_math_image(line) for line in lines if line]
    alt = self.encode(node.astext())
    if all(images):
        tags = [f'<img class="math-svg dark-light" src="{uri}" alt="{alt}"/>' for uri in images]
        if inline:
            self.body.append(f'<span class="math">{"".join(tags)}</span>')
        else:
            self.body.append(f'<div class="math-block">{"<br/>".join(tags)}</div>')
    else:
        tag = "code" if inline else "pre"
        self.body.append(f'<{tag} class="math-plain">{alt}</{tag}>')
    raise nodes.SkipNode


_TYPE_LINE = re.compile(r"^\s*\*{0,2}\w+ : ")
_TRAILING_UNDERSCORE = re.compile(r"(?<=\w)_(?=[,)])")


def _numpydoc_habits(app, what, name, obj, options, lines):  # type: ignore[no-untyped-def]
    """Two habits of numpydoc docstrings that reST reads otherwise, fixed before numpydoc runs:
    a parameter's type line continued with a backslash (kept as is in a raw docstring), and a
    fitted attribute's name in a type, ``(n_features_in_,)``, which reST reads as a link."""
    i = 0
    while i < len(lines) - 1:
        if lines[i].endswith("\\") and _TYPE_LINE.match(lines[i]):
            lines[i : i + 2] = [lines[i][:-1] + lines[i + 1].lstrip()]
        else:
            i += 1
    for i, line in enumerate(lines):
        if _TYPE_LINE.match(line):
            name_part, _, type_part = line.partition(" : ")
            lines[i] = name_part + " : " + _TRAILING_UNDERSCORE.sub(r"\\_", type_part)


_SKIP = re.compile(r"set_\w+_request")


def _skip_member(app, what, name, obj, skip, options):  # type: ignore[no-untyped-def]
    """scikit-learn's generated metadata-routing setters: their docstrings link into sklearn's docs."""
    return True if _SKIP.fullmatch(name) else None


def _documented_alias(app, env, node, contnode):  # type: ignore[no-untyped-def]
    """Resolve ``nadaraya.load``-style references to the object's documented name
    (``nadaraya.persist.load``): the top-level package re-exports what its modules define."""
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target.startswith("nadaraya."):
        return None
    import importlib

    module, _, attr = target.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None
    domain = env.get_domain("py")
    for name, entry in domain.objects.items():
        if name == target or entry.objtype not in ("function", "class", "exception", "method"):
            continue
        owner, _, leaf = name.rpartition(".")
        if leaf != attr:
            continue
        try:
            if getattr(importlib.import_module(owner), leaf) is obj:
                node["reftarget"] = name
                return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], name, node,
                                           contnode)
        except (ImportError, AttributeError):
            continue
    return None


def _reexported_data_doc(app, what, name, obj, options, lines):  # type: ignore[no-untyped-def]
    """A constant takes its ``#:`` comment, also where it is re-exported
    (``nadaraya.persist.MAX_MODEL_BYTES`` from ``nadaraya.persist._file``), never its type's docstring."""
    inherited = getattr(obj, "__doc__", None) == getattr(type(obj), "__doc__", None)
    if what != "data" or (any(line.strip() for line in lines) and not inherited):
        return
    lines[:] = []  # not int's or tuple's docstring
    from sphinx.errors import PycodeError
    from sphinx.pycode import ModuleAnalyzer

    attr = name.rpartition(".")[2]
    for module_name, module in sorted(sys.modules.items()):
        if not module_name.startswith("nadaraya") or getattr(module, attr, None) is not obj:
            continue
        try:
            docs = ModuleAnalyzer.for_module(module_name).find_attr_docs()
        except PycodeError:
            continue
        if ("", attr) in docs:
            lines[:] = list(docs["", attr])
            return


def setup(app):  # type: ignore[no-untyped-def]
    app.connect("autodoc-process-docstring", _reexported_data_doc)
    app.connect("autodoc-process-docstring", _numpydoc_habits, priority=100)
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("missing-reference", _documented_alias)
    app.add_html_math_renderer("svg", (_math_visit, None), (_math_visit, None))
