"""The clock of `scripts/test.sh --shifted-clock`: prints `SECONDS ZONE WHEN`, the offset libfaketime adds to the
wall clock, the zone to run in and the local time the run starts at.

By default the run starts 5 minutes before the first clock change (DST) of America/New_York that is more than 400
days ahead: another year, month and weekday than today's, a host zone other than UTC and the plugin's
Asia/Shanghai, and a local day of 23 or 25 hours around the tests. SHIFTED_NOW (ISO 8601 with an offset, e.g.
2028-03-12T06:55:00+00:00) and SHIFTED_TZ choose another start and zone, e.g. to repeat a failed run."""

import os
import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

AHEAD = timedelta(days=400)
BEFORE_CHANGE = timedelta(minutes=5)


def next_clock_change(zone: ZoneInfo, after: datetime) -> datetime:
    """The first moment after `after` at which `zone`'s offset from UTC changes (to the second)."""
    step = timedelta(hours=1)
    low = after
    while (low + step).astimezone(zone).utcoffset() == low.astimezone(zone).utcoffset():
        low += step
        if low - after > timedelta(days=800):
            raise SystemExit(f"{zone.key} has no clock change: choose a zone with daylight saving time")
    high = low + step
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).utcoffset() == low.astimezone(zone).utcoffset():
            low = middle
        else:
            high = middle
    return high.replace(microsecond=0)


def main() -> None:
    zone = ZoneInfo(os.environ.get("SHIFTED_TZ") or "America/New_York")
    real = time.time()
    if chosen := os.environ.get("SHIFTED_NOW"):
        start = datetime.fromisoformat(chosen)
        if start.tzinfo is None:
            raise SystemExit(f"SHIFTED_NOW={chosen} needs an offset, e.g. {chosen}+00:00")
    else:
        start = next_clock_change(zone, datetime.fromtimestamp(real, timezone.utc) + AHEAD) - BEFORE_CHANGE
    print(round(start.timestamp() - real), zone.key, start.astimezone(zone).isoformat())


if __name__ == "__main__":
    main()
