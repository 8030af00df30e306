"""The framework-free part of the adapters: metadata, sources, the triplet tool's core, optional imports."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pydantic
import pytest

import kag
from kag.errors import ConfigError, InvalidInputError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS
from kag.integrations._common import TripletSearchCore, as_knowledge, hit_metadata, knowledge_base_of
from kag.query.triplet import TripletChain


async def test_hit_metadata_of_facts_and_passages(memory_world: kag.Knowledge) -> None:
    hits = await memory_world.search("capital of France", k=2)
    fact = next(h for h in hits if h.kind == "fact")
    passage = next(h for h in hits if h.kind == "passage")

    meta = hit_metadata(fact)
    assert meta["kind"] == "fact" and meta["source"] == "graph" and meta["score"] == fact.score
    assert meta["ids"] == list(fact.ids) and len(meta["ids"]) == 3 and meta["rank"] == fact.rank
    assert meta["triplet"] == {
        "subject": fact.metadata["subject"],
        "relation": fact.metadata["relation"],
        "object": fact.metadata["object"],
    }
    assert meta["triplet"]["relation"]["label"] in {"IsCapitalOf", "IsCityOf", "IsInContinent"}

    meta = hit_metadata(passage)
    assert meta["kind"] == "passage" and meta["source"] == passage.source == "paris.txt"
    assert (meta["chunk_id"], meta["document_id"]) == (passage.chunk_id, passage.document_id)
    assert meta["chunk_id"] and meta["document_id"] and meta["ids"] == [meta["chunk_id"], meta["document_id"]]
    assert meta["lang"] == "en" and meta["year"] == 2021  # the document's own metadata rides along
    assert "triplet" not in meta and meta["score"] == passage.score


def test_sources_are_checked() -> None:
    with pytest.raises(ConfigError, match="Knowledge"):
        as_knowledge("memory://")
    retrieval_only = kag.Knowledge.from_callable(lambda query, k=5, where=None: ["a passage"], name="notes")
    assert as_knowledge(retrieval_only) is retrieval_only
    with pytest.raises(ConfigError, match="retrieval-only"):
        knowledge_base_of(retrieval_only)
    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    wrapped = as_knowledge(kb)
    assert isinstance(wrapped, kag.Knowledge) and wrapped.kb is kb
    assert knowledge_base_of(wrapped) is kb


def test_triplet_core_settings_and_checks() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    for bad in ({"k": 0}, {"threshold": 1.5}, {"max_hops": 0}, {"max_hops": 9}):
        with pytest.raises(ConfigError):
            TripletSearchCore(kb, **bad)  # type: ignore[arg-type]
    core = TripletSearchCore(kb)
    search = core.check(
        {
            "subject_label": "City",
            "subject_similarity_search": "*",
            "relation_label": "IsCapitalOf",
            "object_label": "Country",
            "object_similarity_search": "France",
        }
    )
    # what a strict model may leave out takes kag's declared defaults, as for kag's own models
    assert isinstance(search, kag.TripletSearch)
    assert search.negated is False and search.subject_where == [] and search.order_by is None
    with pytest.raises(InvalidInputError, match=re.escape("['relation_label', 'object_label']")):
        core.check({"subject_label": "City", "subject_similarity_search": "Paris"})
    with pytest.raises(pydantic.ValidationError, match="valid integer"):
        core.check({**search.model_dump(), "limit": "2"})  # strict: no coercion of "2"
    with pytest.raises(InvalidInputError, match="JSON object"):
        core.check(["City"])
    assert "Continent" not in core.description and "IsCapitalOf: City -> Country" in core.description

    chain = TripletSearchCore(kb, max_hops=2)
    hop = search.model_dump()
    assert isinstance(chain.check({"hops": [hop, hop]}), TripletChain)
    for hops in ([], [hop, hop, hop]):
        with pytest.raises(InvalidInputError, match="1 to 2 triplet searches"):
            chain.check({"hops": hops})
    with pytest.raises(InvalidInputError, match=re.escape("'hops[1].object_label'")):
        chain.check({"hops": [hop, {k: v for k, v in hop.items() if k != "object_label"}]})


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False
    )


def test_kag_imports_without_the_frameworks() -> None:
    out = _run(
        """
        import sys
        import kag, kag.integrations
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("langchain_core", "llama_index"))
        print(loaded)
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("module", "package", "extra"),
    [("langchain", "langchain_core", "langchain"), ("llamaindex", "llama_index", "llamaindex")],
)
def test_a_missing_framework_names_its_extra(module: str, package: str, extra: str) -> None:
    out = _run(
        f"""
        import importlib.abc, sys

        class Missing(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name.split(".")[0] == {package!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, Missing())
        from kag.errors import ConfigError, MissingDependencyError
        try:
            import kag.integrations.{module}
        except MissingDependencyError as exc:
            assert isinstance(exc, ImportError) and isinstance(exc, ConfigError)
            print(exc)
        else:
            raise SystemExit("imported without the framework")
        """
    )
    assert out.returncode == 0, out.stderr
    assert f"pip install 'graph-kag[{extra}]'" in out.stdout
