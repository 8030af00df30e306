"""Pictures: the reward per epoch (matplotlib) and the program graph (SVG, no Graphviz)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import kag
from kag.errors import ConfigError
from kag.training import History
from tests.training.conftest import DemoCopyLM, build_program


def test_plot_history_draws_one_line_per_key() -> None:
    history = History()
    history.history = {"reward": [0.5, 0.75, 1.0], "val_reward": [0.5, 1.0, 1.0], "errors": [1, 0, 0]}
    figure = kag.plot_history(history)
    lines = figure.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["reward", "val_reward"]
    assert list(lines[1].get_ydata()) == [0.5, 1.0, 1.0]
    assert list(lines[0].get_xdata()) == [1, 2, 3]
    errors = kag.plot_history(history.history, keys=["errors"])
    assert [line.get_label() for line in errors.axes[0].get_lines()] == ["errors"]
    with pytest.raises(ConfigError, match="has no"):
        kag.plot_history(history, keys=["loss"])
    with pytest.raises(ConfigError, match="History"):
        kag.plot_history({})


def test_plot_program_is_an_svg_of_every_module_call(capitals_kb, tmp_path: Path) -> None:
    program = build_program(capitals_kb, DemoCopyLM())
    picture = kag.plot_program(program)
    root = ET.fromstring(picture.svg)
    assert root.tag.endswith("svg")
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "question" in texts and "retriever" in texts and "answerer" in texts
    assert "KnowledgeRetriever" in texts and "→ KnowledgeRetrieverOutput" in texts and "→ Answer" in texts
    assert len(list(root.iter("{http://www.w3.org/2000/svg}line"))) == 2  # question -> retriever -> answerer
    assert picture._repr_svg_() == picture.svg
    assert picture.save(tmp_path / "p.svg").read_text() == picture.svg
    with pytest.raises(ConfigError, match="Program"):
        kag.plot_program(object())
