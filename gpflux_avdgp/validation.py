"""Argument checks shared by the public constructors: each error names the argument."""

from __future__ import annotations

import enum
from typing import Optional, TypeVar

import numpy as np

__all__ = ["check_positive_int", "check_nonnegative_int", "check_choice"]

E = TypeVar("E", bound=enum.Enum)


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= 1``, else raise ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
    return int(value)


def check_nonnegative_int(name: str, value: object) -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= 0``, else raise ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name}: expected an integer >= 0, got {value!r}")
    return int(value)


def check_optional_positive_int(name: str, value: object) -> Optional[int]:
    """Like :func:`check_positive_int` but lets ``None`` through."""
    return None if value is None else check_positive_int(name, value)


def check_choice(name: str, value: object, choices: type[E]) -> E:
    """Return the member of the ``Enum`` ``choices`` named or valued ``value``."""
    if isinstance(value, choices):
        return value
    for member in choices:
        if isinstance(value, str) and value.lower() == str(member.value):
            return member
    allowed = ", ".join(repr(m.value) for m in choices)
    raise ValueError(f"{name}: expected one of {allowed}, got {value!r}")
