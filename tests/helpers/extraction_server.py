"""A deterministic extraction model behind a local OpenAI-compatible endpoint, and a corpus for it.

The model reads the passage of each ``/v1/chat/completions`` request (the last message,
``Passage (id ...):\\n<text>``) and answers by rules over the seed models
(:mod:`kag.examples.seed`): "X is the capital of Y.", "X is a city in Y.", "X has N
inhabitants." A passage with the word ``garbled`` gets an answer that is not JSON (every time,
so the extractor reports the chunk as failed). ``latency`` seconds are slept per call, as a
hosted model would take, so a benchmark of concurrent workers is latency-bound, not CPU-bound.

Used by ``tests/ray`` (the Ray ingest against the single process) and ``benchmarks/bench_ray.py``.
"""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path
from typing import Any

from tests.helpers.http_server import LocalHTTPServer, RecordedRequest, Reply

__all__ = ["answer_passage", "extraction_server", "write_corpus"]

_CAPITAL = re.compile(r"\b([A-Z][a-z]+) is the capital of ([A-Z][a-z]+)\b")
_CITY = re.compile(r"\b([A-Za-z][a-z]+) is a city in ([A-Z][a-z]+)\b")
_PEOPLE = re.compile(r"\b([A-Z][a-z]+) has (\d+) inhabitants\b")


def answer_passage(text: str) -> dict[str, Any] | str:
    """The rules' extraction of ``text`` (a JSON object), or a non-JSON answer for a garbled passage."""
    if "garbled" in text:
        return "this is not JSON {"
    entities: dict[tuple[str, str], dict[str, Any]] = {}
    relations: list[dict[str, Any]] = []

    def entity(label: str, name: str, **fields: Any) -> dict[str, str]:
        key = (label, name.casefold())
        item = entities.setdefault(
            key, {"label": label, "name": name, **({"population": None} if label == "City" else {})}
        )
        item.update({k: v for k, v in fields.items() if v is not None})
        return {"label": label, "name": item["name"]}

    for city, country in _CAPITAL.findall(text):
        relations.append(
            {"label": "IsCapitalOf", "subject": entity("City", city), "object": entity("Country", country)}
        )
    for city, country in _CITY.findall(text):
        relations.append({"label": "IsCityOf", "subject": entity("City", city), "object": entity("Country", country)})
    for city, people in _PEOPLE.findall(text):
        entity("City", city, population=int(people))
    return {"entities": list(entities.values()), "relations": relations}


def extraction_server(latency: float = 0.0) -> LocalHTTPServer:
    """A started :class:`LocalHTTPServer` answering chat completions with :func:`answer_passage`."""
    server = LocalHTTPServer()

    def complete(request: RecordedRequest) -> Any:
        if latency:
            time.sleep(latency)
        contents = [str(m["content"]) for m in request.json()["messages"]]
        # the passage is the last "Passage (id ...)" message (a repair prompt may follow it)
        passage = next(c for c in reversed(contents) if c.startswith("Passage (id")).split("\n", 1)[-1]
        answer = answer_passage(passage)
        content = answer if isinstance(answer, str) else json.dumps(answer)
        message = {"role": "assistant", "content": content}
        return Reply.json({"choices": [{"message": message, "finish_reason": "stop"}]})

    server.route("POST", "/v1/chat/completions", complete)
    return server.start()


COUNTRIES = {
    "France": ("Paris", 2103000, ["Lyon", "Marseille", "Nice"]),
    "Germany": ("Berlin", 3645000, ["Hamburg", "Munich", "Cologne"]),
    "Spain": ("Madrid", 3266000, ["Barcelona", "Valencia"]),
    "Italy": ("Rome", 2873000, ["Milan", "Naples", "Turin"]),
    "Japan": ("Tokyo", 13960000, ["Osaka", "Kyoto"]),
    "Portugal": ("Lisbon", 545000, ["Porto", "Braga"]),
}


def write_corpus(
    folder: Path, documents: int = 8, *, paragraphs: int = 3, seed: int = 7, garbled: bool = False
) -> Path:
    """Write ``documents`` Markdown files of ``paragraphs`` paragraphs each about the countries above.

    Facts repeat across files (a city named again, in lower case once, its population stated in
    one file and not another), so entity resolution merges across documents. With ``garbled`` one
    paragraph of the first file makes the model answer something that is not JSON.
    """
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    names = sorted(COUNTRIES)
    for d in range(documents):
        parts = [f"# Notes {d}"]
        for p in range(paragraphs):
            country = names[(d + p) % len(names)]
            capital, people, cities = COUNTRIES[country]
            city = cities[rng.randrange(len(cities))]
            lines = [f"{capital} is the capital of {country}."]
            if rng.random() < 0.5:
                lines.append(f"{capital} has {people} inhabitants.")
            lines.append(f"{city if rng.random() < 0.8 else city.lower()} is a city in {country}.")
            lines.append(f"Travellers to {country} often stay a few days; the trains are fast and the food is good.")
            parts.append(" ".join(lines))
        if garbled and d == 0:
            parts.append("This paragraph is garbled beyond repair and the model cannot read it.")
        (folder / f"notes-{d:03d}.md").write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    return folder
