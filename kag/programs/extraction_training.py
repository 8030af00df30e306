"""How the extractor trains: runs that write nothing, labelled passages as data, demos and teacher.

A run inside ``fit`` or ``evaluate`` (or inside :func:`dry_run`) writes nothing and returns what it
would write (:func:`writes_held`). :func:`training_data` makes labelled passages ``(x, y)`` for
``fit``; :class:`LabelledPassages` stands in as the teacher that makes them demos. A traced chunk's
extraction becomes a demo candidate (:func:`as_demo_output`), and the trainer's exploration tries the
outputs one edit away from it (:func:`extraction_variants`).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from kag.datamodels.schema import GraphSchema
from kag.errors import ConfigError, LanguageModelError
from kag.lm.base import Message
from kag.programs.extraction_guards import INTERNAL, UNSTATED, UNSUPPORTED, Extracted
from kag.text import normalize_text
from kag.training import trace
from kag.training.variables import Demo

__all__ = [
    "LabelledPassages",
    "as_demo_output",
    "dry_run",
    "extraction_variants",
    "labelled_pair",
    "training_data",
    "writes_held",
]

_DRY_RUN: ContextVar[bool] = ContextVar("kag_extraction_dry_run", default=False)


@contextlib.contextmanager
def dry_run() -> Iterator[None]:
    """Inside the block, every :class:`~kag.programs.extractor.KnowledgeExtractor` run writes nothing
    and reports what it would write (as it does inside ``fit`` and ``evaluate``, where a run is traced)."""
    token = _DRY_RUN.set(True)
    try:
        yield
    finally:
        _DRY_RUN.reset(token)


def writes_held() -> bool:
    """Whether the current run must not write: inside :func:`dry_run`, or a traced training run."""
    # a run that ``fit``/``evaluate`` makes is traced (kag.training.trace.tracing): it only scores
    return _DRY_RUN.get() or trace.tracing_active()


def labelled_pair(demo: Demo) -> tuple[str, dict[str, Any]]:
    """A labelled passage demo as its ``(passage text, extraction)`` pair."""
    return str(demo.input["text"]), demo.output


def as_demo_output(extracted: Extracted) -> dict[str, Any]:
    """A chunk's extraction as a labelled passage's output: its entities (ends of relations included)
    and the relations its guards accept, by full names."""
    entities: dict[tuple[str, str], dict[str, Any]] = {}
    for entity in extracted.entities:
        data = entity.model_dump(mode="json")
        shown = {k: v for k, v in data.items() if not k.startswith("_") and k in type(entity).model_fields}
        entities.setdefault((entity.label, normalize_text(entity.search_text())), shown)
    relations = []
    for item in extracted.relations:
        if item[UNSTATED] or item[UNSUPPORTED]:
            continue
        subj, obj = item["subject"], item["object"]
        for ref in (subj, obj):
            entities.setdefault((ref.label, normalize_text(ref.name)), {"label": ref.label, "name": ref.name})
        props = {k: v for k, v in item.items() if k not in ("label", "subject", "object", *INTERNAL)}
        relations.append(
            {
                "label": item["label"],
                "subject": subj.model_dump(mode="json"),
                "object": obj.model_dump(mode="json"),
                **props,
            }
        )
    return {"entities": list(entities.values()), "relations": relations}


def extraction_variants(schema: GraphSchema, output: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Variants of one traced extraction for the trainer's exploration: each relation dropped,
    read the other way round, or read as another relation between the same labels (at most 48)."""
    relations = list(output.get("relations", []))
    variants: list[dict[str, Any]] = []
    for i, item in enumerate(relations):
        others = relations[:i] + relations[i + 1 :]
        variants.append({**output, "relations": others})
        subj, obj = item.get("subject", {}), item.get("object", {})
        spec = schema.relations.get(item.get("label", ""))
        if spec is not None and obj.get("label") in spec.subj_labels and subj.get("label") in spec.obj_labels:
            variants.append({**output, "relations": [*others, {**item, "subject": obj, "object": subj}]})
        for other, other_spec in schema.relations.items():
            fits = subj.get("label") in other_spec.subj_labels and obj.get("label") in other_spec.obj_labels
            if other != item.get("label") and fits:
                variants.append({**output, "relations": [*others, {**item, "label": other}]})
    return variants[:48]


def training_data(
    passages: Sequence[tuple[str, Mapping[str, Any]]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(x, y)`` for ``fit`` / ``evaluate`` of a program around a
    :class:`~kag.programs.extractor.KnowledgeExtractor` from labelled passages (``(passage text,
    extraction)`` pairs): each ``x`` the passage's ``text``, each ``y`` the relations it states as
    :attr:`~kag.programs.extraction_report.ExtractionReport.extracted`."""
    x: list[dict[str, Any]] = []
    y: list[dict[str, Any]] = []
    for i, pair in enumerate(passages):
        if not (isinstance(pair, tuple | list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise ConfigError(f"passages[{i}] must be a (passage text, extraction) pair.")
        relations = dict(pair[1]).get("relations", [])
        if not isinstance(relations, list):
            raise ConfigError(f"passages[{i}]: 'relations' must be a list.")
        x.append({"text": pair[0]})
        y.append(
            {
                "extracted": [
                    {"label": r["label"], "subject": dict(r["subject"]), "object": dict(r["object"])} for r in relations
                ]
            }
        )
    return x, y


class LabelledPassages:
    """A teacher for ``fit``: answers an extraction call with the labelled extraction of its passage.

    Given to an optimizer (``BootstrapFewShot(teacher=LabelledPassages(pairs))``, or
    ``KNNFewShot``), it makes each training run of a labelled passage a right run, so the labelled
    passages become the demos the optimizer chooses among; the candidates are still scored with
    the extractor's own model, so a set of demos is kept only where it helps that model. A passage
    it was not given is a :class:`~kag.errors.LanguageModelError` (that run scores 0).
    """

    name = "labelled-passages"

    def __init__(self, passages: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        self._by_text: dict[str, dict[str, Any]] = {}
        for i, pair in enumerate(passages):
            if not (isinstance(pair, tuple | list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise ConfigError(f"passages[{i}] must be a (passage text, extraction) pair.")
            self._by_text[normalize_text(pair[0])] = copy.deepcopy(dict(pair[1]))

    def __len__(self) -> int:
        return len(self._by_text)

    async def generate(
        self,
        messages: Sequence[Message],
        json_schema: Mapping[str, Any],
        *,
        validate: Any = None,
        schema_name: str = "output",
    ) -> dict[str, Any]:
        """The labelled extraction of the passage in the last user message."""
        content = str(messages[-1]["content"]) if messages else ""
        passage = content.split("\n", 1)[1] if "\n" in content else content
        labelled = self._by_text.get(normalize_text(passage))
        if labelled is None:
            raise LanguageModelError(
                "LabelledPassages has no labelled extraction of this passage; give it every passage of x."
            )
        answer = copy.deepcopy(labelled)
        if validate is not None:
            validate(answer)
        return answer

    def get_config(self) -> dict[str, Any]:
        """Descriptive only (the passages are not saved)."""
        return {"type": "labelled-passages", "passages": len(self._by_text)}
