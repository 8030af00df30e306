"""The root package exports what a user writes, and not the query IR."""

import kag
import kag.query

USER_NAMES = (
    "Entity",
    "Relation",
    "Field",
    "GraphSchema",
    "KnowledgeBase",
    "TripletSearch",
    "TripletChain",
    "Knowledge",
    "create_knowledge",
    "Document",
    "SearchHit",
    "LexicalLM",
    "LlamaCppLM",
    "OpenAICompatibleLM",
    "OllamaLM",
    "Program",
    "Input",
    "Generator",
    "KnowledgeRetriever",
)


def test_the_root_exports_what_users_write() -> None:
    missing = [name for name in USER_NAMES if name not in kag.__all__ or not hasattr(kag, name)]
    assert missing == []


def test_the_query_ir_lives_in_kag_query_only() -> None:
    for name in ("QueryPlan", "CompiledQuery", "compile_plan", "plan_triplet_search"):
        assert not hasattr(kag, name), name
        assert hasattr(kag.query, name), name
