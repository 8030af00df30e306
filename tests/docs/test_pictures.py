"""The committed pictures (README, site) are what kag draws today."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

from tests.docs.blocks import ROOT

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import pictures


def test_committed_pictures_match_what_kag_draws() -> None:
    drawn = pictures.render()
    assert set(drawn) == {p.name for p in pictures.PICTURES.glob("*.svg")}
    stale = [
        name for name, svg in drawn.items() if (pictures.PICTURES / name).read_text(encoding="utf-8") != svg + "\n"
    ]
    assert not stale, f"{stale} no longer match what kag draws: run `.venv/bin/python docs/_ext/pictures.py`"


def test_the_pictures_show_the_graph_and_the_program() -> None:
    subgraph = ET.fromstring((pictures.PICTURES / "subgraph-france.svg").read_text(encoding="utf-8"))
    titles = {t.text for t in subgraph.iter() if t.tag.endswith("title")}
    assert "Paris -[IsCapitalOf]-> France" in titles
    program = (pictures.PICTURES / "program.svg").read_text(encoding="utf-8")
    assert "KnowledgeRetriever" in program and "Generator" in program
