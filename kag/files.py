"""Saving a file so that readers see the old version or the new one, never half of either.

:func:`atomic_write_bytes` is the one writer of every file kag saves for a user (stores,
programs, variables, checkpoints, training logs, pictures): it writes to a temporary file
beside the target, flushes and ``fsync``s it, renames it over the target (``os.replace``)
and ``fsync``s the directory, so the rename survives a crash. A process killed at any
moment leaves the previous version whole, or the new one. The target keeps its permission
bits (a new file gets the usual ``0o666 & ~umask``). Temporary files left behind by a
process killed mid-save are removed by the next save once they are a minute old.
:func:`atomic_write_text` and :func:`atomic_write_json` encode, then call it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from kag.errors import FileWriteError, StoreError

STALE_TEMP_SECONDS = 60.0


def _temp_prefix(target: Path) -> str:
    return f".{target.name}."


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove_stale_temps(target: Path) -> None:
    cutoff = time.time() - STALE_TEMP_SECONDS
    for leftover in target.parent.glob(_temp_prefix(target) + "*.tmp"):
        with contextlib.suppress(OSError):
            if leftover.stat().st_mtime < cutoff:
                leftover.unlink()


def atomic_write_bytes(target: Path, data: bytes) -> Path:
    """Replace ``target`` with ``data`` atomically and durably; its directory must exist.

    Raises:
        FileWriteError: the folder is missing, ``target`` is a directory, or the write failed
            (disk full, no permission); the message names the file and the previous version is intact.
    """
    target = Path(target)
    if not target.parent.is_dir():
        raise FileWriteError(
            f"cannot save {target}: the directory {target.parent} does not exist (removed?); create it first."
        )
    if target.is_dir():
        raise FileWriteError(f"cannot save {target}: it is a directory; give a file name.")
    try:
        mode = target.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o666 & ~_current_umask()
    _remove_stale_temps(target)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=_temp_prefix(target), suffix=".tmp")
    except OSError as exc:
        raise FileWriteError(f"cannot save {target}: {exc.strerror or exc}.") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)  # readers never see a half-written file
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, FileWriteError):
            raise FileWriteError(
                f"cannot save {target}: {exc.strerror or exc}; its previous version is unchanged."
            ) from exc
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable (not possible on every OS)
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return target


def atomic_write_text(target: Path, text: str) -> Path:
    """:func:`atomic_write_bytes` of ``text`` as UTF-8."""
    return atomic_write_bytes(target, text.encode("utf-8"))


def atomic_write_json(target: Path, document: Any) -> Path:
    """:func:`atomic_write_bytes` of ``document`` as strict JSON (NaN and infinities are refused)."""
    try:
        data = json.dumps(document, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except ValueError as exc:
        raise StoreError(f"cannot save {target}: {exc} (a stored value is NaN or infinite).") from exc
    return atomic_write_bytes(target, data)


def sha256_file(path: Path, *, chunk_size: int = 1 << 20) -> str:
    """The hex sha256 of a file, read in chunks (a 100 MB model takes about 0.3 s)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk_size):
            digest.update(block)
    return digest.hexdigest()
