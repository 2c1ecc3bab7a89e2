"""Single values: durations, exact credits and prices, timestamps, and period boundaries."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from allotment.config import Period, PeriodLength
from allotment.config.fields import (
    parse_credits,
    parse_duration,
    parse_price,
    parse_timestamp,
    to_micro,
    to_per_mille,
)
from allotment.config.yamlsource import DecimalLoader


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("8h", 28800), ("2d", 172800), ("1w", 604800), ("1h30m", 5400), (45, 45),
     ("600", 600), (0, 0)],
)  # fmt: skip
def test_durations(text: str | int, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["30 minutes", "8H", "h", "-5m", -1, True, Decimal("1.5"), "1.5h"])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_yaml_floats_are_exact_decimals() -> None:
    import yaml

    data = yaml.load("a: 1.6\nb: 0.1\nc: 1_000.25\nd: 3", Loader=DecimalLoader)
    assert data == {"a": Decimal("1.6"), "b": Decimal("0.1"), "c": Decimal("1000.25"), "d": 3}
    assert type(data["a"]) is Decimal


@pytest.mark.parametrize(
    ("credits", "micro"),
    [(Decimal("1.6"), 1_600_000), (Decimal("2.0"), 2_000_000), (1, 1_000_000), (Decimal("0.000001"), 1),
     ("4480000", 4_480_000_000_000), (Decimal("0.1") * 3, 300_000)],
)  # fmt: skip
def test_credits_convert_exactly_to_micro(credits: Decimal | int | str, micro: int) -> None:
    assert to_micro(parse_credits(credits)) == micro


@pytest.mark.parametrize("bad", [Decimal("0.0000001"), -1, Decimal("NaN"), "x", True, 1.5])
def test_bad_credits(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_credits(bad)


def test_prices_are_per_mille() -> None:
    assert to_per_mille(parse_price(Decimal("0.4"))) == 400
    assert to_per_mille(parse_price(1)) == 1000
    assert to_per_mille(parse_price(Decimal("0.125"))) == 125
    with pytest.raises(ValueError):
        parse_price(Decimal("0.0005"))


def test_timestamps() -> None:
    assert parse_timestamp(datetime(2026, 11, 8, tzinfo=UTC)) == 1794096000
    assert parse_timestamp("2026-11-08T01:00:00+01:00") == 1794096000
    assert parse_timestamp("2026-11-08T00:00:00Z") == 1794096000
    for bad in (datetime(2026, 11, 8), date(2026, 11, 8), "tomorrow", 1794096000):
        with pytest.raises(ValueError):
            parse_timestamp(bad)


@pytest.mark.parametrize(
    ("length", "starts", "at", "start", "end"),
    [
        ("month", date(2026, 11, 1), datetime(2026, 11, 20, tzinfo=UTC), date(2026, 11, 1), date(2026, 12, 1)),
        ("month", date(2026, 11, 1), datetime(2027, 2, 1, tzinfo=UTC), date(2027, 2, 1), date(2027, 3, 1)),
        ("month", date(2026, 11, 15), datetime(2026, 11, 2, tzinfo=UTC), date(2026, 10, 15), date(2026, 11, 15)),
        ("quarter", date(2026, 1, 1), datetime(2026, 11, 20, tzinfo=UTC), date(2026, 10, 1), date(2027, 1, 1)),
        ("week", date(2026, 11, 2), datetime(2026, 11, 20, 13, tzinfo=UTC), date(2026, 11, 16), date(2026, 11, 23)),
        ("week", date(2026, 11, 2), datetime(2026, 10, 30, tzinfo=UTC), date(2026, 10, 26), date(2026, 11, 2)),
    ],
)  # fmt: skip
def test_period_bounds(length: str, starts: date, at: datetime, start: date, end: date) -> None:
    period = Period(length=PeriodLength(length), starts=starts)
    lo, hi = period.bounds(at)
    assert (lo.date(), hi.date()) == (start, end)
    assert lo <= at < hi
