"""Bandwidth selection: rules of thumb, the CV and AICc criteria, and the search that minimises them.

The rooms: :mod:`.rules` (rules of thumb, the robust scale), :mod:`.criteria` (exact
leave-one-out CV and AICc, the result type), :mod:`.optimise` (the Halley and Brent steps),
:mod:`.search` (:func:`select_bandwidth`), and the compiled passes that score several
bandwidths per pass over the pairs, with the criteria's derivatives (docs/design.md);
:mod:`.plugin` holds nprobust's plug-in bandwidths.

Examples
--------
>>> import numpy as np
>>> from nadaraya.bandwidth import rule_of_thumb, select_bandwidth
>>> x = np.linspace(0, 5, 80); y = np.sin(x) + 0.1 * np.cos(17 * x)
>>> h = select_bandwidth(x, y).bandwidth
>>> bool(0 < h[0] < rule_of_thumb(x)[0] * 4)
True
"""

from __future__ import annotations

from nadaraya.bandwidth._objective import METHODS, BandwidthSelection, BandwidthWarning
from nadaraya.bandwidth.criteria import score_bandwidth
from nadaraya.bandwidth.rules import RULES, check_rule_input, robust_scale, rule_factor, rule_of_thumb
from nadaraya.bandwidth.search import select_bandwidth

__all__ = [
    "METHODS",
    "RULES",
    "BandwidthSelection",
    "BandwidthWarning",
    "check_rule_input",
    "robust_scale",
    "rule_factor",
    "rule_of_thumb",
    "score_bandwidth",
    "select_bandwidth",
]
