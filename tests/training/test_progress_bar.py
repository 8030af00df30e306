"""``fit(verbose=1)``'s progress: a bar where it is redrawn in place, one line per epoch elsewhere.

An executed notebook keeps every redraw of a text bar as an output of its own, so a bar there showed
each epoch three times (issue 49); a terminal still gets tqdm's bar.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import sys
import textwrap
import types

import nbformat
import pytest
from nbclient import NotebookClient

PROGRAM = textwrap.dedent(
    """
    from typing import Literal

    import kag


    class Country(kag.Entity):
        label: Literal["Country"] = "Country"
        name: str


    class City(kag.Entity):
        label: Literal["City"] = "City"
        name: str


    class IsCapitalOf(kag.Relation):
        subj: City
        label: Literal["IsCapitalOf"] = "IsCapitalOf"
        obj: Country


    class Query(kag.DataModel):
        query: str


    class Answer(kag.DataModel):
        answer: str


    async def fit(epochs: int) -> None:
        kb = kag.KnowledgeBase("memory://", entity_models=[Country, City], relation_models=[IsCapitalOf])
        await kb.upsert([IsCapitalOf(subj=City(name="Rome"), obj=Country(name="Italy"))])
        lm = kag.LexicalLM(knowledge_base=kb)
        inputs = kag.Input(data_model=Query)
        facts = await kag.KnowledgeRetriever(knowledge_base=kb, language_model=lm)(inputs)
        outputs = await kag.Generator(data_model=Answer, language_model=lm)(facts)
        program = kag.Program(inputs=inputs, outputs=outputs)
        program.compile(reward=lambda y_true, y_pred: float("Rome" in y_pred["answer"]), optimizer="bootstrap_few_shot")
        x = [{"query": "Which city is the capital of Italy?"}] * 3
        await program.fit(x, [{"answer": "Rome"}] * 3, epochs=epochs, batch_size=1, verbose=1)
    """
)


def _fit(epochs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("progress_bar_program")  # a real module: the models resolve their annotations
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(PROGRAM, module.__name__, "exec"), module.__dict__)
    asyncio.run(module.fit(epochs))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_each_epoch_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _fit(2, monkeypatch)
    out, err = capsys.readouterr()
    assert [line.split(":")[0] for line in err.splitlines()] == ["epoch 1/2", "epoch 2/2"]
    assert "3/3 batches" in err and "reward=1.000" in err and "\r" not in err
    assert "epoch" not in out  # stdout stays the program's own output


def test_a_terminal_gets_the_bar_redrawn_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    _fit(1, monkeypatch)
    drawn = terminal.getvalue()
    assert "\repoch 1/1: 100%" in drawn and "3/3" in drawn and "reward=1.000" in drawn


def test_an_executed_notebook_shows_each_epoch_once() -> None:
    assert importlib.util.find_spec("ipywidgets") is None  # the case of the issue: no widget to draw
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROGRAM + "\nawait fit(2)\n")])
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    shown = "".join(output.get("text", "") for output in notebook.cells[0].outputs)
    assert shown.count("epoch 1/2") == 1 and shown.count("epoch 2/2") == 1, shown
    assert "\r" not in shown
