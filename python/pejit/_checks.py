"""Checks of plain Python arguments: each wrong value is a pejit.Error that
names the argument (a bool is no number here: True would read as 1)."""
from __future__ import annotations

import math
import numbers
from typing import Optional

from ._pejit import Error


def number(value, what: str, *, positive: bool = False):
    """A finite real number (positive with `positive`), as a float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Error(f"{what}: expected a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or (positive and value <= 0):
        raise Error(f"{what}: {value!r} is not a {'positive' if positive else 'finite'} number")
    return value


def optional_number(value, what: str, *, positive: bool = False) -> Optional[float]:
    return None if value is None else number(value, what, positive=positive)


def integer(value, what: str, *, minimum: Optional[int] = None) -> int:
    """An integer (NumPy's too), at least `minimum`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise Error(f"{what}: expected an integer, got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise Error(f"{what}: {value} is below {minimum}")
    return value


def boolean(value, what: str) -> bool:
    if not isinstance(value, bool):
        raise Error(f"{what}: expected True or False, got {value!r}")
    return value


def text(value, what: str) -> str:
    if not isinstance(value, str):
        raise Error(f"{what}: expected a string, got {value!r}")
    return value
