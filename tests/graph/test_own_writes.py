"""The own-write log behind label-matrix refreshes: ids only when the stamps grew by exactly this
store's own committed writes, with no write in flight while a version was read."""

from __future__ import annotations

import pytest

from kag.graph.neo4j_write_counters import LOG, OwnWrites, Snapshot


def test_own_writes_alone_give_their_ids() -> None:
    own = OwnWrites()
    start = own.snapshot("City")
    assert start == Snapshot(0, 0)
    with own.writing(["City", "Country"]) as done:
        assert own.snapshot("City") is None  # in flight: no snapshot
        done["City"] = (2, ["a", "b"])
        done["Country"] = (1, ["x"])
    with own.writing(["City"]) as done:
        done["City"] = (1, ["b", "c"])
    now = own.snapshot("City")
    assert now == Snapshot(2, 3)
    assert own.written_between("City", start, now, stamps_grew=3) == frozenset({"a", "b", "c"})
    assert own.written_between("City", start, now, stamps_grew=4) is None  # someone else stamped too
    assert own.written_between("City", now, now, stamps_grew=0) == frozenset()
    assert own.written_between("City", now, now, stamps_grew=1) is None
    country = own.snapshot("Country")
    assert own.written_between("Country", Snapshot(0, 0), country, stamps_grew=1) == frozenset({"x"})


def test_a_failed_or_unreported_write_is_unknown() -> None:
    own = OwnWrites()
    start = own.snapshot("City")
    assert start is not None
    with pytest.raises(RuntimeError), own.writing(["City"]):
        raise RuntimeError("the commit acknowledgement was lost")
    after_failure = own.snapshot("City")
    assert after_failure is not None
    assert own.written_between("City", start, after_failure, stamps_grew=0) is None
    assert own.written_between("City", start, after_failure, stamps_grew=1) is None
    with own.writing(["City"]):
        pass  # the caller did not report what it wrote
    later = own.snapshot("City")
    assert later is not None
    assert own.written_between("City", after_failure, later, stamps_grew=0) is None
    assert own.written_between("City", after_failure, later, stamps_grew=1) is None


def test_a_log_that_no_longer_reaches_back_is_unknown() -> None:
    own = OwnWrites()
    start = own.snapshot("City")
    assert start is not None
    for n in range(LOG + 1):
        with own.writing(["City"]) as done:
            done["City"] = (1, [f"n{n}"])
    now = own.snapshot("City")
    assert now is not None
    assert own.written_between("City", start, now, stamps_grew=LOG + 1) is None
    recent = Snapshot(now.finished - 2, now.stamps - 2)
    assert own.written_between("City", recent, now, stamps_grew=2) == frozenset({f"n{LOG - 1}", f"n{LOG}"})
