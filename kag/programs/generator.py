"""``Generator``: a language model answering into a pydantic data model."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from kag.errors import ConfigError
from kag.lm.base import LanguageModel, Message
from kag.programs.module import (
    Module,
    as_list,
    as_model,
    concat_models,
    import_object,
    language_model_config,
    object_path,
    rebuild_language_model,
    runtime_for,
)
from kag.programs.prompts import (
    DEFAULT_GENERATOR_INSTRUCTIONS,
    DEFAULT_INPUT_TEMPLATE,
    build_messages,
    compile_template,
    describe_fields,
    render_template,
    template_variables,
)

__all__ = ["Generator"]

Example = tuple[BaseModel | Mapping[str, Any], BaseModel | Mapping[str, Any]]


def schema_name_for(model: type[BaseModel]) -> str:
    """A response-format name accepted by every client (``[A-Za-z0-9_-]{1,64}``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", model.__name__)[:64] or "output"


class Generator(Module):
    """Asks a language model for a ``data_model`` given the inputs.

    Messages are built structurally: a system message (``instructions`` plus a
    description of ``data_model``'s fields), then one user/assistant pair per
    example, then a user message: the inputs rendered by ``prompt_template``
    (jinja2, sandboxed, ``StrictUndefined``; the inputs' fields are variables and
    ``inputs`` is the dict of all of them). The answer is validated into
    ``data_model`` by the model's validation + repair loop.

    Args:
        data_model: the pydantic model to produce.
        language_model: any :class:`~kag.lm.LanguageModel`.
        prompt_template: jinja2 template of the user message (default: every input
            field as ``name: value``, facts as ``- text (score ...)`` lines).
        instructions: the system message's instructions (default: answer from the
            given information only).
        examples: ``[(input, output), ...]`` few-shot pairs (models or dicts).
        return_inputs: also return the inputs' fields, followed by ``data_model``'s.
    """

    def __init__(
        self,
        *,
        data_model: type[BaseModel],
        language_model: LanguageModel,
        prompt_template: str | None = None,
        instructions: str | None = None,
        examples: Sequence[Example] | None = None,
        return_inputs: bool = False,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(name=name, description=description)
        if not (isinstance(data_model, type) and issubclass(data_model, BaseModel)):
            raise ConfigError(f"data_model must be a pydantic model class, got {data_model!r}.")
        if not callable(getattr(language_model, "generate", None)):
            raise ConfigError("language_model must implement kag.lm.LanguageModel (an async generate method).")
        if instructions is not None and not isinstance(instructions, str):
            raise ConfigError(f"instructions must be a string, got {type(instructions).__name__}.")
        self.data_model = data_model
        self.language_model = language_model
        self.prompt_template = prompt_template
        self.instructions = instructions
        self.return_inputs = bool(return_inputs)
        self._template = compile_template(prompt_template if prompt_template is not None else DEFAULT_INPUT_TEMPLATE)
        self.examples: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for i, pair in enumerate(examples or ()):
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise ConfigError(f"examples[{i}] must be an (input, output) pair.")
            example_in, example_out = pair
            if isinstance(example_in, BaseModel):
                example_in = example_in.model_dump(mode="json")
            if not isinstance(example_in, Mapping):
                raise ConfigError(f"examples[{i}] input must be a pydantic model or a dict.")
            output = as_model(example_out, data_model).model_dump(mode="json")
            self.examples.append((json.loads(json.dumps(dict(example_in), default=str)), output))
        self._output_models: dict[tuple[type[BaseModel], ...], type[BaseModel]] = {}

    # -- tracing -------------------------------------------------------------------------
    def compute_output_model(self, input_models: Sequence[type[BaseModel]]) -> type[BaseModel]:
        """``data_model``, or the inputs' fields followed by it when ``return_inputs``."""
        if not self.return_inputs:
            return self.data_model
        key = tuple(input_models)
        if key not in self._output_models:
            self._output_models[key] = concat_models(
                f"{self.data_model.__name__}WithInputs", [*input_models, self.data_model]
            )
        return self._output_models[key]

    # -- running -------------------------------------------------------------------------
    def messages(self, inputs: Any) -> list[Message]:
        """The role messages sent for ``inputs`` (exposed for inspection and tests)."""
        schema = self.data_model.model_json_schema()
        system = (self.instructions if self.instructions is not None else DEFAULT_GENERATOR_INSTRUCTIONS).strip()
        fields = describe_fields(schema)
        if fields:
            system += f"\n\nReply with one JSON object ({self.data_model.__name__}) with these fields:\n{fields}"
        shots = [
            (
                render_template(self._template, template_variables(example_in)),
                json.dumps(example_out, ensure_ascii=False),
            )
            for example_in, example_out in self.examples
        ]
        user = render_template(self._template, template_variables(inputs))
        return build_messages(system, user, shots)

    async def call(self, inputs: Any) -> BaseModel:
        """Render the prompt, ask the model, validate into ``data_model`` (plus inputs)."""
        items = as_list(inputs)
        messages = self.messages(items if len(items) > 1 else items[0])
        raw = await self.language_model.generate(
            messages, self.data_model, schema_name=schema_name_for(self.data_model)
        )
        answer = as_model(raw, self.data_model)
        if not self.return_inputs:
            return answer
        models = [type(x) if isinstance(x, BaseModel) else None for x in items]
        if any(m is None for m in models):
            raise ConfigError("return_inputs needs pydantic model inputs (not plain dicts).")
        out_model = self.compute_output_model([m for m in models if m is not None])
        data: dict[str, Any] = {}
        for item in items:
            data.update({k: getattr(item, k) for k in type(item).model_fields})
        data.update({k: getattr(answer, k) for k in self.data_model.model_fields})
        return out_model.model_validate(data)

    # -- configs -------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """Import path of ``data_model``, the language model's own config (no API keys), prompts."""
        return {
            **super().get_config(),
            "data_model": object_path(self.data_model),
            "language_model": language_model_config(self.language_model),
            "prompt_template": self.prompt_template,
            "instructions": self.instructions,
            "examples": [[i, o] for i, o in self.examples],
            "return_inputs": self.return_inputs,
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **runtime: Any) -> Generator:
        """Rebuild; ``language_model=`` (and ``knowledge_base=`` for the lexical model) as runtime objects."""
        name = config.get("name")
        kb = runtime_for(runtime.get("knowledge_base"), str(name))
        lm = rebuild_language_model(
            config.get("language_model"), runtime_for(runtime.get("language_model"), str(name)), kb
        )
        return cls(
            data_model=import_object(config["data_model"], BaseModel, runtime.get("custom_objects")),
            language_model=lm,
            prompt_template=config.get("prompt_template"),
            instructions=config.get("instructions"),
            examples=[(i, o) for i, o in config.get("examples") or []],
            return_inputs=bool(config.get("return_inputs", False)),
            name=name,
            description=config.get("description"),
        )

    def summary_fields(self) -> str:
        model = getattr(self.language_model, "name", type(self.language_model).__name__)
        return f"model {model}; data_model {self.data_model.__name__}, return_inputs={self.return_inputs}"
