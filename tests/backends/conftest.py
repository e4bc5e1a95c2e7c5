"""Fixtures shared by the backends' tests."""

from __future__ import annotations

import pytest

from nadaraya.backends import truncated


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The share of queries the dense cells served in each call of the truncated backend."""
    shares: list[float] = []
    real = truncated._cells.sums

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        done = real(*args, **kwargs)
        shares.append(float(done.mean()) if done.size else 0.0)
        return done

    monkeypatch.setattr(truncated._cells, "sums", spy)
    return shares
