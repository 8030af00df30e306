"""Knowledge sources attached to an agent: names, generated tool names and relabelled results.

Each source gets a tool ``search_<name>`` whose name is the knowledge name with every
run of characters outside ``[A-Za-z0-9_]`` replaced by ``_`` (lower-cased, at most 64
characters in all), so the same name always gives the same tool. Labels are
source-qualified (``[docs:3]``) and numbered on from the labels already shown in
the same answer, so a label names one result across every search of that answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kag.errors import ConfigError
from kag.knowledge.hits import Searcher, SearchHit
from kag.knowledge.tool import LabelledHit, RenderedContext, tool_name_for

__all__ = ["NamedSource", "attach_sources", "relabel", "tool_name_for"]


class NamedSource:
    """A source under another name (``knowledge={"name": source}``): searches go to ``source``."""

    def __init__(self, name: str, source: Searcher) -> None:
        self.name = name
        self.source = source
        self.description: str = source.description
        self.context_max_chars: int = source.context_max_chars
        self.score_threshold: float = source.score_threshold

    def __repr__(self) -> str:
        return f"NamedSource({self.name!r}, {self.source!r})"

    async def search(self, query: str, k: int = 5, where: Mapping[str, Any] | None = None) -> Sequence[SearchHit]:
        """The wrapped source's hits."""
        return await self.source.search(query, k=k, where=where)


def attach_sources(knowledge: Any, taken: Mapping[str, Any], attached: Mapping[str, Any]) -> dict[str, Searcher]:
    """``knowledge=`` (one source, a list of them, or ``{name: source}``) as ``{name: source}``.

    Names must be unique (also against ``attached``), and so must the generated tool names
    (also against ``taken``).
    """
    if knowledge is None:
        return {}
    pairs: list[tuple[str, Any]]
    if isinstance(knowledge, Mapping):
        pairs = [(str(name), source) for name, source in knowledge.items()]
    elif isinstance(knowledge, list | tuple):
        pairs = [(getattr(source, "name", ""), source) for source in knowledge]
    else:
        pairs = [(getattr(knowledge, "name", ""), knowledge)]
    out: dict[str, Searcher] = {}
    tools = set(taken)
    for name, source in pairs:
        if not isinstance(source, Searcher):
            raise ConfigError(
                f"knowledge= takes Knowledge objects (or anything with name, description, context_max_chars, "
                f"score_threshold and async search()), got {type(source).__name__}."
            )
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("every knowledge source needs a non-empty name.")
        if name in out or name in attached:
            raise ConfigError(f"knowledge name {name!r} is used twice; give every source a unique name.")
        tool = tool_name_for(name)
        if tool in tools:
            raise ConfigError(
                f"knowledge {name!r} would add the tool {tool!r}, which the agent already has; choose another name."
            )
        tools.add(tool)
        out[name] = source if source.name == name else NamedSource(name, source)
    return out


def relabel(rendered: RenderedContext, name: str, offset: int) -> RenderedContext:
    """Number the labels of ``rendered`` from ``offset + 1`` instead of 1.

    Rendered data cannot contain ``[name:`` or ``<<<`` (both are defused by
    :func:`~kag.knowledge.tool.render_context`), so only real labels and markers match.
    """
    if offset == 0:
        return rendered
    quoted = re.escape(name)

    def shift(match: re.Match[str]) -> str:
        return f"{match.group(1)}{name}:{int(match.group(2)) + offset}"

    text = re.sub(r"(\[|<<<BEGIN DATA |<<<END DATA )" + quoted + r":(\d+)", shift, rendered.text)
    hits = [
        LabelledHit(f"{name}:{int(item.label.rsplit(':', 1)[1]) + offset}", item.hit, item.shown)
        for item in rendered.hits
    ]
    return RenderedContext(text, hits, rendered.truncated)
