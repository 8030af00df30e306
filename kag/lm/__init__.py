"""Language models: one protocol, HTTP clients for OpenAI-compatible servers and Ollama,
and a scripted model for tests.

Every model answers with a JSON object validated against a schema, with a bounded
repair dialogue when the answer is invalid (see :class:`BaseLanguageModel`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kag.errors import ConfigError
from kag.lm.base import BaseLanguageModel, LanguageModel, Message, ModelCapabilities, capabilities_of
from kag.lm.jsonschema_check import check_json_schema, validate_json_schema
from kag.lm.lexical import LexicalLM
from kag.lm.llamacpp import LlamaCppLM
from kag.lm.ollama import OllamaLM
from kag.lm.openai import OpenAICompatibleLM
from kag.lm.scripted import ScriptedLM

__all__ = [
    "BaseLanguageModel",
    "LanguageModel",
    "LexicalLM",
    "LlamaCppLM",
    "Message",
    "ModelCapabilities",
    "OllamaLM",
    "OpenAICompatibleLM",
    "ScriptedLM",
    "capabilities_of",
    "check_json_schema",
    "language_model_from_config",
    "validate_json_schema",
]

_SECRETS = {
    "api_key": "set the OPENAI_API_KEY environment variable instead",
    "client": "pass an httpx.AsyncClient to the constructor in code instead",
}


def language_model_from_config(config: Mapping[str, Any]) -> LanguageModel:
    """Rebuild a language model from ``get_config()`` output.

    ``config["type"]`` is ``"openai"`` (:class:`OpenAICompatibleLM`) or ``"ollama"``
    (:class:`OllamaLM`). API keys are never read from a config: the OpenAI client
    falls back to ``$OPENAI_API_KEY``. ``ScriptedLM`` cannot be rebuilt (its
    responses are Python objects).

    Raises:
        ConfigError: unknown type, unknown keys, a secret in the config, or bad values.
    """
    if not isinstance(config, Mapping):
        raise ConfigError(f"A language model config must be a dict, got {type(config).__name__}.")
    kind = config.get("type")
    params = {k: v for k, v in config.items() if k != "type"}
    cls: type[OpenAICompatibleLM] | type[OllamaLM]
    if kind == "openai":
        cls = OpenAICompatibleLM
    elif kind == "ollama":
        cls = OllamaLM
    elif kind == "llama":
        return LlamaCppLM.from_config(config)
    elif kind == "lexical":
        raise ConfigError(
            "A LexicalLM matches names in a knowledge base: rebuild it with "
            "LexicalLM.from_config(config, knowledge_base=kb)."
        )
    elif kind == "scripted":
        raise ConfigError(
            "A ScriptedLM cannot be rebuilt from a config (its responses are Python objects): "
            "construct it in code, e.g. ScriptedLM([...])."
        )
    else:
        raise ConfigError(f"Unknown language model type {kind!r} in config; use 'openai', 'ollama' or 'llama'.")
    for key, advice in _SECRETS.items():
        if key in params:
            raise ConfigError(f"A language model config must not contain {key!r}: {advice}.")
    unknown = sorted(set(params) - cls.CONFIG_KEYS)
    if unknown:
        raise ConfigError(
            f"Unknown key(s) {unknown} for a {kind!r} language model config; allowed: {sorted(cls.CONFIG_KEYS)}."
        )
    if "model" not in params:
        raise ConfigError(f"A {kind!r} language model config needs a 'model'.")
    return cls(**params)
