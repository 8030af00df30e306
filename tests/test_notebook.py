"""notebooks/explore.ipynb runs top to bottom on the memory store and shows real results."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

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
    assert "vector.similarity.cosine" in text  # the compiled Cypher
    assert "(3, ['Barcelona', 'Hamburg', 'Lyon', 'Marseille', 'Milan', 'Munich', 'Osaka'])" in text
    assert "'City': 12" in text
    assert "'Rome (extractive answer" in text  # the program's answer
    assert "rome.md" in html and "geo:1" in html  # the RAG answer with its citations


def test_notebook_is_current() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from make_notebook import build

    on_disk = nbformat.read(ROOT / "notebooks" / "explore.ipynb", as_version=4)
    assert [c.source for c in on_disk.cells] == [c.source for c in build().cells], (
        "notebooks/explore.ipynb is stale: run `python scripts/make_notebook.py`"
    )
