"""The pictures the README and the site show, drawn by kag itself: ``python docs/_ext/pictures.py``.

They are committed (GitHub shows the README's from the repository) and ``tests/docs/test_pictures.py``
redraws them (``--check``, in a fresh process: a view's label colours depend on what the process drew
before) and fails when a committed one no longer matches what kag draws, so they cannot go stale.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PICTURES = ROOT / "docs" / "_static" / "pictures"


async def _subgraph() -> str:
    import kag
    from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, Country, seed_facts

    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    await kb.upsert(seed_facts())
    view = await kb.subgraph(Country(name="France"), depth=1)
    return str(view._repr_html_())


async def _program() -> str:
    import kag
    from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS
    from kag.training import plot_program

    class Query(kag.DataModel):
        query: str

    class Answer(kag.DataModel):
        answer: str

    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    lm = kag.LexicalLM(knowledge_base=kb)
    inputs = kag.Input(data_model=Query)
    facts = await kag.KnowledgeRetriever(knowledge_base=kb, language_model=lm)(inputs)
    outputs = await kag.Generator(data_model=Answer, language_model=lm)(facts)
    return str(plot_program(kag.Program(inputs=inputs, outputs=outputs, name="geo_qa")).svg)


def render() -> dict[str, str]:
    """File name -> SVG text of every picture."""
    return {"subgraph-france.svg": asyncio.run(_subgraph()), "program.svg": asyncio.run(_program())}


def stale() -> list[str]:
    """The committed pictures that differ from what kag draws now (or are missing, or left over)."""
    drawn = render()
    committed = {p.name for p in PICTURES.glob("*.svg")}
    changed = [
        name
        for name, svg in drawn.items()
        if name not in committed or (PICTURES / name).read_text("utf-8") != svg + "\n"
    ]
    return sorted(changed + list(committed - set(drawn)))


def main() -> int:
    if sys.argv[1:] == ["--check"]:
        changed = stale()
        for name in changed:
            print(f"{name} does not match what kag draws: run `.venv/bin/python docs/_ext/pictures.py`")
        return 1 if changed else 0
    PICTURES.mkdir(parents=True, exist_ok=True)
    for name, svg in render().items():
        (PICTURES / name).write_text(svg + "\n", encoding="utf-8")
        print(f"wrote {(PICTURES / name).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
