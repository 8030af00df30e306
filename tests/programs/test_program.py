"""Module tracing, Program execution (concurrency, errors) and summaries."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

import kag
from kag.errors import ConfigError, InvalidInputError
from kag.programs import Input, Module, Program, SymbolicDataModel


class Query(kag.DataModel):
    query: str


class Echo(kag.DataModel):
    text: str


class Pair(kag.DataModel):
    left: str
    right: str


class Upper(Module):
    """Upper-cases the query; counts its runs."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.runs = 0

    def compute_output_model(self, input_models: Sequence[type[BaseModel]]) -> type[BaseModel]:
        return Echo

    async def call(self, inputs: Any) -> BaseModel:
        self.runs += 1
        return Echo(text=inputs.query.upper())


class Join(Module):
    """Joins two Echo values."""

    def compute_output_model(self, input_models: Sequence[type[BaseModel]]) -> type[BaseModel]:
        return Pair

    async def call(self, inputs: Any) -> BaseModel:
        left, right = inputs
        return Pair(left=left.text, right=right.text)


class Rendezvous(Module):
    """Sets its own event and waits for the partner's: deadlocks unless run concurrently."""

    def __init__(self, mine: asyncio.Event, partner: asyncio.Event, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mine, self.partner = mine, partner

    def compute_output_model(self, input_models: Sequence[type[BaseModel]]) -> type[BaseModel]:
        return Echo

    async def call(self, inputs: Any) -> BaseModel:
        self.mine.set()
        await asyncio.wait_for(self.partner.wait(), timeout=5)
        return Echo(text=f"{self.name}:{inputs.query}")


class Boom(Module):
    def compute_output_model(self, input_models: Sequence[type[BaseModel]]) -> type[BaseModel]:
        return Echo

    async def call(self, inputs: Any) -> BaseModel:
        raise RuntimeError("boom")


class Forever(Module):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cancelled = False

    def compute_output_model(self, input_models: Sequence[type[BaseModel]]) -> type[BaseModel]:
        return Echo

    async def call(self, inputs: Any) -> BaseModel:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return Echo(text="never")


async def test_tracing_records_graph_without_running() -> None:
    inputs = Input(data_model=Query)
    upper = Upper()
    x = upper(inputs)
    y = await upper(inputs)  # awaiting a symbolic call returns the tensor itself
    assert isinstance(x, SymbolicDataModel) and isinstance(y, SymbolicDataModel)
    assert x.data_model is Echo and x.node is not None and x.node.module is upper
    assert x.node.inbound == (inputs,)
    assert y.name != x.name  # a second call of the same module is a second node
    assert upper.runs == 0


async def test_module_runs_on_data() -> None:
    upper = Upper()
    out = await upper(Query(query="paris"))
    assert out == Echo(text="PARIS") and upper.runs == 1


async def test_program_runs_in_dependency_order_and_validates_inputs() -> None:
    inputs = Input(data_model=Query)
    a = Upper(name="a")(inputs)
    b = Upper(name="b")(inputs)
    joined = Join(name="join")([a, b])
    program = Program(inputs=inputs, outputs=joined, name="p", description="two branches")
    result = await program({"query": "lima"})  # dicts are validated into the input model
    assert result == Pair(left="LIMA", right="LIMA")
    assert [n.module.name for n in program.nodes][-1] == "join"
    with pytest.raises(InvalidInputError):
        await program({"nope": 1})


async def test_independent_branches_run_concurrently() -> None:
    first, second = asyncio.Event(), asyncio.Event()
    inputs = Input(data_model=Query)
    left = Rendezvous(first, second, name="left")(inputs)
    right = Rendezvous(second, first, name="right")(inputs)
    program = Program(inputs=inputs, outputs=[left, right])
    # sequential execution would wait forever for the partner's event (TimeoutError)
    out = await asyncio.wait_for(program(Query(query="q")), timeout=10)
    assert [o.text for o in out] == ["left:q", "right:q"]


async def test_shared_node_runs_once() -> None:
    inputs = Input(data_model=Query)
    upper = Upper(name="shared")
    x = upper(inputs)
    program = Program(inputs=inputs, outputs=Join(name="j")([x, x]))
    assert (await program(Query(query="a"))) == Pair(left="A", right="A")
    assert upper.runs == 1


async def test_failure_propagates_and_cancels_siblings() -> None:
    inputs = Input(data_model=Query)
    forever = Forever(name="forever")
    program = Program(inputs=inputs, outputs=[Boom(name="boom")(inputs), forever(inputs)])
    with pytest.raises(RuntimeError, match="boom"):
        await program(Query(query="x"))
    await asyncio.sleep(0)
    assert forever.cancelled


def test_program_refuses_foreign_inputs_and_bad_outputs() -> None:
    inputs, other = Input(data_model=Query), Input(data_model=Query)
    out = Join(name="j2")([Upper(name="u1")(inputs), Upper(name="u2")(other)])
    with pytest.raises(ConfigError, match="not among this program's inputs"):
        Program(inputs=inputs, outputs=out)
    with pytest.raises(ConfigError):
        Program(inputs=inputs, outputs="nope")  # type: ignore[arg-type]
    assert Program(inputs=[inputs, other], outputs=out).summary()


def test_mixed_symbolic_and_data_is_refused() -> None:
    inputs = Input(data_model=Query)
    with pytest.raises(InvalidInputError):
        Join()([inputs, Echo(text="x")])


def test_duplicate_module_names_are_refused() -> None:
    inputs = Input(data_model=Query)
    with pytest.raises(ConfigError, match="named"):
        Program(inputs=inputs, outputs=[Upper(name="same")(inputs), Upper(name="same")(inputs)])


async def test_nested_program_is_a_module() -> None:
    inner_in = Input(data_model=Query)
    inner = Program(inputs=inner_in, outputs=Upper(name="inner_upper")(inner_in), name="inner")
    outer_in = Input(data_model=Query)
    outer = Program(inputs=outer_in, outputs=inner(outer_in), name="outer")
    assert (await outer(Query(query="x"))) == Echo(text="X")


def test_summary_lists_modules() -> None:
    inputs = Input(data_model=Query, name="question")
    program = Program(inputs=inputs, outputs=Upper(name="shout")(inputs), name="demo", description="desc")
    text = program.summary()
    assert "Program: demo" in text and "desc" in text
    assert "question" in text and "Input" in text and "Query(query)" in text
    assert "shout" in text and "Upper" in text and "Echo(text)" in text
