"""Counters of the writes one Neo4j store made itself, per label: what lets a stale label matrix be
brought up to date by reading back only the nodes written, instead of every embedding of the label.

A label's version is ``(write stamps, node count)`` (see :mod:`kag.graph.neo4j_anchor`). Stamps are
created, never deleted, so between two versions the stamps grew by this store's own stamps plus
everyone else's. When a store counts its own stamps exactly and the growth equals them, nobody else
stamped the label in between: its embeddings changed only on the nodes this store wrote (node
deletions show in the label's id list, which a refresh reads whole).

Counting exactly needs care around writes in flight: a snapshot is taken only while no write of the
label is running, and is valid only when no write started or finished while the version was read
(:meth:`OwnWrites.snapshot` before and after the read, compared). A write that failed may still have
committed (a lost commit acknowledgement), so it leaves an unknown entry: any interval covering it
reloads the label whole.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

LOG = 256  # writes remembered per label; a refresh reaching further back reloads the label whole


@dataclass(frozen=True)
class Snapshot:
    """A label's own-write counters at one instant with no write of it in flight."""

    finished: int  # own writes of the label finished so far
    stamps: int  # own stamps counted so far (failed writes excluded: they leave unknown entries)


@dataclass
class _Label:
    started: int = 0
    finished: int = 0
    stamps: int = 0
    # (finished count after the write, its node ids or None when unknown), oldest first
    log: deque[tuple[int, frozenset[str] | None]] = field(default_factory=lambda: deque(maxlen=LOG))


class OwnWrites:
    """Per-label counts and ids of one store's own committed writes."""

    def __init__(self) -> None:
        self._labels: dict[str, _Label] = {}

    def _of(self, label: str) -> _Label:
        return self._labels.setdefault(label, _Label())

    @contextlib.contextmanager
    def writing(self, labels: Iterable[str]) -> Iterator[dict[str, tuple[int, list[str]]]]:
        """Count one write of ``labels`` from before it starts until it ends.

        The caller fills the yielded dict, once the transaction committed, with each label's
        ``(stamps created, node ids written)``; a label left out, or an exception, records the
        write as unknown.
        """
        states = [(label, self._of(label)) for label in dict.fromkeys(labels)]
        for _, state in states:
            state.started += 1
        done: dict[str, tuple[int, list[str]]] = {}
        ok = False
        try:
            yield done
            ok = True
        finally:
            for label, state in states:
                state.finished += 1
                if ok and label in done:
                    stamps, ids = done[label]
                    state.stamps += stamps
                    state.log.append((state.finished, frozenset(ids)))
                else:
                    state.log.append((state.finished, None))

    def snapshot(self, label: str) -> Snapshot | None:
        """The label's counters now, or ``None`` while a write of it is in flight."""
        state = self._of(label)
        if state.started != state.finished:
            return None
        return Snapshot(state.finished, state.stamps)

    def written_between(self, label: str, old: Snapshot, new: Snapshot, stamps_grew: int) -> frozenset[str] | None:
        """The node ids this store wrote to ``label`` between two snapshots, when its own stamps are
        the label's whole stamp growth ``stamps_grew``; else ``None`` (someone else wrote, a write
        failed, or the log no longer reaches back)."""
        if new.stamps - old.stamps != stamps_grew or new.finished < old.finished:
            return None
        if new.finished == old.finished:
            return frozenset()
        state = self._of(label)
        entries = [(n, ids) for n, ids in state.log if old.finished < n <= new.finished]
        if len(entries) != new.finished - old.finished:  # trimmed from the log
            return None
        out: set[str] = set()
        for _, ids in entries:
            if ids is None:
                return None
            out |= ids
        return frozenset(out)
