"""The HTML report: self-contained and small; in headless Chromium the slider switches the curve, offline."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import nadaraya.report._study as _study
from conftest import offline_tab
from nadaraya import report
from nadaraya.datasets import textbook

README = Path(__file__).resolve().parents[2] / "README.md"


def test_demo_page_is_under_the_readme_bound(tmp_path: Path) -> None:
    """The page `nadaraya demo` writes (default data, every kernel, the CV choices; without
    training the learnable models, which adds a few hundred bytes and seconds) is under the
    size the README states."""
    from typer.testing import CliRunner

    from nadaraya.cli import app

    claim = re.search(r"`report\.html` is one self-contained file \([^)]*?under (\d+(?:\.\d+)?) MB",
                      README.read_text(encoding="utf-8"))
    assert claim, "the README no longer states the report's size: update this test with it"
    bound = float(claim.group(1)) * 1_000_000
    result = CliRunner().invoke(app, ["demo", "--out", str(tmp_path), "--no-learn", "--quiet"])
    assert result.exit_code == 0, result.output
    page = tmp_path / "report.html"
    size = page.stat().st_size
    assert size < bound, f"report.html is {size / 1e6:.2f} MB; the README promises under {bound / 1e6:g} MB"
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "Validation MSE" in text


def _wait_ready(tab, seconds: float = 20.0) -> None:
    """Wait until the page has inflated its heatmaps (polled from Python: the page's CSP forbids
    the eval that playwright's wait_for_function uses)."""
    import time

    end = time.monotonic() + seconds
    while tab.evaluate("document.body.dataset.ready") != "1":
        assert time.monotonic() < end, "the report did not finish loading"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def study() -> _study.Study:
    return report.textbook_study(
        textbook(n=40, seed=2), kernels=["constant", "gaussian", "boxcar"], learnable=False
    )


@pytest.fixture(scope="module")
def page(study: _study.Study, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return report.write_html(study, tmp_path_factory.mktemp("report") / "report.html")


def test_states_are_the_primitive(study: _study.Study) -> None:
    import nadaraya

    s = study.split
    i = int(np.argmin(abs(study.slider - 0.5)))
    np.testing.assert_allclose(
        study.curves["gaussian"][i], nadaraya.pool(s.x_val, s.x_train, s.y_train, bandwidth=study.slider[i])
    )
    w = nadaraya.attention_weights(s.x_val, s.x_train, bandwidth=study.slider[i])
    sorted_w = w[np.argsort(s.x_val)][:, np.argsort(s.x_train)]
    np.testing.assert_allclose(study.heatmaps["gaussian"][i], sorted_w)
    assert {0.1, 0.2, 0.5, 1.0} <= set(np.round(study.slider, 6))


def test_report_is_self_contained(page: Path) -> None:
    text = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "@import" not in text and "url(" not in text
    assert "Validation MSE" in text and "average pooling" in text


def test_browser_slider_switches_the_curve_offline(page: Path) -> None:
    with offline_tab() as (tab, errors, requests):
        tab.goto(page.as_uri())
        _wait_ready(tab)
        before = tab.get_attribute("#curve", "d")
        mse_before = tab.inner_text("#mse")
        assert before and before.startswith("M")
        heat_before = tab.evaluate("document.getElementById('heat').toDataURL()")
        tab.eval_on_selector("#bw", "el => { el.value = 2; el.dispatchEvent(new Event('input')); }")
        after = tab.get_attribute("#curve", "d")
        assert after != before
        assert tab.inner_text("#mse") != mse_before
        assert tab.evaluate("document.getElementById('heat').toDataURL()") != heat_before
        tab.select_option("#kernel", "boxcar")
        assert tab.get_attribute("#curve", "d") != after
    assert errors == []
    assert requests == []


def test_reprs_name_sizes_not_arrays(study: _study.Study) -> None:
    for obj in (study, study.searches["gaussian"]):
        text = repr(obj)
        assert "array" not in text and len(text) < 300, text  # the dataclass default printed every state
    assert f"{study.slider.size} slider positions" in repr(study)
