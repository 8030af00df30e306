"""Other names learned from labels: an alias the graph lacks, run as the entity's own name.

Where a labelled question names an entity by a name the graph does not hold (a long form, a
translation, a former name) and the search found from its answer needs it, training learns the alias
(``Variable.aliases``: ``{name key: {"label", "name"}}``). A retriever then applies it to every
search (:func:`search_with_aliases`) and to the text its model reads (:func:`inputs_with_aliases`);
nothing is written into the graph. An alias that is already another entity's name, or names a
label the retriever does not search, is refused (:func:`check_aliases`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from kag.datamodels.schema import ANY, GraphSchema
from kag.errors import TrainingError
from kag.knowledge.base import KnowledgeBase
from kag.programs.demo_choices import SIMILARITY_FIELDS
from kag.ranking.linking import name_key

__all__ = ["check_aliases", "inputs_with_aliases", "replace_aliases", "search_with_aliases"]

Aliases = Mapping[str, Mapping[str, str]]


def replace_aliases(text: str, aliases: Mapping[str, Mapping[str, str]]) -> str:
    """``text`` with every whole-word occurrence of an alias (any case, any punctuation between its
    words) replaced by the entity's name, longest alias first."""
    for key in sorted(aliases, key=len, reverse=True):
        pattern = r"(?<!\w)" + r"\W+".join(re.escape(w) for w in key.split()) + r"(?!\w)"
        text = re.sub(pattern, aliases[key]["name"], text, flags=re.IGNORECASE)
    return text


def search_with_aliases(search: dict[str, Any], aliases: Aliases) -> dict[str, Any]:
    """``search`` with every similarity text that is an alias (of a fitting label) run as the name."""
    if not aliases:
        return search

    def renamed(hop: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(hop)
        for side, label_field in zip(SIMILARITY_FIELDS, ("subject_label", "object_label"), strict=True):
            text = out.get(side)
            known = aliases.get(name_key(text)) if isinstance(text, str) else None
            if known is not None and out.get(label_field) in (ANY, known["label"]):
                out[side] = known["name"]
        return out

    if isinstance(search.get("hops"), list):
        return {**search, "hops": [renamed(h) if isinstance(h, Mapping) else h for h in search["hops"]]}
    return renamed(search)


def inputs_with_aliases(items: list[Any], aliases: Aliases) -> list[Any]:
    """Model inputs with each alias in their strings replaced by the entity's name."""
    if not aliases:
        return items
    out: list[Any] = []
    for item in items:
        if not isinstance(item, BaseModel):
            out.append(item)
            continue
        changed = {
            name: replace_aliases(value, aliases) for name, value in item.model_dump().items() if isinstance(value, str)
        }
        out.append(item.model_copy(update=changed))
    return out


async def check_aliases(kb: KnowledgeBase, schema: GraphSchema, aliases: Aliases, owner: str) -> None:
    """Raise :class:`~kag.errors.TrainingError` for an alias of a label ``schema`` lacks, or one that is
    already the name of another entity of the graph (it would silently redirect searches for that one)."""
    index = await kb.names()
    for key, target in aliases.items():
        if target.get("label") not in schema.entities:
            raise TrainingError(
                f"alias {key!r} names label {target.get('label')!r}, which {owner!r} does not search; "
                f"its labels are {list(schema.entity_labels)}."
            )
        taken = index.exact(name_key(key), list(schema.entity_labels))
        if taken and name_key(key) != name_key(str(target.get("name"))):
            raise TrainingError(
                f"alias {key!r} for {target.get('name')!r} is already the name of entity {taken[0]!r} in the "
                "graph: an alias may only name what the graph does not; drop it or rename the entity."
            )
