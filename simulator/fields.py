"""Field types of the scenario file for its pydantic models (schema.py): durations such as '1h30m',
UTC timestamps, whole numbers, finite numbers, names usable in file names, true/false. Each check
raises ``ValueError("<problem>; <what to do>")``; the formatter splits the two at the last '; '."""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

_NUM = r"(\d+(?:\.\d+)?)"
# "m" must not swallow the "m" of "ms".
_DURATION_RE = re.compile(rf"^(?:{_NUM}h)?(?:{_NUM}m(?!s))?(?:{_NUM}s)?(?:{_NUM}ms)?$")
DURATION_HINT = "write it like '90s', '15m', '8h', '1h30m' or '500ms'"
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
PRECISIONS = ("bf16", "fp16")
CHECKPOINT_FORMATS = ("safetensors", "torch")


def parse_duration(value: Any) -> timedelta:
    """Parse '1h30m', '90s', '2.5s', '500ms' or a number of seconds; rounded to whole ms.

    Raises ValueError for anything else.
    """
    if isinstance(value, bool):
        raise ValueError(f"bad duration {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        m = _DURATION_RE.match(value.strip())
        if not value.strip() or m is None:
            raise ValueError(f"bad duration {value!r}")
        h, mi, s, ms = (float(g) if g else 0.0 for g in m.groups())
        seconds = h * 3600 + mi * 60 + s + ms / 1000
    else:
        raise ValueError(f"bad duration {value!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"bad duration {value!r}")
    return timedelta(milliseconds=round(seconds * 1000))


# --------------------------------------------------------------------------- field types


def _duration(value: Any) -> timedelta:
    if isinstance(value, timedelta):
        return value
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{exc}; {DURATION_HINT}") from None


def _positive_duration(d: timedelta) -> timedelta:
    if d <= timedelta(0):
        raise ValueError("duration is zero; use a positive duration")
    return d


def at_least_duration(minimum: timedelta, hint: str):
    def check(d: timedelta) -> timedelta:
        if d < minimum:
            raise ValueError(f"shorter than {_fmt(minimum)}; {hint}")
        return d
    return check


def _fmt(d: timedelta) -> str:
    return f"{int(d.total_seconds() * 1000)}ms" if d < timedelta(seconds=1) else f"{d.total_seconds():g}s"


def integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}; write a whole number")
    return value


def number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}; write a number")
    return float(value)


def at_least(minimum: float):
    def check(value):
        if value < minimum:
            raise ValueError(f"{value} is too small; use a value >= {minimum}")
        return value
    return check


def _positive(value: float) -> float:
    if value <= 0:
        raise ValueError(f"{value} is not positive; use a value > 0")
    return value


def below(limit: float, fix: str, problem: str = "{v:g} is not a ratio below 1"):
    def check(value: float) -> float:
        if value >= limit:
            raise ValueError(f"{problem.format(v=value)}; {fix}")
        return value
    return check


def at_most(limit: float, fix: str):
    def check(value: float) -> float:
        if value > limit:
            raise ValueError(f"{value:g} is above {limit:g}; {fix}")
        return value
    return check


def _string(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string, got {value!r}; quote a value")
    return value


def _identifier(value: str) -> str:
    if not ID_RE.match(value):
        raise ValueError(f"{value!r} has characters not allowed in file names; use letters, digits, '.', '_' and '-'")
    return value


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}; write true or false")
    return value


def _timestamp(value: Any) -> datetime:
    fix = "write an ISO-8601 UTC time in quotes, e.g. \"2026-11-30T00:00:00Z\""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"bad timestamp {value!r}; {fix}") from None
    if not isinstance(value, datetime):
        raise ValueError(f"bad timestamp {value!r}; {fix}")
    if value.tzinfo is None:
        raise ValueError(f"timestamp {value.isoformat()} has no time zone; {fix}")
    value = value.astimezone(timezone.utc)
    if value.microsecond % 1000:
        raise ValueError(f"timestamp is finer than a millisecond; {fix}")
    return value


Duration = Annotated[timedelta, BeforeValidator(_duration), AfterValidator(_positive_duration)]
Offset = Annotated[timedelta, BeforeValidator(_duration)]  # from the scenario start; may be zero
Int = Annotated[int, BeforeValidator(integer)]
Count = Annotated[int, BeforeValidator(integer), AfterValidator(at_least(1))]
Index = Annotated[int, BeforeValidator(integer), AfterValidator(at_least(0))]
Number = Annotated[float, BeforeValidator(number)]
NonNegative = Annotated[float, BeforeValidator(number), AfterValidator(at_least(0))]
Positive = Annotated[float, BeforeValidator(number), AfterValidator(_positive)]
Ratio = Annotated[float, BeforeValidator(number), AfterValidator(at_least(0)), AfterValidator(below(1, "use e.g. 0.4"))]
Text = Annotated[str, BeforeValidator(_string)]
Identifier = Annotated[str, BeforeValidator(_string), AfterValidator(_identifier)]
Flag = Annotated[bool, BeforeValidator(_flag)]
Timestamp = Annotated[datetime, BeforeValidator(_timestamp)]


def choice(options: tuple[str, ...], what: str):
    def check(value: Any) -> str:
        if value not in options:
            raise ValueError(f"unknown {what} {value!r}; use {' or '.join(repr(o) for o in options)}")
        return value
    return check
