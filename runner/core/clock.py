"""The time a record is stamped with, as ISO 8601 in UTC.

Every call stamps its run record and audit row; datetime's isoformat() costs a few
microseconds a call here, most of it formatting the date and time of day, which change once a
second. The second's text is kept, and only the microseconds are formatted each time.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

_second: tuple[int, str] = (-1, "")


def iso_at(unix: float) -> str:
    """`unix` (seconds since the epoch) as YYYY-MM-DDTHH:MM:SS.ffffff+00:00."""
    global _second
    whole = int(unix // 1)
    if _second[0] != whole:
        _second = (whole, datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    micros = min(int((unix - whole) * 1_000_000), 999_999)
    return f"{_second[1]}.{micros:06d}+00:00"


def utc_now_iso() -> str:
    """Now, as iso_at() writes it."""
    return iso_at(time.time())
