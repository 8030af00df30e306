"""10,000 adversarial triplet searches: undeclared labels are refused, texts never reach Cypher text.

Texts become vectors, so no text may appear in the compiled query, not even in
its parameters; the query text of a plan must not depend on its texts at all.
The same payloads run on both backends in ``test_neo4j_hardening.py``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kag
from kag.errors import InvalidInputError, SchemaError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City
from kag.query.cypher import CompiledQuery, compile_plan
from kag.query.plan import QueryPlan, plan_triplet_search
from kag.validation import check_namespace
from tests.hardening import BAD_LABELS, BAD_RELATIONS, ENTITY_LABELS, INJECTIONS, RELATION_LABELS, Payload, payloads

SCHEMA = kag.GraphSchema(ENTITY_MODELS, RELATION_MODELS)
PAYLOADS = payloads(10_000)
# what compiled triplet Cypher may contain: kag's fixed read-only syntax, quoted labels, $params
ALLOWED_WORDS = {
    "MATCH", "WITH", "WHERE", "AND", "NOT", "EXISTS", "RETURN", "ORDER", "BY", "DESC", "LIMIT", "AS",
    "count", "vector", "similarity", "cosine", "embedding", "startNode", "id", "null", "score", "IN",
    "kag_ns",  # the namespace property of every node pattern (its value is the parameter $ns)
}  # fmt: skip
FORBIDDEN = re.compile(r"\b(DELETE|DETACH|CREATE|MERGE|SET|REMOVE|CALL|LOAD|DROP|FOREACH|UNION|apoc|dbms)\b", re.I)
PARAM_OR_VAR = re.compile(r"^(\$?[nrsvl]\d+(_\d+)?(_id|_ids|_props|_forward)?|\$threshold|\$k|\$ns|threshold|k)$")
ENTITY_ID = re.compile(r"^e_[0-9a-f]{24}$")  # linked texts carry entity ids the store made, never caller text


def bind_constant(plan: QueryPlan) -> QueryPlan:
    """Bind cheap unit vectors (the query text must not depend on their values either)."""
    n = len(plan.texts())
    return plan.bind(np.ones((n, 8), dtype=np.float32)) if n else plan.bind([])


def with_placeholders(search: dict[str, Any]) -> dict[str, Any]:
    """The same search with every real text replaced by a bland one."""

    def hop(h: dict[str, Any]) -> dict[str, Any]:
        out = dict(h)
        for key in ("subject_similarity_search", "object_similarity_search"):
            if str(out.get(key, "*")).strip() != "*":
                out[key] = "placeholder"
        return out

    if "hops" in search:
        return {"hops": [hop(h) for h in search["hops"]]}
    return hop(search)


def check_compiled(compiled: CompiledQuery, texts: list[str], template: CompiledQuery) -> None:
    """The invariants every compiled triplet query must satisfy."""
    text = compiled.text
    assert text == template.text, "the query text depends on the similarity texts"
    for t in texts:
        # a text can only show up where the fixed syntax itself has it (e.g. "0" in "$v1_0")
        assert t.strip() not in text or t.strip() in template.text
    assert not FORBIDDEN.search(text), text
    assert "//" not in text and "/*" not in text and "'" not in text and '"' not in text and "\x00" not in text
    for ident in re.findall(r"`([^`]*)`", text):  # every quoted identifier is a declared label
        assert ident in ENTITY_LABELS or ident in RELATION_LABELS, ident
    bare = re.sub(r"`[^`]*`", "", text)
    for word in re.findall(r"\$?[A-Za-z_][A-Za-z0-9_]*", bare):
        assert word in ALLOWED_WORDS or PARAM_OR_VAR.match(word), word
    for name in re.findall(r"\$([A-Za-z0-9_]+)", text):
        assert name in compiled.params
    for name, value in compiled.params.items():  # numbers, vectors and entity ids: never caller text
        if name == "ns":  # the store's namespace, never the caller's
            assert value == template.params.get("ns") and check_namespace(value) == value
        elif name.endswith("_ids"):
            assert all(isinstance(x, str) and ENTITY_ID.match(x) for x in value), name
        elif isinstance(value, dict):
            assert all(ENTITY_ID.match(key) and type(v) is float for key, v in value.items()), name
        elif isinstance(value, list):
            assert all(type(x) is float for x in value), name
        else:
            assert type(value) in (int, float), name


def compile_payload(payload: Payload, namespace: str | None = None) -> CompiledQuery | Exception:
    """Plan + compile (in ``namespace``, as a store sets it), returning the typed error instead of raising it."""
    try:
        plan = plan_triplet_search(payload.search, SCHEMA, k=10, threshold=0.5)
    except (SchemaError, InvalidInputError) as exc:
        return exc
    return compile_plan(bind_constant(replace(plan, namespace=namespace)))


def test_generator_covers_the_attack_surface() -> None:
    assert len(PAYLOADS) == 10_000
    bad_labels = sum(p.bad_label for p in PAYLOADS)
    bad_texts = sum(p.bad_text for p in PAYLOADS)
    chains = sum("hops" in p.search for p in PAYLOADS)
    assert bad_labels > 2_000 and bad_texts > 300 and chains > 800
    all_texts = "".join(t for p in PAYLOADS for t in p.texts())
    for fragment in ("`", "//", "/*", "}", "DETACH DELETE", "MATCH", "CALL", "\x00", "東京"):
        assert fragment in all_texts


def test_ten_thousand_payloads_compile_safely_or_fail_typed() -> None:
    compiled_count = 0
    templates: dict[str, CompiledQuery] = {}
    for payload in PAYLOADS:
        out = compile_payload(payload)
        if payload.bad_label or payload.bad_text:
            assert isinstance(out, SchemaError | InvalidInputError), payload.search
            continue
        if isinstance(out, Exception):
            # only the schema may refuse a well-formed search (endpoint types, chains that cannot join)
            assert isinstance(out, SchemaError), (out, payload.search)
            continue
        key = repr(with_placeholders(payload.search))
        if key not in templates:
            template = compile_payload(Payload(with_placeholders(payload.search), False, False))
            assert isinstance(template, CompiledQuery)
            templates[key] = template
        check_compiled(out, payload.texts(), templates[key])
        compiled_count += 1
    assert compiled_count > 2_000  # enough of them get through to the compiler


@pytest.mark.parametrize("label", BAD_LABELS)
@pytest.mark.parametrize("side", ["subject_label", "object_label"])
def test_undeclared_entity_labels_are_refused(label: str, side: str) -> None:
    with pytest.raises((SchemaError, InvalidInputError)):
        plan_triplet_search({side: label, "relation_label": "*"}, SCHEMA)


@pytest.mark.parametrize("label", BAD_RELATIONS)
def test_undeclared_relation_labels_are_refused(label: str) -> None:
    with pytest.raises((SchemaError, InvalidInputError)):
        plan_triplet_search({"relation_label": label}, SCHEMA)


@pytest.mark.parametrize(
    "value", [None, 1, 1.5, True, ["City"], {"$ne": "x"}, b"\xff\xfe", object()], ids=lambda v: type(v).__name__
)
@pytest.mark.parametrize("field", ["subject_label", "relation_label", "subject_similarity_search"])
def test_non_string_fields_are_invalid_input(field: str, value: Any) -> None:
    with pytest.raises(InvalidInputError):
        plan_triplet_search({field: value}, SCHEMA)


@pytest.mark.parametrize("search", ["MATCH (n) RETURN n", 42, None, [{"relation_label": 1}], {"hops": "x"}])
def test_wrong_container_types_are_invalid_input(search: Any) -> None:
    with pytest.raises(InvalidInputError):
        plan_triplet_search(search, SCHEMA)


async def test_real_embedder_path_keeps_texts_out_of_the_query() -> None:
    # kb.compile embeds with the default HashEmbedder; a sample is enough (hashing 4k-char texts is slow)
    # cosine scoring (linking off): the query equals the placeholder template of compile_plan
    raw = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=False)
    # linked scoring (the default): texts become maps of entity ids, still parameters
    linked = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    await linked.upsert([City(name=t[:100]) for t in INJECTIONS[:20] if t.strip()])  # names that are attacks
    sample = [p for p in PAYLOADS if not p.bad_label and not p.bad_text][:400]
    for payload in sample:
        try:
            compiled = await raw.compile(payload.search, k=5, threshold=0.6)
        except SchemaError:
            continue
        template = compile_payload(Payload(with_placeholders(payload.search), False, False), raw.namespace)
        assert isinstance(template, CompiledQuery)
        check_compiled(compiled, payload.texts(), template)
        linked_query = await linked.compile(payload.search, k=5, threshold=0.6)
        linked_template = await linked.compile(with_placeholders(payload.search), k=5, threshold=0.6)
        check_compiled(linked_query, payload.texts(), linked_template)


LABEL = st.sampled_from([*ENTITY_LABELS, "*", *BAD_LABELS])
RELATION = st.sampled_from([*RELATION_LABELS, "*", *BAD_RELATIONS])
TEXT = st.one_of(
    st.just("*"),
    st.text(min_size=1, max_size=80),
    st.lists(st.sampled_from(INJECTIONS), min_size=1, max_size=5).map("".join),
    st.builds(lambda a, b: a + "`) DETACH DELETE n //" + b, st.text(max_size=20), st.text(max_size=20)),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    subject=LABEL,
    relation=RELATION,
    obj=LABEL,
    s_text=TEXT,
    o_text=TEXT,
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_property_any_text_any_label(
    subject: str, relation: str, obj: str, s_text: str, o_text: str, flags: tuple[bool, bool, bool]
) -> None:
    search = {
        "subject_label": subject,
        "subject_similarity_search": s_text,
        "relation_label": relation,
        "object_label": obj,
        "object_similarity_search": o_text,
        "negated": flags[0],
        "bidirectional": flags[1],
        "count": flags[2],
    }
    declared = {*ENTITY_LABELS, "*"}
    bad_label = subject not in declared or obj not in declared or relation not in {*RELATION_LABELS, "*"}
    payload = Payload(search, bad_label, False)
    out = compile_payload(payload)
    if bad_label:
        assert isinstance(out, SchemaError | InvalidInputError)
        return
    if isinstance(out, Exception):
        # blank texts are invalid input; the schema may refuse endpoint combinations
        assert isinstance(out, SchemaError | InvalidInputError)
        if isinstance(out, InvalidInputError):
            assert any(not t.strip() for t in (s_text, o_text))
        return
    template = compile_payload(Payload(with_placeholders(search), False, False))
    assert isinstance(template, CompiledQuery)
    check_compiled(out, payload.texts(), template)
