"""Kubernetes quantities: exact parsing, kube-scheduler's milli rounding, kubectl-style formatting."""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from det_k8s.quantity import (
    QuantityError,
    format_bytes,
    format_cpu,
    format_decimal,
    format_quantity,
    parse_milli,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7910m", Fraction(791, 100)),
        ("7.5", Fraction(15, 2)),
        ("7.91", Fraction(791, 100)),
        ("16Gi", Fraction(16 * 2**30)),
        ("512Mi", Fraction(512 * 2**20)),
        ("1Ki", Fraction(1024)),
        ("1k", Fraction(1000)),
        ("2M", Fraction(2_000_000)),
        ("100n", Fraction(1, 10**7)),
        ("250u", Fraction(1, 4000)),
        ("1e3", Fraction(1000)),
        ("1.5E-2", Fraction(3, 200)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("+4", Fraction(4)),
        ("-1", Fraction(-1)),
        (" 8 ", Fraction(8)),
        (8, Fraction(8)),
        (7.5, Fraction(15, 2)),
        (0.1, Fraction(1, 10)),
    ],
)
def test_parses_exactly(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "8 cores", "1.2.3", "1Gb", "--1", "1e", True, None, [], float("nan"), "m"])
def test_rejects_non_quantities(bad):
    with pytest.raises(QuantityError):
        parse_quantity(bad)


def test_seven_point_nine_one_is_less_than_eight_exactly():
    assert parse_quantity("7910m") < parse_quantity("8")
    assert parse_quantity("7.91") == parse_quantity("7910m")


@pytest.mark.parametrize(
    ("text", "milli"),
    [("1", 1000), ("500m", 500), ("7910m", 7910), ("1n", 1), ("1.0001", 1001), ("4", 4000), (2, 2000)],
)
def test_milli_rounds_up_like_kube_scheduler(text, milli):
    assert parse_milli(text) == milli


def test_milli_cache_returns_the_same_value_twice():
    assert parse_milli("123m") == parse_milli("123m") == 123


@pytest.mark.parametrize(
    ("value", "text"),
    [(Fraction(8), "8"), (Fraction(791, 100), "7910m"), (Fraction(15, 2), "7500m"), (Fraction(1, 3), "0.333")],
)
def test_formats_cpu_like_kubectl(value, text):
    assert format_cpu(value) == text


def test_formats_bytes_with_the_largest_exact_binary_suffix():
    assert format_bytes(Fraction(16 * 2**30)) == "16Gi"
    assert format_bytes(Fraction(1536 * 2**20)) == "1536Mi"
    assert format_bytes(Fraction(1000)) == "1000"


def test_format_quantity_picks_by_resource_name():
    assert format_quantity("cpu", Fraction(3, 2)) == "1500m"
    assert format_quantity("memory", Fraction(2**30)) == "1Gi"
    assert format_quantity("nvidia.com/gpu", Fraction(4)) == "4"
    assert format_decimal(Fraction(-7, 4)) == "-1.75"


@given(st.integers(min_value=0, max_value=10**12))
def test_milli_round_trips_through_format(milli):
    assert parse_quantity(format_cpu(Fraction(milli, 1000))) == Fraction(milli, 1000)


@given(st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False))
def test_decimal_text_parses_to_its_exact_value(number):
    assert parse_quantity(str(number)) == Fraction(str(number))


@pytest.mark.parametrize("text, says", [
    ("9" * 5000, "(5,000 characters) is longer than any quantity det-k8s takes (at most 64 characters)"),
    ("1e999999999", "an exponent beyond e±64 is more than any resource holds"),  # 10**1e9: never finished
    ("1E-65", "an exponent beyond e±64"),
])
def test_a_quantity_too_long_or_too_large_to_compute_is_refused_at_once(text, says):
    with pytest.raises(QuantityError) as raised:
        parse_quantity(text)
    assert says in str(raised.value) and len(str(raised.value)) < 200


def test_the_largest_quantities_taken_still_parse_exactly():
    assert parse_quantity("1e64") == 10**64 and parse_quantity("9" * 64) == 10**64 - 1
    assert parse_quantity("1e-64") == Fraction(1, 10**64)
