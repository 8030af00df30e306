from typing import Literal

import pytest

import kag
from kag.errors import InvalidInputError, SchemaError
from kag.examples.seed import City, Country, IsCapitalOf


def test_label_default_is_filled_in_when_omitted() -> None:
    class Town(kag.Entity):
        label: Literal["Town"]
        name: str

    assert Town(name="Ely").label == "Town"
    assert Town.graph_label == "Town"


def test_wrong_label_value_is_rejected() -> None:
    with pytest.raises(Exception, match="Country"):
        Country(label="City", name="France")  # type: ignore[arg-type]


def test_stable_ids_from_label_and_key_fields() -> None:
    assert Country(name="France").id == Country(name="France").id
    assert Country(name="France").id != Country(name="Spain").id
    # same key, different label: different identity
    assert City(name="Luxembourg").id != Country(name="Luxembourg").id
    # non-key fields do not change identity
    assert City(name="Paris", population=1).id == City(name="Paris").id


def test_explicit_key_fields() -> None:
    class Person(kag.Entity):
        label: Literal["Person"] = "Person"
        email: str = kag.Field(key=True)
        name: str

    assert Person.key_fields() == ("email",)
    assert Person(email="a@x", name="A").id == Person(email="a@x", name="B").id
    assert "kag" not in str(Person.model_json_schema())  # the key marker stays out of schemas


def test_relation_roundtrip_and_id() -> None:
    rel = IsCapitalOf(subj=City(name="Paris"), obj=Country(name="France"))
    again = IsCapitalOf.from_dict(rel.to_dict())
    assert again == rel and again.id == rel.id
    assert IsCapitalOf.endpoint_models("subj") == (City,)


def test_relation_endpoint_type_is_enforced() -> None:
    with pytest.raises(Exception, match="City"):
        IsCapitalOf(subj=Country(name="France"), obj=Country(name="France"))  # type: ignore[arg-type]


def test_union_endpoints() -> None:
    class Town(kag.Entity):
        label: Literal["Town"] = "Town"
        name: str

    class LocatedIn(kag.Relation):
        subj: City | Town
        label: Literal["LocatedIn"] = "LocatedIn"
        obj: Country

    rel = LocatedIn.from_dict({"subj": {"label": "Town", "name": "Ely"}, "obj": {"name": "UK"}})
    assert isinstance(rel.subj, Town)
    schema = kag.GraphSchema([Country], [LocatedIn])
    assert schema.relations["LocatedIn"].subj_labels == ("City", "Town")
    assert set(schema.entity_labels) == {"Country", "City", "Town"}


def test_from_dict_errors_are_typed() -> None:
    with pytest.raises(InvalidInputError, match="Country"):
        Country.from_dict({"nom": "France"})


@pytest.mark.parametrize("bad", ["1abc", "has space", "a`b", "x" * 65, "Ünicode", "a-b"])
def test_unsafe_labels_are_refused_at_class_definition(bad: str) -> None:
    with pytest.raises(SchemaError, match="identifier"):
        type("Bad", (kag.Entity,), {"__annotations__": {"label": Literal[bad], "name": str}})  # type: ignore[valid-type]


def test_reserved_field_names_are_refused() -> None:
    with pytest.raises(SchemaError, match="reserved"):

        class Bad(kag.Entity):
            label: Literal["Bad"] = "Bad"
            embedding: list[float]


def test_duplicate_labels_in_schema() -> None:
    class Country2(kag.Entity):
        label: Literal["Country"] = "Country"
        name: str

    with pytest.raises(SchemaError, match="two models"):
        kag.GraphSchema([Country, Country2], [])


def test_schema_errors_name_the_allowed_labels(schema: kag.GraphSchema) -> None:
    with pytest.raises(SchemaError, match=r"allowed: \['City', 'Country'\]"):
        schema.entity_model("Planet")


def test_id_is_cached_and_follows_changes() -> None:
    city = City(name="Paris")
    first = city.id
    assert city.id is first  # cached
    city.name = "Lyon"
    assert city.id == City(name="Lyon").id != first
    rel = IsCapitalOf(subj=City(name="Paris"), obj=Country(name="France"))
    before = rel.id
    rel.subj.name = "Nice"  # a nested change reaches the relation's id too
    assert rel.id == IsCapitalOf(subj=City(name="Nice"), obj=Country(name="France")).id != before


@pytest.mark.parametrize("name", ["nodes", "relations", "documents", "chunks", "mentions"])
def test_a_label_named_like_a_counts_total_is_refused(name: str) -> None:
    # counts() reports these totals beside the per-label counts; such a label would merge with one
    from typing import Literal

    from kag.errors import SchemaError

    with pytest.raises(SchemaError, match="counts"):
        type(
            "Clash",
            (kag.Entity,),
            {"__annotations__": {"label": Literal[name], "name": str}, "label": name},  # type: ignore[valid-type]
        )


@pytest.mark.parametrize("label", ["Chunk", "Document", "KagEntity", "KagWrites_City", "KagWrites_"])
def test_labels_kag_uses_itself_are_refused(label: str) -> None:
    with pytest.raises(SchemaError, match="reserved"):
        type("Model", (kag.Entity,), {"__annotations__": {"label": Literal[label]}})  # type: ignore[valid-type]
    with pytest.raises(SchemaError, match="reserved"):
        type("Rel", (kag.Relation,), {"__annotations__": {"label": Literal[label], "subj": City, "obj": Country}})  # type: ignore[valid-type]


def test_the_namespace_property_is_a_reserved_field() -> None:
    with pytest.raises(SchemaError, match="reserved"):
        type("Model", (kag.Entity,), {"__annotations__": {"label": Literal["Tenanted"], "kag_ns": str}})


def test_a_document_takes_its_text_positionally_or_by_name() -> None:
    given = kag.Document("Receipts are due in 30 days.", source="policy.md")
    assert given == kag.Document(text="Receipts are due in 30 days.", source="policy.md")
    with pytest.raises(InvalidInputError, match="text once"):
        kag.Document("a", text="b")
