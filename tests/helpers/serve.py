"""Read the port a `kag serve --port 0` subprocess announces on its first lines."""

from __future__ import annotations

import re
import subprocess

_PORT_LINE = re.compile(r"port (\d+)")


def served_port(proc: subprocess.Popen[str], lines: int = 5) -> int:
    """The port from the server's ``port N`` line; the server's stderr in the error when none comes."""
    assert proc.stdout is not None
    for _ in range(lines):
        match = _PORT_LINE.fullmatch(proc.stdout.readline().strip())
        if match:
            return int(match.group(1))
    proc.kill()
    _, err = proc.communicate(timeout=15)
    raise AssertionError(f"kag serve announced no port; stderr:\n{err}")
