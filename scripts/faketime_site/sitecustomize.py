"""Imported by every Python process of `scripts/test.sh --shifted-clock` (it is put on PYTHONPATH there), nowhere else.

libfaketime with FAKETIME_DONT_FAKE_MONOTONIC turns Python's `time.sleep` (clock_nanosleep on CLOCK_MONOTONIC with an
absolute deadline, since Python 3.11) into OSError EINVAL (libfaketime issue 426); faking the monotonic clock
instead makes lock and condition timeouts wait for the offset. Sleep with select, whose timeout is relative."""

import select
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], seconds)


time.sleep = _sleep
