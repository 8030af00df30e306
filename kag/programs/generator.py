"""``Generator``: a language model answering into a pydantic data model."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic
from pydantic import BaseModel

from kag.datamodels.base import DataModel
from kag.errors import ConfigError, SchemaError
from kag.lm.base import LanguageModel, Message, capabilities_of
from kag.lm.guards import grounded_numbers, grounded_schema, grounded_text, whole_list_schema
from kag.programs.grounding import (
    answer_texts,
    asked_names,
    asks_value,
    carries_facts,
    counted,
    fact_names,
    fact_numbers,
    name_fields,
    number_fields,
    text_fields,
)
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
from kag.rag.embedders import HashEmbedder
from kag.training.trace import record
from kag.training.variables import Demo, Variable

__all__ = ["Generator", "join_instructions", "model_from_schema"]

# k-nearest demo selection for modules without a knowledge base: deterministic, no weights
_DEMO_EMBEDDER = HashEmbedder(dimensions=256)

Example = tuple[BaseModel | Mapping[str, Any], BaseModel | Mapping[str, Any]]
Instructions = str | Sequence[str]


def join_instructions(instructions: Any, what: str = "instructions") -> str | None:
    """``instructions`` as one text: a string as is, a list of strings one per line (``None`` stays ``None``)."""
    if instructions is None or isinstance(instructions, str):
        return instructions
    if isinstance(instructions, list | tuple) and all(isinstance(item, str) for item in instructions):
        return "\n".join(item.strip() for item in instructions if item.strip())
    raise ConfigError(f"{what} must be a string or a list of strings, got {type(instructions).__name__}.")


def model_from_schema(schema: Mapping[str, Any]) -> type[BaseModel]:
    """A data model with the top-level properties of a JSON object schema (values checked by the schema).

    The language model's answer is validated against the JSON schema itself (enums,
    nested objects); this model only carries the fields through a program.
    """
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        raise ConfigError("schema must be a JSON schema of an object (a dict with 'properties').")
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        raise ConfigError("schema must declare at least one property.")
    required = set(schema.get("required") or ())
    fields: dict[str, Any] = {}
    for prop_name, prop in props.items():
        desc = prop.get("description") if isinstance(prop, Mapping) else None
        default: Any = ... if prop_name in required else (prop.get("default") if isinstance(prop, Mapping) else None)
        fields[str(prop_name)] = (Any, pydantic.Field(default, description=desc))
    title = re.sub(r"[^A-Za-z0-9_]", "_", str(schema.get("title") or "GeneratedOutput")) or "GeneratedOutput"
    try:
        created: type[BaseModel] = pydantic.create_model(title, __base__=DataModel, **fields)
    except (pydantic.PydanticUserError, NameError, SchemaError, TypeError) as exc:
        raise ConfigError(f"cannot use this schema's properties as fields: {exc}") from exc
    return created


def _config_instructions(instructions: Instructions | None) -> str | list[str] | None:
    if instructions is None or isinstance(instructions, str):
        return instructions
    return list(instructions)


def schema_sections(inputs: Any, output_schema: dict[str, Any], use_inputs: bool, use_outputs: bool) -> str:
    """The optional ``Input schema`` / ``Output schema`` sections of a system message (JSON text)."""
    text = ""
    if use_inputs:
        items = inputs if isinstance(inputs, list | tuple) else [inputs]
        schemas = [type(x).model_json_schema() for x in items if isinstance(x, BaseModel)]
        if schemas:
            shown = schemas[0] if len(schemas) == 1 else schemas
            text += "\n\nInput schema:\n" + json.dumps(shown, ensure_ascii=False, sort_keys=True)
    if use_outputs:
        text += "\n\nOutput schema:\n" + json.dumps(output_schema, ensure_ascii=False, sort_keys=True)
    return text


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
        schema: instead of ``data_model``, a JSON object schema (e.g. with
            :func:`~kag.datamodels.schema.dynamic_enum` enums): the answer must satisfy it
            and comes back as a data model with its top-level properties (a property
            left out takes the schema's ``default``). Pass it through
            :func:`~kag.datamodels.schema.strict_schema` first for OpenAI strict mode.
        prompt_template: jinja2 template of the user message (default: every input
            field as ``name: value``, facts as ``- text (score ...)`` lines).
        instructions: the system message's instructions, a string or a list of
            strings (one per line) (default: answer from the given information only).
        examples: ``[(input, output), ...]`` few-shot pairs (models or dicts).
        use_inputs_schema: also show the inputs' JSON schema in the system message.
        use_outputs_schema: also show the output's full JSON schema in the system message.
        return_inputs: also return the inputs' fields, followed by ``data_model``'s.
        grounded: when the inputs carry retrieved ``facts``, every ``list[str]`` field of
            ``data_model`` (the names that answer) may only hold names of the entities in those
            facts: a per-call enum the model cannot step out of (none retrieved: the list stays
            empty); when the facts come with the search that found them and it asks for one side,
            only that side's names. Every integer field (``int | None``) may only hold a number the
            facts state (the count, an integer property) or ``null``. ``False`` lets the model
            write anything.
        whole_answers: when the facts' search asked for one side, each list-of-names field is
            every name found on that side (empty, "not found", only when it found none): the
            search decides the answer, and whether to answer at all is the retriever's call (its
            ``abstain``); a small model asked to judge it said "not found" to facts that
            answered. After a counting search, each integer field holds its count; each free-text
            field (``str``) is the answer the facts give (that count, those names, or a value
            stated about the named entity: "What is the population of Tokyo?" searches Tokyo's
            country), or "Not found in the knowledge graph." when they give none
            (:func:`kag.lm.guards.grounded_text`). ``None`` (the default) turns it on for a model
            that decodes under a grammar (the packaged local model), which otherwise stops
            listing early; ``False`` lets the model pick names one by one.
        trainable: whether training may change the module's variable (its instructions and
            demos, starting from ``instructions`` and ``examples``; see :mod:`kag.training`).

    Called with ``None`` (or an empty list) it returns ``None`` without asking the model.
    """

    def __init__(
        self,
        *,
        data_model: type[BaseModel] | None = None,
        language_model: LanguageModel | None = None,
        schema: Mapping[str, Any] | None = None,
        prompt_template: str | None = None,
        instructions: Instructions | None = None,
        examples: Sequence[Example] | None = None,
        use_inputs_schema: bool = False,
        use_outputs_schema: bool = False,
        return_inputs: bool = False,
        name: str | None = None,
        description: str | None = None,
        trainable: bool = True,
        grounded: bool = True,
        whole_answers: bool | None = None,
    ) -> None:
        super().__init__(name=name, description=description)
        if (data_model is None) == (schema is None):
            raise ConfigError("give Generator a data_model= (a pydantic model class) or a schema= (a JSON schema).")
        self.schema: dict[str, Any] | None = None
        if schema is not None:
            self.schema = json.loads(json.dumps(dict(schema)))  # a private JSON copy
            data_model = model_from_schema(self.schema)
        if not (isinstance(data_model, type) and issubclass(data_model, BaseModel)):
            raise ConfigError(f"data_model must be a pydantic model class, got {data_model!r}.")
        if not callable(getattr(language_model, "generate", None)):
            raise ConfigError("language_model must implement kag.lm.LanguageModel (an async generate method).")
        assert language_model is not None
        join_instructions(instructions)  # type check now, not at call time
        self.data_model = data_model
        self.language_model = language_model
        self.prompt_template = prompt_template
        self.use_inputs_schema = bool(use_inputs_schema)
        self.use_outputs_schema = bool(use_outputs_schema)
        self.return_inputs = bool(return_inputs)
        self.grounded = bool(grounded)
        if whole_answers is not None and not isinstance(whole_answers, bool):
            raise ConfigError(f"whole_answers must be True, False or None (automatic), got {whole_answers!r}.")
        self.whole_answers = whole_answers
        self._name_fields = name_fields(data_model) if self.schema is None else []
        self._number_fields = number_fields(data_model) if self.schema is None else []
        self._text_fields = text_fields(data_model) if self.schema is None else []
        self._template = compile_template(prompt_template if prompt_template is not None else DEFAULT_INPUT_TEMPLATE)
        demos: list[Demo] = []
        for i, pair in enumerate(examples or ()):
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise ConfigError(f"examples[{i}] must be an (input, output) pair.")
            example_in, example_out = pair
            if isinstance(example_in, BaseModel):
                example_in = example_in.model_dump(mode="json")
            if not isinstance(example_in, Mapping):
                raise ConfigError(f"examples[{i}] input must be a pydantic model or a dict.")
            output = as_model(example_out, data_model).model_dump(mode="json")
            demos.append(Demo(json.loads(json.dumps(dict(example_in), default=str)), output))
        self.variable = Variable(instructions=_config_instructions(instructions), demos=demos, trainable=trainable)
        self._output_models: dict[tuple[type[BaseModel], ...], type[BaseModel]] = {}

    # -- trainable state ---------------------------------------------------------------------
    default_instructions: str = DEFAULT_GENERATOR_INSTRUCTIONS
    """The instructions used while the variable holds none."""

    @property
    def instructions(self) -> str | list[str] | None:
        """The instructions of the system message (the variable's; ``None``: the default)."""
        assert self.variable is not None
        return self.variable.instructions

    @property
    def examples(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """The demos as ``(input, output)`` pairs (the variable's)."""
        assert self.variable is not None
        return [(d.input, d.output) for d in self.variable.demos]

    def set_variable(self, variable: Variable) -> None:
        """Take ``variable``'s instructions and demos; each demo output must fit the output model."""
        join_instructions(variable.instructions)
        for i, demo in enumerate(variable.demos):
            try:
                as_model(demo.output, self.data_model)
            except ValueError as exc:
                raise ConfigError(f"demo {i} of {self.name!r} does not fit {self.data_model.__name__}: {exc}") from exc
        super().set_variable(variable)

    async def demos_for(self, inputs: Any) -> list[Demo]:
        """The demos shown for ``inputs``: all, or the nearest ones when the variable says so."""
        assert self.variable is not None
        if self.variable.nearest is None:
            return list(self.variable.demos)
        text = render_template(self._template, template_variables(inputs))
        return await self.variable.demos_for(
            text, _DEMO_EMBEDDER, lambda d: render_template(self._template, template_variables(d.input))
        )

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
    def messages(self, inputs: Any, demos: Sequence[Demo] | None = None) -> list[Message]:
        """The role messages sent for ``inputs`` (exposed for inspection and tests).

        ``demos``: the worked examples to show (default: the variable's, the first ``nearest`` of them
        when it selects per call).
        """
        assert self.variable is not None
        if demos is None:
            demos = self.variable.demos[: self.variable.nearest]
        schema = self.output_schema()
        instructions = join_instructions(self.instructions)
        system = (instructions if instructions is not None else DEFAULT_GENERATOR_INSTRUCTIONS).strip()
        fields = describe_fields(schema)
        if fields:
            system += f"\n\nReply with one JSON object ({self.data_model.__name__}) with these fields:\n{fields}"
        system += schema_sections(inputs, schema, self.use_inputs_schema, self.use_outputs_schema)
        shots = [
            (render_template(self._template, template_variables(d.input)), json.dumps(d.output, ensure_ascii=False))
            for d in demos
        ]
        user = render_template(self._template, template_variables(inputs))
        return build_messages(system, user, shots)

    def _whole_answers(self) -> bool:
        """``whole_answers``, or automatically: whether the model decodes under a grammar."""
        if self.whole_answers is not None:
            return self.whole_answers
        return capabilities_of(self.language_model).grammar

    def output_schema(self) -> dict[str, Any]:
        """The JSON schema the answer must satisfy (``schema=``, or ``data_model``'s)."""
        return self.schema if self.schema is not None else self.data_model.model_json_schema()

    async def call(self, inputs: Any) -> BaseModel | None:  # type: ignore[override]
        """Render the prompt, ask the model, validate into ``data_model`` (plus inputs); ``None`` for no inputs."""
        if inputs is None or (isinstance(inputs, list | tuple) and not inputs):
            return None
        items = as_list(inputs)
        given = items if len(items) > 1 else items[0]
        messages = self.messages(given, await self.demos_for(given))
        target: dict[str, Any] | type[BaseModel] = self.schema if self.schema is not None else self.data_model
        allowed = fact_names(items) if self.grounded and self._name_fields else None
        if allowed is not None:
            target = grounded_schema(self.data_model.model_json_schema(), allowed, fields=self._name_fields)
        asked = asked_names(items) if allowed is not None and self._whole_answers() else None
        if asked:
            # the search asked for one side and found these: the answer, not a choice for the model
            # (saying "not found" is the retriever's call, see KnowledgeRetriever's abstain); but
            # "What is the population of Tokyo?" asks a value, not a name: the names stay empty (the
            # search's asked side, Japan, is a step on the way, not the answer)
            names = [] if asks_value(items) else asked
            target = whole_list_schema(
                self.data_model.model_json_schema(), names, fields=self._name_fields, empty=not names
            )
        numbers = fact_numbers(items) if self.grounded and self._number_fields else None
        count = counted(items) if numbers is not None and self._whole_answers() else None
        if numbers is not None:
            base = target if isinstance(target, dict) else self.data_model.model_json_schema()
            if count is None:
                target = grounded_numbers(base, numbers, fields=self._number_fields)
            else:  # the search counted: its count is the answer, in the number, not among the names
                if self._name_fields:
                    base = whole_list_schema(base, [], fields=self._name_fields)
                target = grounded_numbers(base, [count], fields=self._number_fields, required=True)
        if self.grounded and self._text_fields and self._whole_answers() and carries_facts(items):
            # a small model's own sentence is where it invents ("Bologna" beside five German cities)
            base = target if isinstance(target, dict) else self.data_model.model_json_schema()
            texts = answer_texts(items)
            decided = counted(items) is not None or bool(asked_names(items))
            target = grounded_text(base, texts, fields=self._text_fields, not_found=not decided or not texts)
        raw = await self.language_model.generate(messages, target, schema_name=schema_name_for(self.data_model))
        if allowed is not None:  # a name given twice is given once
            raw = {**raw, **{f: list(dict.fromkeys(raw[f])) for f in self._name_fields if isinstance(raw.get(f), list)}}
        answer = as_model(raw, self.data_model)
        record(self.name, template_variables(given)["inputs"], answer.model_dump(mode="json"))
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
        config: dict[str, Any] = {**super().get_config()}
        if self.schema is not None:
            config["schema"] = self.schema
        else:
            config["data_model"] = object_path(self.data_model)
        return {
            **config,
            "language_model": language_model_config(self.language_model),
            "prompt_template": self.prompt_template,
            "instructions": _config_instructions(self.instructions),
            "examples": [[i, o] for i, o in self.examples],
            "variable": self.variable.get_config() if self.variable is not None else None,
            "use_inputs_schema": self.use_inputs_schema,
            "use_outputs_schema": self.use_outputs_schema,
            "return_inputs": self.return_inputs,
            "grounded": self.grounded,
            "whole_answers": self.whole_answers,
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **runtime: Any) -> Generator:
        """Rebuild; ``language_model=`` (and ``knowledge_base=`` for the lexical model) as runtime objects."""
        name = config.get("name")
        kb = runtime_for(runtime.get("knowledge_base"), str(name))
        lm = rebuild_language_model(
            config.get("language_model"), runtime_for(runtime.get("language_model"), str(name)), kb
        )
        schema = config.get("schema")
        return cls(
            data_model=None
            if schema is not None
            else import_object(config["data_model"], BaseModel, runtime.get("custom_objects")),
            schema=schema,
            language_model=lm,
            prompt_template=config.get("prompt_template"),
            instructions=config.get("instructions"),
            examples=[(i, o) for i, o in config.get("examples") or []],
            use_inputs_schema=bool(config.get("use_inputs_schema", False)),
            use_outputs_schema=bool(config.get("use_outputs_schema", False)),
            return_inputs=bool(config.get("return_inputs", False)),
            grounded=bool(config.get("grounded", True)),
            whole_answers=config.get("whole_answers"),
            name=name,
            description=config.get("description"),
        ).restore_variable(config)

    def summary_fields(self) -> str:
        model = getattr(self.language_model, "name", type(self.language_model).__name__)
        return f"model {model}; data_model {self.data_model.__name__}, return_inputs={self.return_inputs}"
