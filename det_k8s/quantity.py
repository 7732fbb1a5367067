"""Kubernetes resource quantities, parsed exactly.

"7910m", "7.5", "16Gi", "1e3" and 8 all become `Fraction`s, so comparisons such as "does a
7.91-CPU slot fit 7910m of allocatable" are exact instead of floating-point guesses. The grammar
follows Kubernetes' `resource.Quantity`: a signed decimal number, then an optional suffix that is
a binary SI suffix (Ki..Ei), a decimal SI suffix (n, u, m, k, M, G, T, P, E) or a decimal
exponent (e3, E-2).
"""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_PATTERN = re.compile(  # ASCII digits only, as Kubernetes parses them (\d would take "٤" and "８" for 4 and 8)
    r"(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)


MAX_TEXT = 64  # characters: "9223372036854775807" is 19; no real quantity comes near
MAX_EXPONENT = 64  # |e| of a decimal exponent: 1e64 is far beyond any resource, and 10**1e9 never finishes


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def _clipped(text: str) -> str:
    return repr(text) if len(text) <= 24 else repr(text[:20]) + f"... ({len(text):,} characters)"


def parse_quantity(value: str | int | float | Fraction) -> Fraction:
    """Parse a Kubernetes quantity into an exact Fraction (base units: cores, bytes, devices)."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"{value!r} is not a quantity")
        # repr() gives the shortest decimal that round-trips, which is what the user wrote.
        return parse_quantity(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    text = value.strip()
    if len(text) > MAX_TEXT:
        raise QuantityError(f"{_clipped(text)} is longer than any quantity det-k8s takes (at most {MAX_TEXT} "
                            "characters)")
    match = _PATTERN.fullmatch(text)
    if match is None:
        raise QuantityError(f"{value!r} is not a quantity (examples: 7910m, 7.5, 16Gi)")
    number = Fraction(match["num"])
    if match["sign"] == "-":
        number = -number
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exponent = int(suffix[1:])
    if abs(exponent) > MAX_EXPONENT:
        raise QuantityError(f"{_clipped(text)}: an exponent beyond e±{MAX_EXPONENT} is more than any resource holds")
    return number * Fraction(10) ** exponent


def format_cpu(value: Fraction) -> str:
    """Format CPU the way kubectl shows it: whole cores as "8", otherwise millicores ("7910m")."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return format_decimal(value)


def format_decimal(value: Fraction, places: int = 3) -> str:
    """A plain decimal with at most `places` decimals, trailing zeros dropped ("7.91")."""
    scaled = round(value * 10**places)
    sign = "-" if scaled < 0 else ""
    whole, frac = divmod(abs(scaled), 10**places)
    if frac == 0:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{str(frac).rjust(places, '0').rstrip('0')}"


def format_bytes(value: Fraction) -> str:
    """Format a byte count with the largest binary suffix that divides it exactly ("16Gi")."""
    if value.denominator != 1:
        return format_decimal(value)
    number = value.numerator
    for suffix, factor in sorted(_BINARY.items(), key=lambda item: -item[1]):
        if number and number % factor == 0:
            return f"{number // factor}{suffix}"
    return str(number)


def format_quantity(resource: str, value: Fraction) -> str:
    """Format a value for a resource name: cpu in cores/millicores, memory in binary units."""
    if resource == "cpu":
        return format_cpu(value)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return format_bytes(value)
    return format_decimal(value)


_MILLI_CACHE: dict[str, int] = {}


def parse_milli(value: str | int | float | Fraction) -> int:
    """A quantity in integer milli-units, rounded up (as kube-scheduler's MilliValue does).

    The scheduling core counts in these integers: exact for every quantity of milli precision or
    coarser (all that Kubernetes accepts for CPU), and fast enough for 30,000-pod snapshots.
    Results are cached by text, since real clusters repeat the same few request strings.
    """
    if isinstance(value, str):
        cached = _MILLI_CACHE.get(value)
        if cached is None:
            cached = _ceil(parse_quantity(value) * 1000)
            if len(_MILLI_CACHE) < 65536:
                _MILLI_CACHE[value] = cached
        return cached
    if isinstance(value, int) and not isinstance(value, bool):
        return value * 1000
    return _ceil(parse_quantity(value) * 1000)


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def format_milli(resource: str, milli: int) -> str:
    """Format integer milli-units for a resource name, like `format_quantity`."""
    return format_quantity(resource, Fraction(milli, 1000))
