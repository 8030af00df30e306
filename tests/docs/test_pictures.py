"""The committed pictures (README, site) are what kag draws today."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

from tests.docs.blocks import ROOT

PICTURES = ROOT / "docs" / "_static" / "pictures"


def test_committed_pictures_match_what_kag_draws() -> None:
    # a fresh process: label colours are assigned in the order a process first draws the labels
    done = subprocess.run(
        [sys.executable, "docs/_ext/pictures.py", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_pictures_show_the_graph_and_the_program() -> None:
    subgraph = ET.fromstring((PICTURES / "subgraph-france.svg").read_text(encoding="utf-8"))
    titles = {t.text for t in subgraph.iter() if t.tag.endswith("title")}
    assert "Paris -[IsCapitalOf]-> France" in titles
    program = (PICTURES / "program.svg").read_text(encoding="utf-8")
    assert "KnowledgeRetriever" in program and "Generator" in program
