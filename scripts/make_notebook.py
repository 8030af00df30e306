"""Write notebooks/explore.ipynb (cells kept here so the notebook stays reviewable as code)."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

CELLS: list[tuple[str, str]] = [
    (
        "md",
        "# Exploring a kag knowledge graph\n\nTyped models, a graph on the embedded memory store, "
        "triplet searches compiled to Cypher, and a subgraph view. Runs offline.",
    ),
    (
        "code",
        "import kag\nfrom kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, seed_facts\n\n"
        'kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)\n'
        "await kb.upsert(seed_facts())\nawait kb.counts()",
    ),
    ("md", '## The schema a language model fills\nLabels are enums of the declared models plus `"*"`.'),
    ("code", 'schema = kag.triplet_search_schema(kb.schema)\nschema["properties"]["relation_label"]'),
    (
        "md",
        "## A triplet search (with a typo)\nScores are cosine similarities mapped to [0, 1]; "
        "the result renders as a table.",
    ),
    (
        "code",
        'hits = await kb.triplet_search(kag.TripletSearch(subject_label="City", relation_label="IsCapitalOf",\n'
        '    object_label="Country", object_similarity_search="Frnace"), threshold=0.6)\nhits',
    ),
    ("code", "print(hits.query.text)"),
    ("md", "## Counting and negation"),
    (
        "code",
        'cities_in_germany = await kb.triplet_search({"relation_label": "IsCityOf", "object_label": "Country",\n'
        '    "object_similarity_search": "Germany", "count": True})\n'
        'not_capitals = await kb.triplet_search({"subject_label": "City", "relation_label": "IsCapitalOf",\n'
        '    "negated": True}, k=20)\n'
        "cities_in_germany.count, sorted(h.subject.name for h in not_capitals)",
    ),
    ("md", "## Entity similarity and a subgraph"),
    ("code", '(await kb.similarity_search("City", "Munich", k=3))[0]'),
    ("code", 'await kb.subgraph(Country(name="France"), depth=1)'),
    (
        "md",
        "## A program: Input -> KnowledgeRetriever -> Generator\n"
        "`LexicalLM` is the offline lexical matcher (not a language model); swap in "
        "`kag.lm.OpenAICompatibleLM` or `kag.lm.OllamaLM` and the program stays the same.",
    ),
    (
        "code",
        "class Query(kag.DataModel):\n    query: str\n\n\n"
        "class Answer(kag.DataModel):\n    answer: str\n\n\n"
        "lm = kag.LexicalLM(knowledge_base=kb)\n"
        "inputs = kag.Input(data_model=Query)\n"
        "x = await kag.KnowledgeRetriever(knowledge_base=kb, language_model=lm)(inputs)\n"
        "outputs = await kag.Generator(data_model=Answer, language_model=lm)(x)\n"
        'program = kag.Program(inputs=inputs, outputs=outputs, name="qa")\n'
        '(await program(Query(query="What is the capital of Italy?"))).answer',
    ),
    ("md", "## Facts and passages through one Knowledge tool"),
    (
        "code",
        'knowledge = kag.Knowledge(kb, name="geo")\n'
        'await knowledge.add_text("Rome, the capital of Italy, lies on the Tiber.", source="rome.md")\n'
        'await knowledge.ask("What is the capital of Italy?", language_model=lm)',
    ),
]


def build() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src) for kind, src in CELLS
    ]
    return nb


def main(argv: list[str]) -> int:
    path = Path(argv[0] if argv else "notebooks/explore.ipynb")
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(build(), path)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
