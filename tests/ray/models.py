"""Model factories the Ray workers import (``tests`` is on their ``PYTHONPATH``, see ``conftest.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic

from kag.engines.pipeline import ModelSpec
from kag.lm.base import LanguageModel, Message, ModelCapabilities, capabilities_of


@dataclass(frozen=True)
class KillsItsActorOnce:
    """Builds ``spec``'s model; the first call of the whole job (``flag`` does not exist yet) kills
    the Ray actor it runs in with ``ray.kill`` (restartable), mid-batch."""

    spec: str
    flag: str

    @property
    def name(self) -> str:
        """The spec's name: the same job as ``--lm spec`` (so the manifest carries over)."""
        return self.spec

    def __call__(self) -> LanguageModel:
        return _Killing(ModelSpec(self.spec)(), Path(self.flag))


class _Killing:
    def __init__(self, inner: LanguageModel, flag: Path) -> None:
        self.inner, self.flag = inner, flag

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def capabilities(self) -> ModelCapabilities:
        return capabilities_of(self.inner)

    def get_config(self) -> dict[str, Any]:
        return self.inner.get_config()

    async def generate(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any] | type[pydantic.BaseModel],
        *,
        validate: Callable[[dict[str, Any]], Any] | None = None,
        schema_name: str = "output",
    ) -> dict[str, Any]:
        if not self.flag.exists():
            import ray

            self.flag.write_text("killed\n", encoding="utf-8")
            ray.kill(ray.get_runtime_context().current_actor, no_restart=False)
            await asyncio.sleep(60)  # the process is gone before this ends
        return await self.inner.generate(messages, schema, validate=validate, schema_name=schema_name)
