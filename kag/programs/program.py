"""``Program``: a traced graph of modules, run as one async module.

>>> inputs = kag.Input(data_model=Query)
>>> x = await kag.KnowledgeRetriever(knowledge_base=kb, language_model=lm)(inputs)
>>> outputs = await kag.Generator(data_model=Answer, language_model=lm)(x)
>>> program = kag.Program(inputs=inputs, outputs=outputs, name="qa")
>>> answer = await program(Query(query="What is the capital of France?"))

Running a program starts each module as soon as all its inputs are ready, so
independent branches run concurrently (``asyncio`` tasks gathered per node).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kag.errors import ConfigError, InvalidInputError, TrainingError
from kag.files import atomic_write_text
from kag.programs.module import (
    Input,
    Module,
    Node,
    SymbolicDataModel,
    as_list,
    as_model,
    import_object,
    object_path,
    scrub_secrets,
)
from kag.training.trainer import Trainer

__all__ = ["Program"]

log = logging.getLogger(__name__)

FORMAT = "kag-program"
VERSION = 1


class Program(Trainer, Module):
    """A functional program: the graph of module calls between ``inputs`` and ``outputs``.

    Args:
        inputs: one :class:`Input` or a list of them.
        outputs: one symbolic tensor or a list of them (what ``await program(...)`` returns).
        name: the program's name; description: a free text.

    Calling the program on data validates the input(s) into the inputs' models,
    runs every module once in dependency order (independent ones concurrently)
    and returns the output model(s). A program is itself a module, so it can be
    called on symbolic tensors inside a bigger program (single output only).

    A program trains like a Keras model (it inherits :class:`~kag.training.Trainer`):
    ``program.compile(reward=..., optimizer=...)``, ``await program.fit(x, y, epochs=...)``,
    ``await program.evaluate(x, y)``, ``await program.predict(x)``. What it learns are the
    variables (instructions and demos) of its ``Generator`` and ``KnowledgeRetriever``
    modules: ``program.trainable_variables``, ``get_variables()`` / ``set_variables()``,
    ``save_variables(path)`` / ``load_variables(path)``; :meth:`save` keeps them too.
    """

    def __init__(
        self,
        inputs: Input | Sequence[Input],
        outputs: SymbolicDataModel | Sequence[SymbolicDataModel],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(name=name, description=description)
        self._single_input = isinstance(inputs, SymbolicDataModel)
        if self._single_input and not isinstance(inputs, Input):
            raise ConfigError(f"Program inputs must be kag.Input tensors, got {inputs!r}.")
        self._single_output = isinstance(outputs, SymbolicDataModel)
        self.inputs: list[Input] = [inputs] if isinstance(inputs, Input) else list(inputs)
        self.outputs: list[SymbolicDataModel] = [outputs] if isinstance(outputs, SymbolicDataModel) else list(outputs)
        if not self.inputs or not self.outputs:
            raise ConfigError("a Program needs at least one input and one output.")
        for given in self.inputs:
            if not isinstance(given, Input):
                raise ConfigError(f"Program inputs must be kag.Input tensors, got {given!r}.")
        for produced in self.outputs:
            if not isinstance(produced, SymbolicDataModel):
                raise ConfigError(
                    f"Program outputs must be symbolic tensors (results of calling modules on "
                    f"an Input), got {type(produced).__name__}."
                )
        if len({id(t) for t in self.inputs}) != len(self.inputs):
            raise ConfigError("the same Input is listed twice in the program's inputs.")
        self.nodes: list[Node] = self._topological()
        self.modules: dict[str, Module] = {}
        for node in self.nodes:
            existing = self.modules.get(node.module.name)
            if existing is not None and existing is not node.module:
                raise ConfigError(f"two different modules are named {node.module.name!r}; give them distinct names.")
            self.modules[node.module.name] = node.module
        names = [t.name for t in self.inputs] + [n.output.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ConfigError(f"tensor names must be unique within a program, got {names}.")

    # -- graph ---------------------------------------------------------------------------
    def _topological(self) -> list[Node]:
        """Nodes in dependency order (deterministic DFS post-order from the outputs)."""
        order: list[Node] = []
        state: dict[int, int] = {}  # 1 = visiting, 2 = done
        inputs = {id(t) for t in self.inputs}

        def visit(tensor: SymbolicDataModel, path: tuple[str, ...]) -> None:
            if tensor.node is None:
                if id(tensor) not in inputs:
                    raise ConfigError(
                        f"the outputs depend on input {tensor.name!r}, which is not among this "
                        "program's inputs; add it to inputs=[...]."
                    )
                return
            node = tensor.node
            if state.get(id(node)) == 2:
                return
            if state.get(id(node)) == 1:  # cannot happen with immutable tracing; kept as a guard
                raise ConfigError(f"the program graph has a cycle through {' -> '.join(path)}.")
            state[id(node)] = 1
            for parent in node.inbound:
                visit(parent, (*path, tensor.name))
            state[id(node)] = 2
            order.append(node)

        for out in self.outputs:
            visit(out, ())
        return order

    def compute_output_model(self, input_models: Sequence[type[BaseModel]]) -> type[BaseModel]:
        """The output model (a program used as a module must have a single output)."""
        if not self._single_output:
            raise ConfigError("only a program with a single output can be called inside another program.")
        if len(input_models) != len(self.inputs):
            raise ConfigError(f"program {self.name!r} takes {len(self.inputs)} input(s), got {len(input_models)}.")
        return self.outputs[0].data_model

    # -- running -------------------------------------------------------------------------
    def _bind(self, inputs: Any) -> dict[int, BaseModel]:
        values = [inputs] if self._single_input else as_list(inputs)
        if len(values) != len(self.inputs):
            raise InvalidInputError(
                f"program {self.name!r} takes {len(self.inputs)} input(s) "
                f"({', '.join(t.name for t in self.inputs)}), got {len(values)}."
            )
        return {id(t): as_model(v, t.data_model) for t, v in zip(self.inputs, values, strict=True)}

    async def call(self, inputs: Any) -> Any:
        """Run the graph on data; returns one output model, or a list for several outputs."""
        bound = self._bind(inputs)
        tasks: dict[int, asyncio.Task[BaseModel]] = {}

        def value_of(tensor: SymbolicDataModel) -> asyncio.Task[BaseModel]:
            key = id(tensor)
            if key not in tasks:
                tasks[key] = asyncio.ensure_future(compute(tensor))
            return tasks[key]

        async def compute(tensor: SymbolicDataModel) -> BaseModel:
            if tensor.node is None:
                return bound[id(tensor)]
            node = tensor.node
            # every parent is its own task: siblings that do not depend on each other overlap
            args = await asyncio.gather(*(value_of(p) for p in node.inbound))
            result = await node.module.call(list(args) if node.multi else args[0])
            return as_model(result, tensor.data_model)

        try:
            results = await asyncio.gather(*(value_of(t) for t in self.outputs))
        finally:
            pending = [t for t in tasks.values() if not t.done()]
            for task in pending:
                task.cancel()
            # retrieve every outcome so no "exception was never retrieved" warnings leak
            await asyncio.gather(*tasks.values(), return_exceptions=True)
        return results[0] if self._single_output else list(results)

    # -- training ------------------------------------------------------------------------
    def trainable_modules(self) -> dict[str, Module]:
        """``{name: module}`` of the modules holding a variable, in call order (nested programs included)."""
        found: dict[str, Module] = {}
        for module in self.modules.values():
            inner = (
                module.trainable_modules()
                if isinstance(module, Program)
                else ({module.name: module} if module.variable is not None else {})
            )
            for name, held in inner.items():
                if name in found and found[name] is not held:
                    raise ConfigError(f"two trainable modules are named {name!r}; give them distinct names.")
                found[name] = held
        return found

    def output_model(self) -> type[BaseModel]:
        """The data model of the program's single output (what ``fit`` labels must fit)."""
        if not self._single_output:
            raise TrainingError("training needs a program with a single output; this one has several.")
        return self.outputs[0].data_model

    def module_info(self, name: str) -> dict[str, Any]:
        """A trainable module's type, description and effective instructions (for instruction optimizers)."""
        module = self.trainable_modules()[name]
        instructions: Any = module.variable.instructions if module.variable is not None else None
        if instructions is None:
            instructions = getattr(module, "default_instructions", None)
        return {"type": type(module).__name__, "description": module.description, "instructions": instructions}

    # -- description ---------------------------------------------------------------------
    def summary(self) -> str:
        """A text table of the program's inputs and module calls."""
        rows: list[tuple[str, str, str, str, str]] = []
        for t in self.inputs:
            rows.append((t.name, "Input", "-", _model_text(t.data_model), ""))
        for node in self.nodes:
            rows.append(
                (
                    node.output.name,
                    type(node.module).__name__,
                    ", ".join(t.name for t in node.inbound),
                    _model_text(node.output.data_model),
                    node.module.summary_fields(),
                )
            )
        headers = ("Name", "Module", "Inputs", "Output fields")
        widths = [max(len(headers[i]), *(len(r[i]) for r in rows)) for i in range(3)]
        line = "-" * (sum(widths) + 6 + max(len(headers[3]), *(len(r[3]) for r in rows)))
        out = [f"Program: {self.name}"]
        if self.description:
            out.append(self.description)
        out.append(line)
        fmt = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
        out.append(fmt.format(*headers))
        out.append(line)
        indent = " " * (widths[0] + 2)
        for row in rows:
            out.append(fmt.format(*row[:4]))
            if row[4]:  # the module's settings, on their own line under its row
                out.append(f"{indent}{row[4]}")
        out.append(line)
        out.append(
            f"{len(self.inputs)} input(s), {len(self.nodes)} module call(s); "
            f"outputs: {', '.join(t.name for t in self.outputs)}"
        )
        return "\n".join(out)

    def summary_fields(self) -> str:
        return f"{len(self.nodes)} module call(s)"

    # -- configs -------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """The program as JSON: inputs (model import paths), modules, calls, outputs.

        Module configs never contain credentials, clients or callables; language
        models are saved by their own ``get_config()`` and knowledge bases by URI
        and model import paths.
        """
        modules: dict[str, Any] = {}
        for name, module in self.modules.items():
            modules[name] = {"class": object_path(type(module)), "config": module.get_config()}
        config = {
            "format": FORMAT,
            "version": VERSION,
            "name": self.name,
            "description": self.description,
            "inputs": [{"name": t.name, "data_model": object_path(t.data_model)} for t in self.inputs],
            "single_input": self._single_input,
            "modules": modules,
            "nodes": [
                {
                    "module": node.module.name,
                    "inbound": [t.name for t in node.inbound],
                    "multi": node.multi,
                    "output": node.output.name,
                }
                for node in self.nodes
            ],
            "outputs": [t.name for t in self.outputs],
            "single_output": self._single_output,
        }
        result: dict[str, Any] = scrub_secrets(config)
        json.dumps(result)  # fail here, not in save(), if something is not JSON
        return result

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any],
        *,
        language_model: Any = None,
        knowledge_base: Any = None,
        custom_objects: Mapping[str, Any] | None = None,
        **runtime: Any,
    ) -> Program:
        """Rebuild a program from :meth:`get_config` output.

        Args:
            language_model: a language model for every module, or ``{module_name: lm}``;
                needed when the saved model cannot be rebuilt (scripted, or a custom one).
                OpenAI-compatible and Ollama models are rebuilt from their configs (API keys
                come from the environment), the lexical model with the knowledge base.
            knowledge_base: a knowledge base for every module, or ``{module_name: kb}``;
                needed for in-process ``memory://`` stores and custom embedders.
            custom_objects: ``{"module:QualName" or "ClassName": class}`` overrides for imports.

        Only load configs you trust: loading imports the modules they name.
        """
        if not isinstance(config, Mapping) or config.get("format") != FORMAT:
            raise ConfigError(f"not a kag program config (expected format {FORMAT!r}).")
        if config.get("version") != VERSION:
            raise ConfigError(f"unsupported program config version {config.get('version')!r}; expected {VERSION}.")
        if knowledge_base is None:
            knowledge_base = _shared_knowledge_base(config, custom_objects)
        tensors: dict[str, SymbolicDataModel] = {}
        inputs: list[Input] = []
        for spec in config["inputs"]:
            model = import_object(spec["data_model"], BaseModel, custom_objects)
            placeholder = Input(model, name=spec["name"])
            tensors[placeholder.name] = placeholder
            inputs.append(placeholder)
        built: dict[str, Module] = {}
        for name, spec in config["modules"].items():
            module_cls = import_object(spec["class"], Module, custom_objects)
            built[name] = module_cls.from_config(
                spec["config"],
                language_model=language_model,
                knowledge_base=knowledge_base,
                custom_objects=custom_objects,
                **runtime,
            )
        for node in config["nodes"]:
            module = built[node["module"]]
            inbound = [tensors[n] for n in node["inbound"]]
            out = module(inbound if node.get("multi") else inbound[0])
            out.name = node["output"]
            tensors[out.name] = out
        outputs = [tensors[n] for n in config["outputs"]]
        return cls(
            inputs[0] if config.get("single_input", True) and len(inputs) == 1 else inputs,
            outputs[0] if config.get("single_output", True) and len(outputs) == 1 else outputs,
            name=config.get("name"),
            description=config.get("description"),
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`get_config` as JSON to ``path``, atomically: a reader, or a process killed
        mid-save, sees the previous file or the new one, never part of either.

        A compiled program's settings (reward, optimizer, metrics, concurrency) are written beside
        it under ``"compile_config"`` (:meth:`get_compile_config`), so :meth:`load` returns it
        compiled. Settings that cannot be saved (a reward class defined inside a function) are left
        out with a logged warning; the program itself is saved.

        Raises:
            FileWriteError: the folder is missing or the file cannot be written (the old one is intact).
        """
        config = self.get_config()
        try:
            compiled = self.get_compile_config()
        except ConfigError as exc:
            log.warning(
                "program %r: its compile settings are not saved (%s); compile it after loading.", self.name, exc
            )
            compiled = None
        if compiled is not None:
            config["compile_config"] = scrub_secrets(compiled)
        text = json.dumps(config, indent=2, ensure_ascii=False) + "\n"
        return atomic_write_text(Path(path), text)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, compile: bool = True, **runtime: Any) -> Program:
        """Read a program saved by :meth:`save`; ``runtime`` as for :meth:`from_config`.

        With ``compile`` (the default) a program saved compiled comes back compiled with the same
        settings, ready to ``fit``; a file saved uncompiled (or by an older kag) loads uncompiled. A
        setting that cannot be rebuilt (a reward needing an embedder, a lambda) leaves the program
        uncompiled, with a logged warning that ``fit`` repeats: call :meth:`compile` then.
        """
        try:
            config = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read program config {str(path)!r}: {exc}") from exc
        program = cls.from_config(config, **runtime)
        saved = config.get("compile_config")
        if compile and saved is not None:
            program._restore_compile_config(saved, runtime.get("custom_objects"))
        return program


def _model_text(model: type[BaseModel]) -> str:
    return f"{model.__name__}({', '.join(model.model_fields)})"


def _shared_knowledge_base(config: Mapping[str, Any], custom_objects: Mapping[str, Any] | None) -> Any:
    """Reopen a knowledge base saved by URI once, so every module of the program shares it."""
    from kag.programs.module import rebuild_knowledge_base

    configs = [
        spec["config"]["knowledge_base"]
        for spec in config.get("modules", {}).values()
        if isinstance(spec.get("config"), Mapping) and spec["config"].get("knowledge_base")
    ]
    uris = {c.get("uri") for c in configs}
    if len(uris) != 1:
        return None  # none, or several: each module resolves its own (and asks if it cannot)
    try:
        return rebuild_knowledge_base(configs[0], None, custom_objects)
    except ConfigError:
        return None  # the module that needs it raises a precise error
