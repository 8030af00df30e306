"""Retrieval-augmented generation building blocks: loaders, splitting, embedding, ranking."""

from kag.rag.embedders import CallableEmbedder, Embedder, HashEmbedder

__all__ = ["CallableEmbedder", "Embedder", "HashEmbedder"]
