"""DSPy pieces of ``benchmarks.bench_dspy``: an offline llama.cpp LM for DSPy and the KGQA program in DSPy.

Importing this module imports DSPy with everything remote switched off: its cache directory is a
temporary one (``DSPY_CACHEDIR``, removed at exit), its disk and memory caches are disabled, and
model metadata would be read from DSPy's bundled snapshot (``LITELLM_LOCAL_MODEL_COST_MAP``), never
fetched. The LM is a custom ``dspy.BaseLM`` answering from a local GGUF file through
llama-cpp-python, so LiteLLM is never imported (nor its telemetry) and nothing is fetched from a hub
or an API.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import tempfile
import threading
import time
import uuid
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal

_CACHE_DIR = tempfile.mkdtemp(prefix="kag-bench-dspy-")
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
os.environ["DSPY_CACHEDIR"] = _CACHE_DIR
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # never fetch LiteLLM's price map

import dspy  # noqa: E402  (after the settings above: DSPy reads them on import)
import numpy as np  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field, create_model  # noqa: E402

from kag.datamodels.schema import ANY, GraphSchema  # noqa: E402
from kag.datasets import Answer  # noqa: E402
from kag.lm.guards import bound_schema  # noqa: E402
from kag.lm.llamacpp import schema_grammar  # noqa: E402
from kag.programs.prompts import DEFAULT_GENERATOR_INSTRUCTIONS, DEFAULT_RETRIEVER_INSTRUCTIONS  # noqa: E402
from kag.query.triplet import triplet_search_schema  # noqa: E402
from kag.query.typed_search import typed_triplet_search_schema  # noqa: E402

dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
# DSPy 3.4 deprecates BaseLM.forward() subclasses in favour of lm15 engines (removal planned for 3.5);
# this LM keeps the forward() interface, which 3.4 still supports, and silences that one notice
warnings.filterwarnings(
    "ignore", message=r"Implementing custom LMs through BaseLM\.forward", category=DeprecationWarning
)

# kag's LlamaCppLM defaults, so both programs decode under the same bounds
MAX_TOKENS = 512
MAX_STRING_LENGTH = 160
MAX_ITEMS = 16
SEARCH_FIELDS = (
    "subject_label",
    "subject_similarity_search",
    "relation_label",
    "object_label",
    "object_similarity_search",
    "negated",
    "bidirectional",
    "count",
)


class GreedyDecoder:
    """Greedy decoding of chats on a local GGUF through llama-cpp-python, optionally under a GBNF grammar.

    The prompt is the GGUF's chat template (llama-cpp-python's ``Jinja2ChatFormatter``). A few
    ``llama_cpp.Llama`` contexts of the same file (``make_llama``; the weights are memory-mapped
    once) each keep the KV cache of one system message, so the two steps of a program, which
    alternate, both resume their own prompt prefix instead of evaluating it again. Each step takes
    the highest-logit token; under a grammar that token is first checked alone and the whole
    vocabulary is masked only when the grammar refuses it: the same token full masking would pick
    (llama.cpp's own fast path; masking 49k tokens at every step made one constrained answer take
    minutes on 2 cores). A resumed prefix gives the logits a fresh evaluation would, up to rounding.
    """

    def __init__(self, make_llama: Callable[[], Any], max_tokens: int = MAX_TOKENS, contexts: int = 4) -> None:
        from llama_cpp import llama_cpp
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.make_llama, self.max_tokens, self.C = make_llama, max_tokens, llama_cpp
        self.contexts = max(1, contexts)
        llama = make_llama()
        self._pool: list[Any] = [llama]
        self._owner: OrderedDict[str, int] = OrderedDict()  # system message -> context index, LRU first
        self.vocab = llama._model.vocab  # the grammars' vocabulary (the same file in every context)
        self.n_vocab = llama.n_vocab()

        def text(token: int) -> str:
            return str(llama._model.token_get_text(token)) if token != -1 else ""

        self.formatter = Jinja2ChatFormatter(
            template=llama.metadata["tokenizer.chat_template"],
            eos_token=text(llama.token_eos()),
            bos_token=text(llama.token_bos()),
        )
        self._grammars: dict[str, Any] = {}
        self._one = (llama_cpp.llama_token_data * 1)()
        self._all = (llama_cpp.llama_token_data * self.n_vocab)()
        self._all_np = np.ctypeslib.as_array(self._all)
        self._ids = np.arange(self.n_vocab, dtype=np.intc)
        # seconds and token counts, summed over calls: prompt evaluation, sampling, decoding
        self.timings = dict.fromkeys(("prompt_s", "sample_s", "decode_s", "prompt_tokens", "reused_tokens"), 0.0)
        self.timings["masked"] = 0.0  # steps where the grammar refused the favourite token

    def _context(self, key: str) -> Any:
        """The context that last ran a prompt opening with ``key`` (else a new or the least recent one)."""
        if key in self._owner:
            self._owner.move_to_end(key)
            return self._pool[self._owner[key]]
        if len(self._owner) < len(self._pool):
            index = len(self._owner)
        elif len(self._pool) < self.contexts:
            self._pool.append(self.make_llama())
            index = len(self._pool) - 1
        else:
            index = self._owner.popitem(last=False)[1]
        self._owner[key] = index
        return self._pool[index]

    def close(self) -> None:
        for grammar in self._grammars.values():
            self.C.llama_sampler_free(grammar)
        self._grammars.clear()

    def _sampler(self, gbnf: str | None) -> Any:
        if not gbnf:
            return None
        if gbnf not in self._grammars:
            grammar = self.C.llama_sampler_init_grammar(self.vocab, gbnf.encode("utf-8"), b"root")
            if not grammar:
                raise ValueError("llama.cpp rejected the grammar")
            self._grammars[gbnf] = grammar
        return self.C.llama_sampler_clone(self._grammars[gbnf])

    def _allows(self, sampler: Any, token: int) -> bool:
        self._one[0].id, self._one[0].logit, self._one[0].p = token, 0.0, 0.0
        array = self.C.llama_token_data_array(data=self._one, size=1, selected=-1, sorted=False)
        self.C.llama_sampler_apply(sampler, ctypes.byref(array))
        return bool(np.isfinite(self._one[0].logit))

    def _masked_argmax(self, sampler: Any, logits: Any) -> int:
        self._all_np["id"], self._all_np["logit"], self._all_np["p"] = self._ids, logits, 0.0
        array = self.C.llama_token_data_array(data=self._all, size=self.n_vocab, selected=-1, sorted=False)
        self.C.llama_sampler_apply(sampler, ctypes.byref(array))
        return int(np.argmax(self._all_np["logit"]))

    def __call__(self, messages: list[dict[str, str]], gbnf: str | None = None) -> tuple[str, str, int, int]:
        """``(text, finish_reason, prompt_tokens, completion_tokens)`` of the chat's greedy answer."""
        C = self.C
        llama = self._context(messages[0]["content"] if messages else "")
        text = self.formatter(messages=messages).prompt
        prompt = list(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))
        if len(prompt) >= llama.n_ctx():
            raise ValueError(f"the prompt has {len(prompt)} tokens; the context window is {llama.n_ctx()}")
        cached = llama.input_ids[: llama.n_tokens]
        reuse = 0
        while reuse < min(len(cached), len(prompt) - 1) and cached[reuse] == prompt[reuse]:
            reuse += 1
        llama.n_tokens = reuse  # eval drops the cache after the shared prefix first
        clock = time.perf_counter()
        llama.eval(prompt[reuse:])
        self.timings["prompt_s"] += time.perf_counter() - clock
        self.timings["prompt_tokens"] += len(prompt) - reuse
        self.timings["reused_tokens"] += reuse
        sampler = self._sampler(gbnf)
        tokens: list[int] = []
        finish = "length"
        try:
            while len(tokens) < self.max_tokens and len(prompt) + len(tokens) < llama.n_ctx():
                clock = time.perf_counter()
                logits = np.ctypeslib.as_array(llama._ctx.get_logits_ith(-1), shape=(self.n_vocab,))
                token = int(np.argmax(logits))
                if sampler is not None and not self._allows(sampler, token):
                    token = self._masked_argmax(sampler, logits)
                    self.timings["masked"] += 1
                self.timings["sample_s"] += time.perf_counter() - clock
                if C.llama_vocab_is_eog(self.vocab, token):
                    finish = "stop"
                    break
                if sampler is not None:
                    C.llama_sampler_accept(sampler, token)
                tokens.append(token)
                clock = time.perf_counter()
                llama.eval([token])
                self.timings["decode_s"] += time.perf_counter() - clock
        finally:
            if sampler is not None:
                C.llama_sampler_free(sampler)
        answer = llama.detokenize(tokens).decode("utf-8", errors="replace")
        return answer, finish, len(prompt), len(tokens)


class LlamaCppDSPyLM(dspy.BaseLM):
    """A DSPy LM over a local GGUF (greedy, uncached), with an optional grammar per call.

    ``forward`` decodes the messages with :class:`GreedyDecoder` and returns an OpenAI-style chat
    completion (``choices[0].message.content``, ``usage``), the shape DSPy's ``BaseLM`` reads. A
    ``grammar`` keyword (GBNF text, e.g. from a ``dspy.Predict(..., grammar=...)`` config) constrains
    that call. ``calls``, ``seconds`` and ``tokens`` count completions, time and generated tokens.
    """

    def __init__(self, decoder: GreedyDecoder, *, model: str = "local/SmolLM2-135M-Instruct") -> None:
        super().__init__(model=model, model_type="chat", temperature=0.0, max_tokens=decoder.max_tokens, cache=False)
        self.decoder = decoder
        self.calls = 0
        self.seconds = 0.0
        self.tokens = 0
        self._lock = threading.Lock()

    def forward(self, prompt: str | None = None, messages: list[dict[str, Any]] | None = None, **kwargs: Any) -> Any:
        chat = messages if messages is not None else [{"role": "user", "content": prompt or ""}]
        chat = [{"role": str(m["role"]), "content": str(m["content"])} for m in chat]
        with self._lock:
            t0 = time.perf_counter()
            try:
                text, finish, prompt_tokens, completion_tokens = self.decoder(chat, kwargs.get("grammar"))
            finally:
                self.calls += 1
                self.seconds += time.perf_counter() - t0
            self.tokens += completion_tokens
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def search_model(schema: GraphSchema) -> type[BaseModel]:
    """The triplet search as a pydantic model: kag's eight fields, labels as enums, kag's descriptions."""
    props = triplet_search_schema(schema)["properties"]
    entity = Literal[(*schema.entity_labels, ANY)]  # type: ignore[valid-type]
    relation = Literal[(*schema.relation_labels, ANY)]  # type: ignore[valid-type]
    kinds: dict[str, Any] = {
        "subject_label": entity,
        "subject_similarity_search": str,
        "relation_label": relation,
        "object_label": entity,
        "object_similarity_search": str,
        "negated": bool,
        "bidirectional": bool,
        "count": bool,
    }
    fields: dict[str, Any] = {
        name: (kinds[name], Field(description=props[name].get("description", ""))) for name in SEARCH_FIELDS
    }
    return create_model("TripletSearch", __config__=ConfigDict(extra="forbid"), **fields)


def signatures(schema: GraphSchema) -> tuple[type[dspy.Signature], type[dspy.Signature]]:
    """``question -> search`` and ``question, facts -> entities, number``, with kag's default instructions.

    The search step's instructions are kag's retriever instructions followed by the graph schema
    (labels and relation endpoints), the information kag's retriever prompt holds too.
    """
    search = search_model(schema)
    answer_fields = Answer.model_fields
    search_signature = dspy.Signature(
        {
            "question": (str, dspy.InputField(desc="The user's question")),
            "search": (search, dspy.OutputField(desc="The triplet search of the knowledge graph that answers it")),
        },
        f"{DEFAULT_RETRIEVER_INSTRUCTIONS}\n\n{schema.describe()}",
    )
    answer_signature = dspy.Signature(
        {
            "question": (str, dspy.InputField(desc="The user's question")),
            "facts": (str, dspy.InputField(desc="The facts retrieved from the knowledge graph, one per line")),
            "entities": (list[str], dspy.OutputField(desc=answer_fields["entities"].description or "")),
            "number": (int | None, dspy.OutputField(desc=answer_fields["number"].description or "")),
        },
        DEFAULT_GENERATOR_INSTRUCTIONS,
    )
    return search_signature, answer_signature


def grammars(schema: GraphSchema) -> tuple[str, str]:
    """GBNF grammars of the two output objects JSONAdapter asks for, with kag's bounds (``schema_grammar``).

    Step 1: ``{"search": <kag's typed triplet search>}``; step 2: ``{"entities": [...], "number": int | null}``.
    """
    search = {
        "type": "object",
        "properties": {"search": typed_triplet_search_schema(schema)},
        "required": ["search"],
        "additionalProperties": False,
    }
    answer = {
        "type": "object",
        "properties": {
            "entities": {"type": "array", "items": {"type": "string"}},
            "number": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["entities", "number"],
        "additionalProperties": False,
    }
    return tuple(  # type: ignore[return-value]
        schema_grammar(bound_schema(s, MAX_ITEMS), max_string_length=MAX_STRING_LENGTH) for s in (search, answer)
    )


class Shared:
    """Wraps an object DSPy must share, not copy, when it deep-copies a program (the graph search)."""

    def __init__(self, fn: Callable[[dict[str, Any]], str]) -> None:
        self.fn = fn

    def __deepcopy__(self, memo: dict[int, Any]) -> Shared:
        return self

    def __call__(self, search: dict[str, Any]) -> str:
        return self.fn(search)


class KGQAProgram(dspy.Module):
    """``question -> search`` (Predict), the search run by kag, then ``question, facts -> entities, number``.

    ``run_search`` takes the search dict and returns the facts as text lines; it raises a
    ``ValueError`` for a search kag cannot plan. ``search_config`` / ``answer_config`` are the two
    predictors' LM keywords (the constrained mode puts each step's ``grammar`` there).
    """

    def __init__(
        self,
        schema: GraphSchema,
        run_search: Callable[[dict[str, Any]], str],
        search_config: dict[str, Any] | None = None,
        answer_config: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        search_signature, answer_signature = signatures(schema)
        self.search = dspy.Predict(search_signature, **(search_config or {}))
        self.answer = dspy.Predict(answer_signature, **(answer_config or {}))
        self.run_search = Shared(run_search)

    def forward(self, question: str) -> dspy.Prediction:
        found = self.search(question=question).search
        search = found.model_dump() if isinstance(found, BaseModel) else dict(found)
        facts = self.run_search(search)
        answer = self.answer(question=question, facts=facts)
        return dspy.Prediction(search=search, facts=facts, entities=answer.entities, number=answer.number)
