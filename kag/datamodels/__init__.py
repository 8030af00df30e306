"""Data models: entities, relations, documents, chunks and schema helpers."""

from kag.datamodels.base import DataModel, Entity, Field, Relation, check_identifier, stable_hash
from kag.datamodels.schema import ANY, GraphSchema, RelationSpec, dynamic_enum, inline_refs, strict_schema

__all__ = [
    "ANY",
    "DataModel",
    "Entity",
    "Field",
    "GraphSchema",
    "Relation",
    "RelationSpec",
    "check_identifier",
    "dynamic_enum",
    "inline_refs",
    "stable_hash",
    "strict_schema",
]
