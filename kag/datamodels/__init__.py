"""Data models: entities, relations, documents, chunks and schema helpers."""

from kag.datamodels.base import DataModel, Entity, Field, Relation, check_identifier, stable_hash
from kag.datamodels.documents import Chunk, Document, chunk_id, document_id
from kag.datamodels.schema import ANY, GraphSchema, RelationSpec, dynamic_enum, inline_refs, strict_schema

__all__ = [
    "ANY",
    "Chunk",
    "DataModel",
    "Document",
    "Entity",
    "Field",
    "GraphSchema",
    "Relation",
    "RelationSpec",
    "check_identifier",
    "chunk_id",
    "document_id",
    "dynamic_enum",
    "inline_refs",
    "stable_hash",
    "strict_schema",
]
