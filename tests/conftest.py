"""Shared fixtures: the seed schema and a populated memory knowledge base."""

from __future__ import annotations

import pytest

import kag
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, seed_facts


@pytest.fixture
def schema() -> kag.GraphSchema:
    return kag.GraphSchema(ENTITY_MODELS, RELATION_MODELS)


@pytest.fixture
async def kb() -> kag.KnowledgeBase:
    base = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    await base.upsert(seed_facts())
    return base
