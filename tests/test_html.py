"""Jupyter views: escaped HTML for hits and a subgraph drawn as SVG."""

from __future__ import annotations

from typing import Literal

import kag
from kag.knowledge.html import SubgraphView


class Tag(kag.Entity):
    label: Literal["Tag"] = "Tag"
    name: str


class Near(kag.Relation):
    subj: Tag
    label: Literal["Near"] = "Near"
    obj: Tag


async def test_results_render_escaped_html(kb: kag.KnowledgeBase) -> None:
    hits = await kb.triplet_search(
        {"relation_label": "IsCapitalOf", "object_label": "Country", "object_similarity_search": "France"}
    )
    html = hits._repr_html_()
    assert "Paris -[IsCapitalOf]-&gt; France" in html and "<summary>Cypher</summary>" in html
    assert "1 facts" in html and "1.000" in html
    count = await kb.triplet_search({"relation_label": "IsCityOf", "count": True})
    assert "<b>count</b>: 12" in count._repr_html_()
    sim = await kb.similarity_search("City", "Lyon", k=1)
    assert "Lyon" in sim[0]._repr_html_()


async def test_hostile_names_are_escaped() -> None:
    kb = kag.KnowledgeBase(entity_models=[Tag], relation_models=[Near])
    evil = '<script>alert("x")</script>'
    await kb.upsert(Near(subj=Tag(name=evil), obj=Tag(name="b&b")))
    hits = await kb.triplet_search({"relation_label": "Near"})
    html = hits._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html and "b&amp;b" in html
    view = await kb.subgraph(Tag(name=evil))
    svg = view._repr_html_()
    assert "<script>" not in svg and "&lt;script&gt;" in svg


async def test_subgraph_view(kb: kag.KnowledgeBase) -> None:
    from kag.examples.seed import Country

    view = await kb.subgraph(Country(name="France"), depth=1)
    names = sorted(name for _, name in view.nodes.values())
    assert names == ["France", "Lyon", "Marseille", "Paris"]
    assert sum(1 for e in view.edges if e[2] == "IsCapitalOf") == 1 and len(view.edges) == 4
    svg = view.svg()
    assert svg.startswith("<svg") and svg.count("<circle") == 4 and "IsCityOf" in svg
    two = await kb.subgraph(Country(name="France"), depth=0)
    assert len(two.nodes) == 1 and two.edges == []


def test_empty_view() -> None:
    assert "empty" in SubgraphView()._repr_html_()


async def test_search_hits_and_answers_render() -> None:
    from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCapitalOf

    knowledge = kag.create_knowledge(
        "memory://", name="geo", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS
    )
    await knowledge.upsert([IsCapitalOf(subj=City(name="Paris"), obj=Country(name="France"))])
    await knowledge.add_text("Paris <b>is</b> the capital of France.", source="p.md")
    hits = await knowledge.search("capital of France", k=3)
    assert {h.kind for h in hits} == {"fact", "passage"}
    passage = next(h for h in hits if h.kind == "passage")
    assert "&lt;b&gt;is&lt;/b&gt;" in passage._repr_html_() and "p.md" in passage._repr_html_()
    answer = await knowledge.ask("capital of France?", language_model=kag.LexicalLM(knowledge_base=knowledge.kb))
    html = answer._repr_html_()
    assert "<b>Q:</b> capital of France?" in html and "geo:1" in html and "cited" in html
