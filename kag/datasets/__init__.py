"""Labelled datasets to train and evaluate programs on (shipped with kag, no download)."""

from kag.datasets.kgqa import TYPES as KGQA_TYPES
from kag.datasets.kgqa import Answer, Query, kgqa_records, load_kgqa, load_kgqa_graph

__all__ = ["KGQA_TYPES", "Answer", "Query", "kgqa_records", "load_kgqa", "load_kgqa_graph"]
