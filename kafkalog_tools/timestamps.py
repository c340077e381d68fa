"""Timestamps as users type them: epoch milliseconds (Kafka's unit) or ISO-8601."""
from __future__ import annotations

import re
from datetime import datetime, timezone


def parse_timestamp(text: str) -> int:
    """Epoch milliseconds, or ISO-8601 (a time without a zone is UTC). Raises ValueError."""
    if re.fullmatch(r"\d+", text.strip()):
        return int(text)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is neither epoch milliseconds nor an ISO-8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return round(moment.timestamp() * 1000)
