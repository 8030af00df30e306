"""``KnowledgeRetriever``: a language model fills a typed triplet search, the graph answers it."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, Field

from kag.datamodels.base import DataModel, Entity, Relation
from kag.datamodels.schema import ANY, GraphSchema
from kag.errors import ConfigError, GenerationError, InvalidInputError
from kag.knowledge.base import KnowledgeBase
from kag.knowledge.hits import TripletResults
from kag.knowledge.knowledge import Knowledge
from kag.lm.base import LanguageModel, Message, capabilities_of
from kag.lm.guards import choices_schema, linked_spans_schema, positional_schema, spans_schema, text_spans
from kag.lm.lexical.gate import ScopeGate
from kag.programs.aliases import check_aliases, inputs_with_aliases, search_with_aliases
from kag.programs.demo_choices import (
    SIMILARITY_FIELDS,
    demo_chain_choices,
    demo_choices,
    demo_hops,
    grounded_flags,
    input_texts,
    quoted,
    without_defaults,
)
from kag.programs.generator import Example, join_instructions, schema_sections
from kag.programs.module import (
    Module,
    as_list,
    concat_models,
    import_object,
    knowledge_base_config,
    language_model_config,
    object_path,
    rebuild_knowledge_base,
    rebuild_language_model,
    runtime_for,
)
from kag.programs.prompts import (
    DEFAULT_INPUT_TEMPLATE,
    DEFAULT_RETRIEVER_INSTRUCTIONS,
    build_messages,
    compile_template,
    render_template,
    template_variables,
)
from kag.programs.search_edits import search_variants
from kag.programs.search_prompt import describe_schema, prompt_focus
from kag.programs.search_space import Link, SearchSpace
from kag.programs.skeleton import skeleton
from kag.query.plan import MAX_HOPS, plan_triplet_search
from kag.query.triplet import TripletSearch, triplet_chain_schema, triplet_search_schema
from kag.query.typed_search import EXTENDED_FIELDS, typed_triplet_chain_schema, typed_triplet_search_schema
from kag.ranking.linking import name_key
from kag.text import split_identifier, stem
from kag.training.explore import AnswerSearch, SearchBudget
from kag.training.trace import forced_output, record
from kag.training.variables import Demo, Variable
from kag.validation import check_int, check_k, check_threshold

log = logging.getLogger(__name__)

__all__ = ["Fact", "KnowledgeRetriever"]


class Fact(DataModel):
    """One retrieved fact: its text, score and the entities/relation it links."""

    text: str = Field(description="The fact as one line, e.g. 'Paris -[IsCapitalOf]-> France'.")
    score: float = Field(description="Similarity score in [0, 1].")
    subject: dict[str, Any] = Field(description="The subject entity's fields.")
    relation: dict[str, Any] | None = Field(default=None, description="The relation's label and properties.")
    object: dict[str, Any] | None = Field(default=None, description="The object entity's fields.")
    path: list[dict[str, Any]] = Field(
        default_factory=list, description="Every entity of the matched path, in order (chains have more than two)."
    )


class KnowledgeRetriever(Module):
    """Retrieves facts from a knowledge base with a triplet search filled by a language model.

    The model fills the strict JSON schema of a ``TripletSearch`` whose labels are
    dynamic enums of ``entity_models`` / ``relation_models`` (a ``TripletChain`` of
    up to ``max_hops`` patterns when ``max_hops > 1``). Its answer is also checked
    by :func:`kag.query.plan_triplet_search` (labels, endpoint types of each relation,
    chain joins); an invalid answer is sent back with the error, through the
    model's repair loop. The search then runs on the knowledge base.

    The output holds, in order: the inputs' fields (``return_inputs``), ``search``
    (the filled search as a dict) and ``cypher`` (its compiled text) when
    ``return_query``, ``facts`` (``text``, ``score``, ``subject``, ``relation``,
    ``object``), ``count`` (for counting searches, else ``None``) and ``passages``
    (empty until the knowledge base serves passages).

    Note: ``"*"`` labels are expanded by the knowledge base to all of *its* labels.

    The arguments follow the common ``KnowledgeRetriever`` signature (positional in
    this order): ``knowledge_base`` (a :class:`KnowledgeBase`, or a managed
    ``Knowledge`` whose base is used), ``language_model``, ``entity_models``,
    ``relation_models``, ``k``, ``threshold``, ``prompt_template``, ``examples``
    (``(input, search)`` pairs shown as few-shot turns), ``instructions`` (a string or
    a list of strings), ``use_inputs_schema`` / ``use_outputs_schema`` (show those JSON
    schemas in the system message), ``return_inputs``, ``return_query``, ``name``,
    ``description``, ``trainable`` (whether training may change the module's variable: its
    instructions and ``(question, search)`` demos, see :mod:`kag.training`), then kag's
    keyword-only ``max_hops``, ``quote_names``, ``demo_choices`` and ``abstain``. With ``quote_names`` on (the
    default for a model that decodes under a grammar, such as the packaged local model) each call's
    schema lets the similarity texts
    be only ``"*"`` or a run of up to five words of the inputs, so a small model quotes the name the
    question holds instead of writing the label or an answer it guessed. With ``demo_choices`` on
    (the default for such a model once its demos are chosen per question, as ``KNNFewShot`` does)
    each call's schema lets the labels, relations and flags take only the values the shown demos'
    searches use, and a side every demo names (or every demo asks for with ``"*"``) stays named (or
    asked for): the model picks among the patterns its nearest worked examples show, which a small
    model does far more reliably than choosing from the whole schema.
    With ``abstain`` on (the default for a model that declares ``capabilities.scope_gate``: the packaged
    model, ``LexicalLM``) a question that asks for something no relation of the schema can give ("Who
    is the president of France?" on a graph of countries and cities) is not sent to the model: the retriever writes the
    abstention search of :meth:`kag.lm.lexical.gate.ScopeGate.search` and returns no facts (the
    search is shown, not run), so the answer step says "not found". The boundary is the schema's
    words (labels, relation names, docstrings, fields) and what the demos teach: a word an
    answerable demo asks with is in scope, a word only demos labelled "not found" use is out. A
    small model shown its nearest demo would otherwise pick that demo's relation for any question.
    With k-nearest demos (``KNNFewShot``) each question is shown the
    demos whose questions are most similar by the knowledge base's embedder. Called with ``None`` (or an empty list) it
    returns ``None`` without asking the model.
    """

    def __init__(
        self,
        knowledge_base: KnowledgeBase | Any = None,
        language_model: LanguageModel | None = None,
        entity_models: Sequence[type[Entity]] | None = None,
        relation_models: Sequence[type[Relation]] | None = None,
        k: int = 10,
        threshold: float = 0.8,
        prompt_template: str | None = None,
        examples: Sequence[Example] | None = None,
        instructions: str | Sequence[str] | None = None,
        use_inputs_schema: bool = False,
        use_outputs_schema: bool = False,
        return_inputs: bool = True,
        return_query: bool = True,
        name: str | None = None,
        description: str | None = None,
        trainable: bool = True,
        *,
        max_hops: int = 1,
        quote_names: bool | None = None,
        demo_choices: bool | None = None,
        abstain: bool | None = None,
    ) -> None:
        if isinstance(knowledge_base, Knowledge) and knowledge_base.managed:
            knowledge_base = knowledge_base.kb  # a managed Knowledge: search its typed graph
        super().__init__(name=name, description=description)
        if not isinstance(knowledge_base, KnowledgeBase):
            raise ConfigError(f"knowledge_base must be a kag.KnowledgeBase, got {type(knowledge_base).__name__}.")
        if not callable(getattr(language_model, "generate", None)):
            raise ConfigError("language_model must implement kag.lm.LanguageModel (an async generate method).")
        assert language_model is not None
        check_int(max_hops, name="max_hops", maximum=MAX_HOPS)
        try:
            self.k = check_k(k)
            self.threshold = check_threshold(threshold)
        except InvalidInputError as exc:
            raise ConfigError(str(exc)) from exc
        self.knowledge_base = knowledge_base
        self.language_model = language_model
        entities = list(entity_models) if entity_models is not None else list(knowledge_base.entity_models)
        relations = list(relation_models) if relation_models is not None else list(knowledge_base.relation_models)
        self.graph_schema = GraphSchema(entities, relations)
        self._check_subset(knowledge_base.schema)
        self.entity_models = tuple(self.graph_schema.entity_models)
        self.relation_models = tuple(self.graph_schema.relation_models)
        if not self.relation_models:
            raise ConfigError(
                "a KnowledgeRetriever fills (subject)-[relation]->(object) searches, but its schema declares no "
                "relation models: add at least one Relation model (relation_models=[...] here, or on the "
                "knowledge base). To find the entity a question names without a relation, use "
                "kb.similarity_search(label, text) or a Knowledge's search()."
            )
        self.max_hops = max_hops
        if quote_names is not None and not isinstance(quote_names, bool):
            raise ConfigError(f"quote_names must be True, False or None (automatic), got {quote_names!r}.")
        self.quote_names = quote_names
        if demo_choices is not None and not isinstance(demo_choices, bool):
            raise ConfigError(f"demo_choices must be True, False or None (automatic), got {demo_choices!r}.")
        self.demo_choices = demo_choices
        if abstain is not None and not isinstance(abstain, bool):
            raise ConfigError(f"abstain must be True, False or None (automatic), got {abstain!r}.")
        self.abstain = abstain
        self._gate: ScopeGate | None = None
        self._space: SearchSpace | None = None
        self.return_inputs = bool(return_inputs)
        self.return_query = bool(return_query)
        self.prompt_template = prompt_template
        join_instructions(instructions)  # a wrong type fails here, not at the first call
        self.use_inputs_schema = bool(use_inputs_schema)
        self.use_outputs_schema = bool(use_outputs_schema)
        self._template = compile_template(prompt_template if prompt_template is not None else DEFAULT_INPUT_TEMPLATE)
        self._schemas: dict[tuple[bool, bool], dict[str, Any]] = {}
        self._pinned_schema: dict[str, Any] | None = None
        _ = self.search_schema  # built now: a schema that cannot be built fails here, not at the first call
        demos: list[Demo] = []
        for i, pair in enumerate(examples or ()):
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise ConfigError(f"examples[{i}] must be an (input, search) pair.")
            example_in, example_out = (x.model_dump(mode="json") if isinstance(x, BaseModel) else x for x in pair)
            if not isinstance(example_in, Mapping) or not isinstance(example_out, Mapping):
                raise ConfigError(f"examples[{i}] must pair a model or dict input with a search dict.")
            try:
                self.validate_search(dict(example_out))
            except ValueError as exc:
                raise ConfigError(f"examples[{i}] holds a search that cannot run here: {exc}") from exc
            demos.append(Demo(json.loads(json.dumps(dict(example_in), default=str)), dict(example_out)))
        instructions_copy = (
            instructions if instructions is None or isinstance(instructions, str) else list(instructions)
        )
        self.variable = Variable(instructions=instructions_copy, demos=demos, trainable=trainable)
        self._output_models: dict[tuple[type[BaseModel], ...], type[BaseModel]] = {}

    # -- trainable state ---------------------------------------------------------------------
    default_instructions: str = DEFAULT_RETRIEVER_INSTRUCTIONS
    """The instructions used while the variable holds none."""

    @property
    def instructions(self) -> str | list[str] | None:
        """The instructions of the system message (the variable's; ``None``: the default)."""
        assert self.variable is not None
        return self.variable.instructions

    @property
    def examples(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """The demos as ``(input, search)`` pairs (the variable's)."""
        assert self.variable is not None
        return [(d.input, d.output) for d in self.variable.demos]

    @property
    def search_schema(self) -> dict[str, Any]:
        """The JSON schema the module's current language model fills (built once per kind of model).

        A model that samples under a grammar gets the endpoint-typed schema, so every search it can
        write is plannable; HTTP models get the plain one (OpenAI strict mode refuses a root union).
        Per model, not per module: a training ``teacher`` put in place gets the schema it can fill.
        """
        if self._pinned_schema is not None:
            return self._pinned_schema
        return self._schema_for(*self._schema_kind())

    @search_schema.setter
    def search_schema(self, schema: dict[str, Any] | None) -> None:
        """Pin one schema for every model (``None`` goes back to the schema chosen per model)."""
        if schema is not None and not isinstance(schema, dict):
            raise ConfigError(f"search_schema must be a JSON schema dict or None, got {type(schema).__name__}.")
        self._pinned_schema = schema

    def _schema_for(self, typed: bool, full: bool) -> dict[str, Any]:
        """The search schema of a kind of model (built once per kind)."""
        key = (typed, full)
        if key not in self._schemas:
            if self.max_hops > 1:
                self._schemas[key] = (
                    typed_triplet_chain_schema(self.graph_schema, self.max_hops, full=full)
                    if typed
                    else triplet_chain_schema(self.graph_schema, self.max_hops)
                )
            else:
                self._schemas[key] = (
                    typed_triplet_search_schema(self.graph_schema, full=full)
                    if typed
                    else triplet_search_schema(self.graph_schema)
                )
        return self._schemas[key]

    def _schema_kind(self) -> tuple[bool, bool]:
        """(typed, full) for the current model: typed under a grammar; full with the extended language."""
        declared = capabilities_of(self.language_model)
        # a constrained model gets the extended language (conditions, ordering) only when it says so
        return declared.grammar, declared.grammar and declared.full_search_language

    def _abstains(self) -> bool:
        """``abstain``, automatic: what the model declares (``capabilities.scope_gate``)."""
        if self.abstain is not None:
            return self.abstain
        return capabilities_of(self.language_model).scope_gate

    def _chooses_from_demos(self) -> bool:
        """Automatic ``demo_choices``: a model that asks for it, shown the demos nearest its question."""
        assert self.variable is not None
        declared = capabilities_of(self.language_model)
        return declared.grammar and declared.narrow_to_demos and self.variable.nearest is not None

    def set_variable(self, variable: Variable) -> None:
        """Take ``variable``'s instructions and demos; every demo search must plan on this schema.

        Extended fields (conditions, ordering) the current model's schema leaves out are dropped
        from a demo's search where they hold their defaults (the search means the same): a demo
        bootstrapped by a teacher then reads like a search the model itself can write.
        """
        join_instructions(variable.instructions)
        typed, full = self._schema_kind()
        unwritable = {name: TripletSearch.model_fields[name].default for name in EXTENDED_FIELDS if typed and not full}
        fitted = [without_defaults(demo, unwritable) for demo in variable.demos] if unwritable else variable.demos
        if fitted != variable.demos:
            variable = replace(variable, demos=fitted)
        for i, demo in enumerate(variable.demos):
            try:
                self.validate_search(dict(demo.output))
            except ValueError as exc:
                raise ConfigError(f"demo {i} of {self.name!r} holds a search that cannot run here: {exc}") from exc
        super().set_variable(variable)

    async def demos_for(self, inputs: Any) -> list[Demo]:
        """The demos shown for ``inputs``: all, or the nearest by the knowledge base's embedder."""
        assert self.variable is not None
        if self.variable.nearest is None:
            return list(self.variable.demos)
        # compared by skeleton (how a question is asked), then by its words (which names it holds)
        text = render_template(self._template, template_variables(inputs))

        def rendered(demo: Demo) -> str:
            return render_template(self._template, template_variables(demo.input))

        return await self.variable.demos_for(
            skeleton(text),
            self.knowledge_base.embedder,
            lambda d: skeleton(rendered(d), quoted(d.output)),
            tiebreak=(text, rendered),
        )

    def _name_spans(self, items: Sequence[Any]) -> list[str]:
        """The runs of the inputs' words a quoted similarity text may be: not function words alone
        ("On", "which is"), nor a declared label alone ("landmass", "cities"), which name no entity."""
        labels = {w for label in self.graph_schema.entities for w in split_identifier(label)}

        def label_word(word: str) -> bool:
            folded = word.casefold()
            return folded in labels or stem(folded) in labels

        return [
            span
            for span in text_spans(input_texts(items), names_only=True)
            if not all(label_word(w) for w in span.split())
        ]

    async def _linked_spans(self, spans: Sequence[str]) -> dict[str, list[str]]:
        """``{label: spans}``: the spans that name an entity of the label in the graph (its name, an
        alias it holds, a learned alias, or a close spelling), linked before the model decodes."""
        assert self.variable is not None
        linked: dict[str, list[str]] = {}
        for span in spans:
            known = self.variable.aliases.get(name_key(span))
            if known is not None:
                linked.setdefault(known["label"], []).append(span)
                continue
            hits = await self.knowledge_base.similarity_search(ANY, span, k=4, threshold=_LINKED)
            for label in dict.fromkeys(hit.entity.label for hit in hits):
                if label in self.graph_schema.entities:
                    linked.setdefault(label, []).append(span)
        return linked

    def _joined_prefix(self, output: str | None) -> dict[str, Any] | None:
        """The longest run of a chain's first patterns that can be planned, from a model's last
        invalid answer (``None``: not a chain, or not even its first pattern plans).

        A small model's chain whose second pattern does not join the first still searched the
        right first pattern more often than not; that part runs instead of failing the question.
        """
        if self.max_hops == 1 or not output:
            return None
        try:
            data = json.loads(output)
        except ValueError:
            return None
        hops = data.get("hops") if isinstance(data, dict) else None
        if not isinstance(hops, list):
            return None
        for n in range(len(hops) - 1, 0, -1):
            search = {"hops": hops[:n]}
            try:
                self.validate_search(search)
            except ValueError:
                continue
            return search
        return None

    async def scope_search(self, inputs: Any) -> dict[str, Any] | None:
        """The abstention search when ``inputs`` ask for something the schema cannot give, else None.

        Decided by the knowledge base's :class:`~kag.lm.lexical.gate.ScopeGate` on the rendered inputs, the plain
        search schema and every demo of the variable (not only those shown): see ``abstain``.
        """
        assert self.variable is not None
        if self._gate is None:  # the knowledge base's gate: a LexicalLM over it reads each question once
            self._gate = ScopeGate.shared(self.knowledge_base)
        plain = self._schema_for(typed=False, full=False)
        demos = [(render_template(self._template, template_variables(d.input)), d.output) for d in self.variable.demos]
        return await self._gate.search(render_template(self._template, template_variables(inputs)), plain, demos)

    # -- learning from answers ------------------------------------------------------------
    def with_aliases(self, search: dict[str, Any]) -> dict[str, Any]:
        """``search`` with every similarity text that is a learned alias replaced by the entity's name."""
        assert self.variable is not None
        return search_with_aliases(search, self.variable.aliases)

    def _aliased(self, items: list[Any]) -> list[Any]:
        """The inputs with each learned alias in their text replaced by the entity's name."""
        assert self.variable is not None
        return inputs_with_aliases(items, self.variable.aliases)

    async def check_aliases(self, aliases: Mapping[str, Mapping[str, str]]) -> None:
        """Refuse aliases that cannot be learned here (:func:`kag.programs.aliases.check_aliases`)."""
        await check_aliases(self.knowledge_base, self.graph_schema, aliases, self.name)

    async def outputs_for_answer(
        self, inputs: Mapping[str, Any], label: Mapping[str, Any], budget: SearchBudget
    ) -> AnswerSearch:
        """Searches whose results hold ``label``'s answer, found by enumerating what the schema allows
        around the entities ``inputs`` name (:mod:`kag.programs.search_space`), simplest first."""
        assert self.variable is not None
        if self._space is None:
            self._space = SearchSpace(self.knowledge_base, self.graph_schema, self.max_hops, self.k, self.threshold)
        texts = [v for v in inputs.values() if isinstance(v, str)]
        known = {k: Link(k, v["label"], v["name"], alias=True) for k, v in self.variable.aliases.items()}
        found = await self._space.find(texts, label, budget, aliases=known, limit=budget.confirm)
        learned: list[dict[str, Any]] = []
        for candidate in found.candidates:
            needs = {
                name_key(link.span): {"label": link.label, "name": link.name} for link in found.aliases_of(candidate)
            }
            learned.append({"aliases": needs} if needs else {})
        return AnswerSearch(found.candidates, learned, found.searches, found.seconds, found.exhausted)

    def output_variants(self, search: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Searches one edit away from ``search`` that can run here (for optimizers that explore).

        Per pattern: either direction (``bidirectional``), the sides swapped (the relation read the
        other way), the negation and the count flipped. Where the retriever may chain more patterns
        (``max_hops``), also the chain one pattern longer: a pattern of a relation from the named
        entity's label to itself put first ("the licenses of X's dependencies": X -DependsOn->
        Package, then the written pattern from there), or a pattern from the asked label put
        last. A failed question whose variant answers it becomes a demo, which is how training
        teaches a model a pattern it never writes by itself.
        """
        return search_variants(search, self.graph_schema, self.max_hops, self.validate_search)

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON schema the language model fills (another name of ``search_schema``)."""
        return self.search_schema

    def _check_subset(self, kb_schema: GraphSchema) -> None:
        for label, model in self.graph_schema.entities.items():
            if kb_schema.entities.get(label) is not model:
                raise ConfigError(
                    f"entity model {model.__name__} ({label!r}) is not declared by the knowledge base; "
                    f"its labels are {list(kb_schema.entity_labels)}."
                )
        for label, spec in self.graph_schema.relations.items():
            kb_spec = kb_schema.relations.get(label)
            if kb_spec is None or kb_spec.model is not spec.model:
                raise ConfigError(
                    f"relation model {spec.model.__name__} ({label!r}) is not declared by the knowledge "
                    f"base; its relation labels are {list(kb_schema.relation_labels)}."
                )

    # -- tracing -------------------------------------------------------------------------
    def _retrieved_fields(self) -> dict[str, tuple[Any, Any]]:
        fields: dict[str, tuple[Any, Any]] = {}
        if self.return_query:
            fields["search"] = (
                dict[str, Any] | None,
                Field(default=None, description="The triplet search (or chain) the model filled."),
            )
            fields["cypher"] = (str | None, Field(default=None, description="The compiled Cypher text."))
        fields["facts"] = (list[Fact], Field(default_factory=list, description="The facts found, best first."))
        fields["count"] = (
            int | None,
            Field(default=None, description="The number of matches, for counting searches."),
        )
        fields["passages"] = (
            list[dict[str, Any]],
            Field(default_factory=list, description="Text passages (empty until chunk retrieval)."),
        )
        return fields

    def compute_output_model(self, input_models: Sequence[type[BaseModel]]) -> type[BaseModel]:
        """The inputs' fields (when ``return_inputs``) then the retrieval fields."""
        key = tuple(input_models) if self.return_inputs else ()
        if key not in self._output_models:
            self._output_models[key] = concat_models("KnowledgeRetrieverOutput", list(key), self._retrieved_fields())
        return self._output_models[key]

    # -- running -------------------------------------------------------------------------
    def messages(
        self, inputs: Any, demos: Sequence[Demo] | None = None, focus: Iterable[str] | None = None
    ) -> list[Message]:
        """The role messages sent to fill the search (exposed for inspection and tests).

        ``demos``: the worked examples to show (default: the variable's, the first ``nearest`` of them
        when it selects per call). ``focus``: the labels and relations described in full (``None``:
        all); the others get one short line each (see :meth:`focus_of`).
        """
        assert self.variable is not None
        if demos is None:
            demos = self.variable.demos[: self.variable.nearest]
        joined = join_instructions(self.instructions)
        instructions = joined if joined is not None else DEFAULT_RETRIEVER_INSTRUCTIONS
        system = (
            f"{instructions.strip()}\n\n{describe_schema(self.graph_schema, None if focus is None else set(focus))}"
        )
        if self.max_hops > 1:
            system += (
                f"\n\nUse one pattern when one relation answers the request, or a chain of up to "
                f"{self.max_hops} patterns where each pattern's object is the next one's subject."
            )
        system += schema_sections(inputs, self.search_schema, self.use_inputs_schema, self.use_outputs_schema)
        shots = [
            (render_template(self._template, template_variables(d.input)), json.dumps(d.output, ensure_ascii=False))
            for d in demos
        ]
        return build_messages(system, render_template(self._template, template_variables(inputs)), shots)

    def focus_of(self, demos: Sequence[Demo], linked: Mapping[str, Sequence[str]]) -> set[str] | None:
        """What a small-context model's prompt describes in full (:func:`~kag.programs.search_prompt.prompt_focus`):
        ``None`` (everything) for a model that declares no small context window."""
        window = capabilities_of(self.language_model).context_window
        if window is None or window > _SMALL_CONTEXT:
            return None
        return prompt_focus(self.graph_schema, [demo_hops(d) for d in demos], linked)

    def validate_search(self, search: dict[str, Any]) -> None:
        """Raise ``SchemaError`` / ``InvalidInputError`` (ValueErrors) if the search cannot be planned."""
        plan_triplet_search(search, self.graph_schema, k=self.k, threshold=self.threshold)

    async def call(self, inputs: Any) -> BaseModel | None:  # type: ignore[override]
        """Fill the search with the model, run it, return inputs + search + facts (``None`` for no inputs)."""
        if inputs is None or (isinstance(inputs, list | tuple) and not inputs):
            return None
        original = as_list(inputs)
        items = self._aliased(original)  # the model reads a learned alias as the graph's name
        given = items if len(items) > 1 else items[0]
        demos = await self.demos_for(given)
        search = forced_output(self.name)  # an optimizer exploring a variant of this call
        gated = False
        if search is None and self._abstains():
            search = await self.scope_search(given)
            gated = search is not None
        messages: list[Message] = []
        if search is None:
            schema = self.search_schema
            spans = ["*", *self._name_spans(items)]
            quoting = self.quote_names or (self.quote_names is None and self._schema_kind()[0])
            small = capabilities_of(self.language_model).context_window is not None
            linked = await self._linked_spans(spans[1:]) if quoting or small else {}
            messages = self.messages(given, demos, self.focus_of(demos, linked))
            if quoting:
                # negation and counting only where the question (or a shown demo) asks for them
                schema = choices_schema(schema, grounded_flags(input_texts(items), demos))
                if linked:  # only names the graph holds, each for its own label
                    schema = linked_spans_schema(schema, _TEXT_SIDES, linked)
                    spans = ["*", *dict.fromkeys(span for found in linked.values() for span in found)]
                else:  # a name the graph lacks: any run of the question's words that reads as a name
                    schema = spans_schema(schema, SIMILARITY_FIELDS, spans)
            if demos and (self.demo_choices or (self.demo_choices is None and self._chooses_from_demos())):
                schema = choices_schema(schema, demo_choices(demos, spans[1:] if self.max_hops == 1 else None))
                positions = demo_chain_choices(demos, spans[1:]) if self.max_hops > 1 else None
                if positions is not None:
                    schema = positional_schema(schema, "hops", positions)
            try:
                search = await self.language_model.generate(
                    messages,
                    schema,
                    validate=self.validate_search,
                    schema_name="triplet_chain" if self.max_hops > 1 else "triplet_search",
                )
            except GenerationError as exc:
                search = self._joined_prefix(exc.output)
                if search is None:
                    raise
                log.warning(
                    "%s: the model's chain did not join; searching its first %d pattern(s)",
                    self.name,
                    len(search["hops"]),
                )
        record(self.name, template_variables(original if len(original) > 1 else original[0])["inputs"], search)
        search = self.with_aliases(search)  # other names learned from labels run as the graph's names
        if gated:  # not run (no Cypher): its free words could still name something ("lake", a province "Lake")
            results = TripletResults()
        else:
            results = await self.knowledge_base.triplet_search(
                search, k=self.k, threshold=self.threshold, schema=self.graph_schema
            )
        data: dict[str, Any] = {}
        models: list[type[BaseModel]] = []
        if self.return_inputs:
            for item in items:
                if not isinstance(item, BaseModel):
                    raise ConfigError("return_inputs needs pydantic model inputs (not plain dicts).")
                models.append(type(item))
                data.update({k: getattr(item, k) for k in type(item).model_fields})
        if self.return_query:
            data["search"] = search
            data["cypher"] = results.query.text if results.query is not None else None
        # the whole path stays in `text`; the prompt gets the first hop's entities
        data["facts"] = [
            Fact.model_validate({k: v for k, v in hit.to_dict().items() if k in Fact.model_fields}) for hit in results
        ]
        data["count"] = results.count
        data["passages"] = []
        return self.compute_output_model(models).model_validate(data)

    # -- configs -------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """Knowledge base by URI + model import paths, the model's own config, search settings."""
        return {
            **super().get_config(),
            "knowledge_base": knowledge_base_config(self.knowledge_base),
            "language_model": language_model_config(self.language_model),
            "entity_models": [object_path(m) for m in self.entity_models],
            "relation_models": [object_path(m) for m in self.relation_models],
            "k": self.k,
            "threshold": self.threshold,
            "return_inputs": self.return_inputs,
            "return_query": self.return_query,
            "max_hops": self.max_hops,
            "quote_names": self.quote_names,
            "demo_choices": self.demo_choices,
            "abstain": self.abstain,
            "prompt_template": self.prompt_template,
            "instructions": self.instructions
            if self.instructions is None or isinstance(self.instructions, str)
            else list(self.instructions),
            "examples": [[i, o] for i, o in self.examples],
            "variable": self.variable.get_config() if self.variable is not None else None,
            "use_inputs_schema": self.use_inputs_schema,
            "use_outputs_schema": self.use_outputs_schema,
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **runtime: Any) -> KnowledgeRetriever:
        """Rebuild; pass ``knowledge_base=`` / ``language_model=`` when they cannot be reopened."""
        name = str(config.get("name"))
        custom = runtime.get("custom_objects")
        kb = rebuild_knowledge_base(
            config.get("knowledge_base"), runtime_for(runtime.get("knowledge_base"), name), custom
        )
        lm = rebuild_language_model(config.get("language_model"), runtime_for(runtime.get("language_model"), name), kb)
        return cls(
            knowledge_base=kb,
            language_model=lm,
            entity_models=[import_object(p, Entity, custom) for p in config.get("entity_models", [])],
            relation_models=[import_object(p, Relation, custom) for p in config.get("relation_models", [])],
            k=int(config.get("k", 10)),
            threshold=float(config.get("threshold", 0.8)),
            return_inputs=bool(config.get("return_inputs", True)),
            return_query=bool(config.get("return_query", True)),
            max_hops=int(config.get("max_hops", 1)),
            quote_names=config.get("quote_names"),
            demo_choices=config.get("demo_choices"),
            abstain=config.get("abstain"),
            prompt_template=config.get("prompt_template"),
            instructions=config.get("instructions"),
            examples=[(i, o) for i, o in config.get("examples") or []],
            use_inputs_schema=bool(config.get("use_inputs_schema", False)),
            use_outputs_schema=bool(config.get("use_outputs_schema", False)),
            name=config.get("name"),
            description=config.get("description"),
        ).restore_variable(config)

    def summary_fields(self) -> str:
        model = getattr(self.language_model, "name", type(self.language_model).__name__)
        return f"model {model}; k={self.k}, threshold={self.threshold}, max_hops={self.max_hops}"


_SMALL_CONTEXT = 8192  # a model's window at most this many tokens gets a prompt bounded by the question


_TEXT_SIDES = {"subject_similarity_search": "subject_label", "object_similarity_search": "object_label"}
_LINKED = 0.9  # how close a span must be to an entity's name to be offered for its label
