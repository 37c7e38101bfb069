"""Time zones named in text or config: IANA names, UTC offsets and common abbreviations."""

from __future__ import annotations

import re
from datetime import timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# Common abbreviations as fixed offsets (hours). Ambiguous ones take their most common reading:
# CST is US Central, IST is India (docs/stores.md says so; name the IANA zone to be exact).
ZONE_ABBREVIATIONS = {
    "UTC": 0, "GMT": 0, "Z": 0, "WET": 0, "WEST": 1, "BST": 1, "CET": 1, "CEST": 2, "MET": 1, "MEST": 2,
    "EET": 2, "EEST": 3, "MSK": 3, "IST": 5.5, "ICT": 7, "WIB": 7, "HKT": 8, "SGT": 8, "AWST": 8, "PHT": 8,
    "JST": 9, "KST": 9, "ACST": 9.5, "AEST": 10, "AEDT": 11, "NZST": 12, "NZDT": 13, "HST": -10, "AKST": -9,
    "AKDT": -8, "PST": -8, "PDT": -7, "MST": -7, "MDT": -6, "CST": -6, "CDT": -5, "EST": -5, "EDT": -4,
    "AST": -4, "ADT": -3, "NST": -3.5, "BRT": -3, "ART": -3,
}


def zone_named(token: str) -> tzinfo | None:
    """The zone a token names, or None: IANA names, UTC/GMT offsets, bare offsets, abbreviations."""
    token = token.strip()
    if "/" in token:
        try:
            return ZoneInfo(token)
        except (ZoneInfoNotFoundError, ValueError):
            return None
    match = re.fullmatch(r"(?:(UTC|GMT|Z)\s*)?([+-])\s*(\d{1,2})(?::?(\d{2}))?", token, re.IGNORECASE)
    if match and (match.group(1) or len(match.group(3)) == 2):
        hours, minutes = int(match.group(3)), int(match.group(4) or 0)
        if hours > 14 or minutes > 59:
            return None
        sign = -1 if match.group(2) == "-" else 1
        return timezone(sign * timedelta(hours=hours, minutes=minutes))
    offset = ZONE_ABBREVIATIONS.get(token.upper()) if token.isupper() or token.upper() in ("UTC", "GMT") else None
    if offset is None:
        return None
    return timezone.utc if offset == 0 else timezone(timedelta(hours=offset))
