"""Field types of the configuration: names, durations, credits, price fractions and timestamps.

Owns: the parsing and exactness rules of single values (names and Unix account names, durations like
`30m`/`8h`/`2d`/`90s` or integer seconds; memory sizes like `16G`/`512M` or integer MiB; CPU counts; credit
amounts as exact decimals with at most six places; prices as fractions exact to a thousandth; ISO datetimes with a
timezone → Unix seconds).

Must not: look at more than one value at a time (cross-field rules live in `checks`), or use binary floats.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StrictInt

from allotment.config.limits import (
    MAX_COUNT,
    MAX_CPUS,
    MAX_CREDITS,
    MAX_DURATION,
    MAX_MEMORY_MIB,
    MAX_NAME,
    MAX_TEXT,
    check_text,
)
from allotment.core.model import FULL_PRICE, MICRO_PER_CREDIT

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
Name = Annotated[str, Field(pattern=NAME_PATTERN, max_length=MAX_NAME)]
"""Identifiers (clusters, GPU types, budgets, users, windows): letters, digits, '.', '_' and '-'."""

Text = Annotated[str, AfterValidator(check_text)]
"""Any text that may reach a process or the database: no NUL byte (config.limits)."""

FreeText = Annotated[Text, Field(max_length=MAX_TEXT)]
"""A short free text (a reason, a token's name): no NUL byte, at most MAX_TEXT characters."""

EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"

UNIX_ACCOUNT_PATTERN = r"^[a-z_][a-z0-9_.-]*[$]?$"
UnixAccount = Annotated[str, Field(pattern=UNIX_ACCOUNT_PATTERN, max_length=32)]
"""A POSIX account name (lower case letters, digits, '_', '.', '-'; at most 32 characters)."""

PositiveInt = Annotated[StrictInt, Field(gt=0, le=MAX_COUNT)]
NonNegativeInt = Annotated[StrictInt, Field(ge=0, le=MAX_COUNT)]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^(?:\d+[smhdw])+$")
_PART = re.compile(r"(\d+)([smhdw])")


def parse_duration(value: Any) -> int:
    """`90s`, `30m`, `8h`, `2d`, `1w`, `1h30m`, or whole seconds as an integer → seconds (at most MAX_DURATION)."""
    if isinstance(value, bool):
        raise ValueError("a duration must be a number of seconds or a string like 30m, 8h, 2d, 90s")
    seconds: int | None = None
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a duration must not be negative")
        seconds = value
    elif isinstance(value, str) and len(value) <= 64:
        text = value.strip().replace(" ", "")
        if _DURATION.match(text):
            seconds = sum(int(n) * _UNITS[u] for n, u in _PART.findall(text))
        elif text.isdigit():
            seconds = int(text)
    if seconds is None:
        shown = value if not isinstance(value, str) or len(value) <= 64 else value[:64] + "…"
        raise ValueError(f"{shown!r} is not a duration; use seconds or a string like 30m, 8h, 2d, 90s")
    if seconds > MAX_DURATION:
        raise ValueError(f"a duration is at most {MAX_DURATION}s (ten years); got {seconds}s")
    return seconds


Duration = Annotated[int, BeforeValidator(parse_duration)]
"""A duration in whole seconds."""

_MIB_PER = {"K": None, "M": 1, "G": 1024, "T": 1024 * 1024}
_MEMORY = re.compile(r"^(\d+)([KMGT])(?:IB|I|B)?$")


def parse_memory(value: Any) -> int:
    """`512M`, `16G`, `2T` (binary units: 1G = 1024M; `Gi`, `GB`, `GiB` alike), or whole MiB as an integer → MiB
    (at most MAX_MEMORY_MIB). 0 means no request (a job) or not declared (a node)."""
    mib: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError("a memory size must not be negative")
        mib = value
    elif isinstance(value, str) and len(value) <= 32:
        text = value.strip().replace(" ", "").upper()
        found = _MEMORY.match(text)
        if text.isdigit():
            mib = int(text)
        elif found:
            per = _MIB_PER[found.group(2)]
            if per is None:
                raise ValueError(f"{value!r} is smaller than the unit memory is counted in; use M, G or T")
            mib = int(found.group(1)) * per
    if mib is None:
        shown = value if not isinstance(value, str) or len(value) <= 32 else value[:32] + "…"
        raise ValueError(f"{shown!r} is not a memory size; use MiB as an integer or a string like 512M, 16G, 2T")
    if mib > MAX_MEMORY_MIB:
        raise ValueError(f"a memory size is at most {MAX_MEMORY_MIB} MiB; got {mib} MiB")
    return mib


Memory = Annotated[int, BeforeValidator(parse_memory)]
"""A memory size in whole MiB (0: none)."""


def memory_text(mib: int) -> str:
    """MiB as the shortest exact form parse_memory reads back: 16G, 1536M, 2T."""
    for unit, per in (("T", 1024 * 1024), ("G", 1024)):
        if mib and mib % per == 0:
            return f"{mib // per}{unit}"
    return f"{mib}M"


Cpus = Annotated[StrictInt, Field(ge=0, le=MAX_CPUS)]
"""A whole number of CPUs (0: none)."""


def _decimal(value: Any, what: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | Decimal | str):
        raise ValueError(f"{what} must be a number, got {value!r}")
    try:
        number = Decimal(value.strip()) if isinstance(value, str) else Decimal(value)
    except InvalidOperation:
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if not number.is_finite():
        raise ValueError(f"{what} must be a finite number")
    return number


def parse_credits(value: Any) -> Decimal:
    """A non-negative credit amount, exact to one micro-credit (six decimal places)."""
    number = _decimal(value, "a credit amount")
    if number < 0:
        raise ValueError("a credit amount must not be negative")
    if number > MAX_CREDITS:
        raise ValueError(f"a credit amount is at most {MAX_CREDITS} credits")
    if (number * MICRO_PER_CREDIT) % 1 != 0:
        raise ValueError(f"{value} has more than six decimal places (credits are exact to a millionth)")
    return number


Credits = Annotated[Decimal, BeforeValidator(parse_credits)]
"""Credits as an exact decimal (convert with `to_micro`)."""


def parse_rate(value: Any) -> Decimal:
    number = parse_credits(value)
    if number == 0:
        raise ValueError("a rate must be greater than zero")
    return number


Rate = Annotated[Decimal, BeforeValidator(parse_rate)]
"""Credits per GPU-hour of one GPU type."""


def parse_price(value: Any) -> Decimal:
    """A price as a fraction of the full price (0.4 → 400 per mille), exact to a thousandth."""
    number = _decimal(value, "a price")
    if number < 0:
        raise ValueError("a price must not be negative")
    if number > 10:
        raise ValueError("a price is a fraction of the full price (e.g. 0.4); it must be at most 10")
    if (number * FULL_PRICE) % 1 != 0:
        raise ValueError(f"{value} is finer than a thousandth of the full price")
    return number


Price = Annotated[Decimal, BeforeValidator(parse_price)]


def credits_text(micro: int) -> str:
    """Integer credit-microunits as exact credits: 100001000.5, 11520, 0.000001 (no rounding, no exponent)."""
    text = format(Decimal(micro) / MICRO_PER_CREDIT, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def to_micro(credits: Decimal) -> int:
    """Exact credits → integer credit-microunits."""
    micro = credits * MICRO_PER_CREDIT
    if micro % 1 != 0:
        raise ValueError(f"{credits} credits is not a whole number of micro-credits")
    return int(micro)


def to_per_mille(price: Decimal) -> int:
    """Exact price fraction → integer per mille of the full price."""
    value = price * FULL_PRICE
    if value % 1 != 0:
        raise ValueError(f"{price} is not a whole number of thousandths")
    return int(value)


def parse_timestamp(value: Any) -> int:
    """An ISO 8601 datetime with a timezone (YAML timestamp or string) → Unix seconds."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO 8601 datetime (e.g. 2026-03-08T00:00:00Z)") from None
    if not isinstance(value, datetime):
        if isinstance(value, date):
            raise ValueError(f"{value} is a date; give a datetime with a timezone, e.g. {value}T00:00:00Z")
        raise ValueError(f"{value!r} is not an ISO 8601 datetime (e.g. 2026-03-08T00:00:00Z)")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{value.isoformat()} has no timezone; add one, e.g. Z or +00:00")
    if value.microsecond:
        raise ValueError(f"{value.isoformat()} has fractions of a second; times are whole seconds")
    return int(value.timestamp())


Timestamp = Annotated[int, BeforeValidator(parse_timestamp)]
"""A point in time as Unix seconds."""


def parse_date(value: Any) -> date:
    if isinstance(value, datetime):
        raise ValueError(f"{value.isoformat()} is a datetime; give a date, e.g. {value.date().isoformat()}")
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise ValueError(f"{value!r} is not an ISO 8601 date (e.g. 2026-03-01)")


Day = Annotated[date, BeforeValidator(parse_date)]
