"""Facts about the machine kag runs on that more than one layer needs."""

from __future__ import annotations

import os


def available_cores() -> int:
    """Cores this process may run on (the affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows
        return max(1, os.cpu_count() or 1)
