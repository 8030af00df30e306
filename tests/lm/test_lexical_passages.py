"""LexicalLM answers from retrieved passages: it quotes the best supporting sentence and cites its label."""

from __future__ import annotations

import kag
from kag import Document
from kag.agents import Agent, AgentCard
from kag.lm.lexical.passages import answer_from_passages, read_results


def policies() -> kag.Knowledge:
    # written as a user writes it: the text positionally
    return kag.create_knowledge(
        "memory",
        sources=[
            Document("Expense receipts must be submitted within 30 days.", source="expense-policy.md"),
            Document("The office opens at 9 and closes at 6 on weekdays.", source="handbook.md"),
            Document(text="Travel must be booked through the company portal.", source="travel.md"),
        ],
    )


def test_the_offline_agent_answers_a_passage_question_with_its_citation() -> None:
    k = policies()
    agent = Agent(card=AgentCard(name="policies"), llm=kag.LexicalLM(), knowledge=k, retrieval="required")
    result = agent.sync.ask("When are receipts due?")
    assert "Expense receipts must be submitted within 30 days." in result.text
    assert "not found" not in result.text.lower()
    assert [c.source for c in result.citations] == ["expense-policy.md"]
    assert result.citations[0].kind == "passage"
    label = result.citations[0].label
    assert result.labels[label].source == "expense-policy.md"
    # another question, another passage
    opens = agent.sync.ask("When does the office open?")
    assert "opens at 9" in opens.text and [c.source for c in opens.citations] == ["handbook.md"]


def test_the_offline_agent_searches_first_when_nothing_was_retrieved() -> None:
    # retrieval="auto" retrieves nothing up front: the offline model calls the search tool with the question
    agent = Agent(card=AgentCard(name="policies"), llm=kag.LexicalLM(), knowledge=policies(), retrieval="auto")
    result = agent.sync.ask("How must travel be booked?", citations=True)
    assert "company portal" in result.text and [c.source for c in result.citations] == ["travel.md"]
    answer = agent.sync.invoke("How must travel be booked?")
    assert "company portal" in answer


def test_knowledge_ask_answers_from_passages_with_the_offline_model() -> None:
    k = policies()
    result = k.sync.ask("When are receipts due?", language_model=kag.LexicalLM())
    assert "30 days" in result.text and [c.source for c in result.citations] == ["expense-policy.md"]


def test_a_passage_that_shares_no_word_answers_nothing() -> None:
    prompt = (
        "Question: Who painted the ceiling?\n\n"
        "[docs:1] passage (score 0.400) source: a.md\n<<<BEGIN DATA docs:1 abc>>>\nReceipts are due in 30 days.\n"
        "<<<END DATA docs:1 abc>>>\n"
    )
    results, rest = read_results(prompt)
    assert [(r.label, r.kind, r.source) for r in results] == [("docs:1", "passage", "a.md")]
    assert rest.strip() == "Question: Who painted the ceiling?"
    assert answer_from_passages("Who painted the ceiling?", results) is None
