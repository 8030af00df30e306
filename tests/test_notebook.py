"""notebooks/explore.ipynb runs top to bottom on the memory store and shows real results."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from tests.helpers.html_tables import tables

ROOT = Path(__file__).resolve().parents[1]


def test_explore_notebook_executes() -> None:
    nb = nbformat.read(ROOT / "notebooks" / "explore.ipynb", as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    html = "\n".join(o.get("data", {}).get("text/html", "") for o in outputs)
    text = "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "Paris -[IsCapitalOf]-&gt; France" in html  # the triplet table
    assert "<svg" in html and "Lyon" in html  # the subgraph view
    assert "MATCH (n0:`City` {kag_ns: $ns})-[r1:`IsCapitalOf`]->(n1" in text  # the compiled Cypher
    assert "(3, ['Barcelona', 'Hamburg', 'Lyon', 'Marseille', 'Milan', 'Munich', 'Osaka'])" in text
    assert "'City': 12" in text
    assert "'Rome (extractive answer" in text  # the program's answer
    assert "rome.md" in html and "geo:1" in html  # the RAG answer with its citations
    trained = re.search(r"reward (\d\.\d\d) -> (\d\.\d\d)", text)  # the training section
    assert trained is not None and float(trained.group(1)) < float(trained.group(2)) == 1.0
    assert any("image/png" in o.get("data", {}) for o in outputs)  # plot_history
    program_svg = next(o["data"]["image/svg+xml"] for o in outputs if "image/svg+xml" in o.get("data", {}))
    assert "retriever" in program_svg and "answerer" in program_svg  # plot_program
    svg = next(o["data"]["text/html"] for o in outputs if o.get("data", {}).get("text/html", "").startswith("<svg"))
    drawn = {t.text for t in ET.fromstring(svg).iter() if t.tag.endswith("title")}
    assert "Paris -[IsCapitalOf]-> France" in drawn and "Paris -[IsCityOf]-> France" in drawn  # both parallel edges
    rag = nb.cells[-1].outputs[-1]["data"]["text/html"]
    found = tables(rag)
    assert found
    for table in found:  # "3 citations" above 3 rows; no column without a header
        count = re.match(r"\d+", table.caption.strip())
        assert count is not None and int(count.group()) == len(table.rows), (table.caption, len(table.rows))
        assert all(table.headers), table.headers
