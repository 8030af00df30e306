"""Write the JSON schemas of the example models into ``schemas/`` (``python -m kag.examples.export``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from kag.datamodels.schema import GraphSchema, provider_schema
from kag.files import atomic_write_text
from kag.query.triplet import triplet_chain_schema, triplet_search_schema


def example_schemas() -> dict[str, dict[str, Any]]:
    """File name -> schema, for the seed example models."""
    from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS

    graph = GraphSchema(ENTITY_MODELS, RELATION_MODELS)
    out: dict[str, dict[str, Any]] = {}
    for model in (*graph.entity_models, *graph.relation_models):
        out[f"seed/{model.graph_label}.json"] = model.model_json_schema()
    out["seed/triplet_search.json"] = provider_schema(triplet_search_schema(graph))
    out["seed/triplet_chain_3.json"] = provider_schema(triplet_chain_schema(graph, 3))
    return out


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    root = Path(argv[0] if argv else "schemas")
    for name, schema in example_schemas().items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, render(schema))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
