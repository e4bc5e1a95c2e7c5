"""The gallery shows what the library offers beyond the textbook chapter, and the landing page
says what nadaraya regresses. (That every gallery script runs in the docs build is
tests/shell/test_docs.py's check; here, what they show.)"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import nadaraya
import nadaraya.local.fit
import nadaraya.local.job
from nadaraya.kernels import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
GALLERY = ROOT / "examples" / "gallery"
SCRIPTS = {p.name: p.read_text(encoding="utf-8") for p in sorted(GALLERY.glob("plot_*.py"))}
INDEX = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")

#: topic -> what one gallery script must do (every pattern in the same script)
TOPICS = {
    "local linear against local constant at the edge": [r"degree=(degree|1)\b", r"\bedge\b", r"\bbias\b",
                                                         r"for degree(, \w+)*(, \w+)? in \(0, 1"],
    "confidence bands, every method and kind": [r"confidence_band\(", r'method="bootstrap"', r'method="rbc"',
                                                r'kind="simultaneous"'],
    "robust bias correction's coverage and the significance test": [r'"rbc"', r"significance_test\(",
                                                                   r"coverage"],
    "tol= at a million points": [r"\btol=", r"n = 1_000_000", r"time\.perf_counter"],
    "categorical regressors": [r'var_types="c[ou]+"', r'categorical_kernel="li-racine"', r"bandwidth_"],
    "lowess with bands beside statsmodels' curve": [
        r"nadaraya\.lowess\(", r"return_band=", r"sm\.nonparametric\.lowess", r"generalized_nn"],
}


@pytest.mark.parametrize("topic", TOPICS)
def test_a_gallery_example_shows(topic: str) -> None:
    patterns = TOPICS[topic]
    hits = [name for name, text in SCRIPTS.items() if all(re.search(p, text) for p in patterns)]
    assert hits, f"no gallery example shows {topic!r} (wanted all of {patterns})"


def test_gallery_scripts_are_titled_and_numbered() -> None:
    numbers = [int(re.match(r"plot_(\d+)_", name).group(1)) for name in SCRIPTS]
    assert numbers == list(range(1, len(numbers) + 1))
    for name, text in SCRIPTS.items():
        title = re.match(r'"""\n(.+)\n(=+)\n', text)
        assert title and len(title.group(2)) == len(title.group(1)), f"{name}: a title underlined in full"


def _regresses() -> str:
    section = re.search(r"\*\*What it regresses\.\*\*(.*?)\n\n(?=[^\s-])", INDEX + "\n\nEND", flags=re.S)
    assert section, "docs/index.md does not say what nadaraya regresses"
    return " ".join(section.group(1).split())


def test_the_landing_page_names_what_nadaraya_regresses() -> None:
    text = _regresses()
    for words in ("continuous regressors", "categorical ones", "ordered and unordered", "local constant",
                  "local linear", "quadratic", "cubic", "confidence bands", "significance test", "tol="):
        assert words in text, words


def test_what_the_landing_page_says_it_regresses_is_so() -> None:
    text = _regresses()
    lo, hi = map(int, re.search(r"`degree=(\d)` to `(\d)`", text).groups())
    assert (lo, hi) == (0, nadaraya.local.job.MAX_DEGREE)
    words = {"eleven": 11, "twelve": 12, "thirteen": 13}
    assert words[re.search(r"with (\w+) kernels", text).group(1)] == len(REGISTRY)
    var_types = re.search(r'`var_types="(\w+)"`', text).group(1)
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(0, 1, 60), rng.integers(0, 3, 60), rng.integers(0, 3, 60)])
    Y = np.column_stack([X[:, 0] + X[:, 1], X[:, 2]])  # "one or many outputs"
    model = nadaraya.NadarayaWatson(degree=hi, var_types=var_types, bandwidth=[0.3, 0.2, 0.2]).fit(X, Y)
    assert model.predict(X[:3]).shape == (3, 2)
    for name in ("Wang-van Ryzin", "Aitchison-Aitken", "Li-Racine"):
        assert name in text
    li_racine = nadaraya.NadarayaWatson(var_types=var_types, categorical_kernel="li-racine",
                                        bandwidth=[0.3, 0.2, 0.2])
    li_racine.fit(X, Y[:, 0])
    for method in ("asymptotic", "bootstrap", "rbc"):
        for kind in ("pointwise", "simultaneous"):
            model.confidence_band(X[:2], method=method, kind=kind, n_boot=19, random_state=0)
    assert "bootstrap" in text and "robust bias-corrected" in text and "pointwise or simultaneous" in text
