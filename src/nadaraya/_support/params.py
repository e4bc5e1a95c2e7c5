"""Parameter constraints for scikit-learn's ``_parameter_constraints`` that its own do not state.

scikit-learn validates an estimator's parameters against a dict of constraints once per ``fit``
(``sklearn.base._fit_context``), with an ``InvalidParameterError`` (a ``ValueError`` and a
``TypeError``) that names the parameter and the value. Its constraints cover types, intervals
and exact strings; the estimators of nadaraya also take names up to case (kernels), strings
of letter codes (``var_types``), counts that are never ``True``, and torch objects, which
these state without importing torch.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from sklearn.utils._param_validation import Interval, Options, StrOptions

__all__ = ["Letters", "Names", "Number", "Torch", "fold_case", "fold_name"]


def fold_case(name: str) -> str:
    """A name as the kernel lookup compares it: stripped, lower case.

    Examples
    --------
    >>> fold_case(" Gaussian")
    'gaussian'
    """
    return name.strip().lower()


def fold_name(name: str) -> str:
    """A name as the lookups compare it: stripped, lower case, ``_`` read as ``-``.

    Examples
    --------
    >>> fold_name(" Li_Racine")
    'li-racine'
    """
    return name.strip().lower().replace("_", "-")


class Names(StrOptions):  # type: ignore[misc]
    """A string among ``options``, compared after ``fold`` (exactly when ``fold`` is None).

    Examples
    --------
    >>> c = Names({"classic", "li-racine"}, fold=fold_name)
    >>> c.is_satisfied_by("Li_Racine"), c.is_satisfied_by("other"), str(c)
    (True, False, "a str among {'classic', 'li-racine'} (any case, '_' for '-')")
    """

    def __init__(self, options: Iterable[str], *, fold: Callable[[str], str] | None = None) -> None:
        super().__init__(set(options))
        self.fold = fold

    def is_satisfied_by(self, val: Any) -> bool:
        if not isinstance(val, str):
            return False
        return (self.fold(val) if self.fold is not None else val) in self.options

    def __str__(self) -> str:
        listed = ", ".join(map(repr, sorted(self.options)))
        note = " (any case, '_' for '-')" if self.fold is fold_name else " (any case)"
        note = "" if self.fold is None else note
        return f"a str among {{{listed}}}{note}"


class Number(Interval):  # type: ignore[misc]
    """scikit-learn's ``Interval``, refusing ``bool`` (``True`` is an int to Python, never a
    count or a size here).

    Examples
    --------
    >>> from numbers import Integral
    >>> c = Number(Integral, 0, 3, closed="both")
    >>> c.is_satisfied_by(2), c.is_satisfied_by(True), c.is_satisfied_by(2.0)
    (True, False, False)
    """

    def is_satisfied_by(self, val: Any) -> bool:
        return not isinstance(val, bool | np.bool_) and bool(super().is_satisfied_by(val))


class Letters(Options):  # type: ignore[misc]
    """A non-empty string whose letters, in any case, are among ``letters`` (an ``Options``
    to scikit-learn, which takes only its own constraint classes).

    Examples
    --------
    >>> c = Letters("cou")
    >>> c.is_satisfied_by("cOu"), c.is_satisfied_by("cx"), c.is_satisfied_by("")
    (True, False, False)
    """

    def __init__(self, letters: str) -> None:
        super().__init__(str, set(letters))
        self.letters = letters

    def is_satisfied_by(self, val: Any) -> bool:
        return isinstance(val, str) and val != "" and set(val.lower()) <= set(self.letters)

    def __str__(self) -> str:
        return f"a str of the letters {', '.join(map(repr, self.letters))} (any case)"


class Torch(Options):  # type: ignore[misc]
    """An instance of ``torch.<path>`` (e.g. ``"device"``, ``"nn.Module"``). torch is not
    imported: where it is not loaded yet, no value can be a torch object.

    Examples
    --------
    >>> Torch("device").is_satisfied_by("cpu"), str(Torch("nn.Module"))
    (False, "an instance of 'torch.nn.Module'")
    """

    def __init__(self, path: str) -> None:
        super().__init__(object, set())
        self.path = path

    def is_satisfied_by(self, val: Any) -> bool:
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        kind: Any = functools.reduce(getattr, self.path.split("."), torch)
        return isinstance(val, kind)

    def __str__(self) -> str:
        return f"an instance of 'torch.{self.path}'"
