"""The report's fit view offers LOWESS: a slider over spans k/n, its curves, MSEs and CV choice of k."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

import nadaraya
from conftest import offline_tab
from nadaraya import report
from nadaraya.datasets import textbook


@pytest.fixture(scope="module")
def study() -> report.Study:
    return report.textbook_study(textbook(n=40, seed=5), kernels=["constant", "gaussian"], slider=[0.2, 1.0],
                                 learnable=False, degrees=[1])


@pytest.fixture(scope="module")
def entry(study: report.Study) -> dict:
    page = report.render_html(study)
    data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S)
                      .group(1).replace("<\\/", "</"))
    return data["kernels"]["lowess"]


def _plain_lowess(x: np.ndarray, y: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    """Local linear, tricube weights of |x - q| over the k-th smallest of them, written out."""
    out = np.empty(q.size)
    for i, v in enumerate(q):
        d = np.abs(x - v)
        h = np.sort(d)[k - 1]
        w = np.where(d < h, (1 - (d / h) ** 3) ** 3, 0.0)
        X = np.column_stack([np.ones_like(x), x - v])
        out[i] = np.linalg.solve(X.T @ (w[:, None] * X), X.T @ (w * y))[0]
    return out


def test_the_page_carries_a_curve_and_an_mse_per_span(study: report.Study, entry: dict) -> None:
    s, lw = study.split, study.lowess
    assert lw is not None and 20 <= lw.ks.size <= 40  # a few dozen spans: the page stays small
    assert np.all(np.diff(lw.ks) > 0) and lw.ks[0] >= 3 and lw.ks[-1] == s.x_train.size
    assert entry["ks"] == lw.ks.tolist()
    np.testing.assert_allclose(entry["slider"], lw.ks / s.x_train.size, rtol=1e-6)
    assert len(entry["curves"]) == len(entry["mse"]) == len(entry["heatMax"]) == lw.ks.size
    np.testing.assert_allclose(entry["curves"], lw.curves, atol=5e-4 + 1e-12)
    np.testing.assert_allclose(entry["mse"], np.mean((lw.curves - s.y_val) ** 2, axis=1), rtol=1e-3)
    assert "LOWESS" in entry["label"] and "span" in entry["label"]


def test_the_marked_span_is_the_cv_choice_of_k(study: report.Study, entry: dict) -> None:
    s = study.split
    model = nadaraya.NadarayaWatson(kernel="tricube", degree=1, bandwidth_type="generalized_nn",
                                    bandwidth="cv")
    k = int(model.fit(s.x_train[:, None], s.y_train).bandwidth_[0])
    assert entry["kCv"] == k and entry["ks"][entry["cvIndex"]] == k
    assert entry["cv"] == pytest.approx(k / s.x_train.size, rel=1e-6)
    row = next(r for r in study.rows if r.model == "LOWESS")  # the table's row: the same fit
    assert row.bandwidth == pytest.approx(k / s.x_train.size)
    assert row.mse == pytest.approx(float(np.mean((study.lowess.curves[entry["cvIndex"]] - s.y_val) ** 2)),
                                    rel=1e-10)


def test_each_curve_is_lowess_at_its_span(study: report.Study) -> None:
    s, lw = study.split, study.lowess
    n = s.x_train.size
    for k, curve in zip(lw.ks, lw.curves):
        ref = nadaraya.lowess(s.y_train, s.x_train, frac=k / n, it=0, xvals=s.x_val)
        np.testing.assert_allclose(curve, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
        plain = _plain_lowess(s.x_train, s.y_train, s.x_val, int(k))
        np.testing.assert_allclose(curve, plain, rtol=0, atol=1e-9 * np.abs(plain).max())


def test_the_heatmap_is_each_querys_tricube_weights_over_its_k_nearest(study: report.Study) -> None:
    s, lw = study.split, study.lowess
    q, x = np.sort(s.x_val), np.sort(s.x_train)
    for i in (0, lw.cv_index, lw.ks.size - 1):
        k, W = int(lw.ks[i]), lw.weights[i]
        d = np.abs(q[:, None] - x[None, :])
        h = np.sort(d, axis=1)[:, k - 1:k]
        plain = np.where(d < h, (1 - (d / h) ** 3) ** 3, 0.0)
        np.testing.assert_allclose(W, plain / plain.sum(axis=1, keepdims=True), atol=1e-12)


def _precision3(v: float) -> str:
    """JavaScript's ``v.toPrecision(3)`` for 0.001 <= v < 1000."""
    return f"{v:.{max(2 - int(np.floor(np.log10(v))), 0)}f}"


def _wait_ready(tab, seconds: float = 20.0) -> None:
    end = time.monotonic() + seconds
    while tab.evaluate("document.body.dataset.ready") != "1":
        assert time.monotonic() < end, "the report did not finish loading"
        time.sleep(0.05)


def test_in_chromium_lowess_moves_the_slider_over_spans(study: report.Study, entry: dict,
                                                        tmp_path: Path) -> None:
    page = report.write_html(study, tmp_path / "report.html")
    n = study.split.x_train.size
    with offline_tab() as (tab, errors, requests):
        tab.goto(page.as_uri())
        _wait_ready(tab)
        gauss_max = tab.get_attribute("#bw", "max")
        tab.select_option("#kernel", "lowess")
        assert tab.inner_text("#bwlabel") == "span k/n"
        assert tab.get_attribute("#bw", "max") == str(len(entry["ks"]) - 1)
        k = entry["kCv"]  # the view opens at the CV choice
        assert tab.inner_text("#bwval") == f"{_precision3(k / n)} (k = {k} of {n}, CV choice)"
        assert tab.inner_text("#mse") == f"{entry['mse'][entry['cvIndex']]:.4f}"
        ticks = tab.eval_on_selector_all("#scale .tick", "els => els.map(e => e.textContent)")
        assert "1" in ticks and "0.2" in ticks
        tab.eval_on_selector("#bw", "el => { el.value = 0; el.dispatchEvent(new Event('input')); }")
        assert tab.inner_text("#bwval") == f"{_precision3(entry['ks'][0] / n)} (k = {entry['ks'][0]} of {n})"
        assert tab.inner_text("#mse") == f"{entry['mse'][0]:.4f}"
        tab.click("#cvbtn")
        assert tab.inner_text("#bwval").endswith("CV choice)")
        tab.select_option("#kernel", "gaussian")  # back to the bandwidths
        assert tab.inner_text("#bwlabel") == "bandwidth h"
        assert tab.get_attribute("#bw", "max") == gauss_max
        assert tab.inner_text("#bwval").endswith("(CV choice)")
    assert errors == []
    assert requests == []
