"""Saved prompt-prefix KV states of a llama.cpp context, so a prompt sharing a prefix is not evaluated twice.

Programs send many prompts that open the same way (system message, schema, worked
examples). :class:`PrefixCache` keeps a few copies of llama.cpp's state after such
prompts (least recently used first out) and, for a new prompt, brings back the one that
spares the most evaluation, unless the live KV cache already holds about as much.
It reads and writes llama-cpp-python's ``Llama`` internals (``_ctx``, ``input_ids``,
``n_tokens``): :mod:`kag.lm.llamacpp_decoder` is its only user.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["MIN_STATE_GAIN", "PrefixCache", "PrefixState", "common_prefix"]

MIN_STATE_GAIN = 32
"""Prompt tokens a saved prefix state must spare to be worth a save or a restore."""


def common_prefix(left: Any, right: list[int]) -> int:
    """How many leading tokens ``left`` and ``right`` share."""
    n = min(len(left), len(right))
    if n == 0:
        return 0
    a = np.asarray(left[:n], dtype=np.int64)
    b = np.asarray(right[:n], dtype=np.int64)
    diff = np.flatnonzero(a != b)
    return int(diff[0]) if diff.size else n


class PrefixState:
    """A copy of llama.cpp's state (KV cache) after a prompt, to resume another prompt sharing its prefix.

    Lighter than ``Llama.save_state``: no copy of the score matrix (kag reads the
    logits straight from the context).
    """

    def __init__(self, data: Any, size: int, input_ids: Any, n_tokens: int) -> None:
        self.data, self.size, self.input_ids, self.n_tokens = data, size, input_ids, n_tokens

    @classmethod
    def save(cls, llama: Any, n_tokens: int) -> PrefixState:
        """The state of ``llama``'s context holding the first ``n_tokens`` of its input."""
        from llama_cpp import llama_cpp as C

        size = int(C.llama_state_get_size(llama._ctx.ctx))
        data = (ctypes.c_uint8 * size)()
        written = int(C.llama_state_get_data(llama._ctx.ctx, data, size))
        return cls(data, written, llama.input_ids[:n_tokens].copy(), n_tokens)

    def restore(self, llama: Any) -> bool:
        """Put this state back into ``llama``; ``False`` (and a reset context) if llama.cpp refuses it."""
        from llama_cpp import llama_cpp as C

        if int(C.llama_state_set_data(llama._ctx.ctx, self.data, self.size)) != self.size:
            llama.reset()
            return False
        llama.input_ids[: self.n_tokens] = self.input_ids
        llama.n_tokens = self.n_tokens
        return True


class PrefixCache:
    """A few :class:`PrefixState` copies keyed by their prompt tokens, in least-recently-used order."""

    def __init__(self) -> None:
        self.states: dict[tuple[int, ...], PrefixState] = {}  # prompt tokens -> KV state, LRU order

    def __len__(self) -> int:
        return len(self.states)

    def clear(self) -> None:
        """Drop every saved state (the model they belong to is closed)."""
        self.states.clear()

    def reuse(self, llama: Any, prompt: list[int]) -> int:
        """Tokens of ``prompt`` already in the KV cache (the live one or a saved prefix state, restored)."""
        live = common_prefix(llama.input_ids[: llama.n_tokens], prompt)
        best_key, best = None, 0
        for cached in self.states:
            shared = common_prefix(cached, prompt)
            if shared > best:
                best_key, best = cached, shared
        if best_key is not None and best > live + MIN_STATE_GAIN:
            state = self.states.pop(best_key)
            self.states[best_key] = state  # most recently used last
            if not state.restore(llama):
                del self.states[best_key]
            else:
                live = best
        # at least one token is evaluated, so the logits belong to this prompt
        return max(0, min(live, len(prompt) - 1))

    def remember(self, llama: Any, prompt: list[int], reused: int, *, capacity: int) -> None:
        """Keep the KV state of a prompt that opens a prefix no saved state covers (at most ``capacity``)."""
        if capacity == 0 or len(prompt) - reused < MIN_STATE_GAIN:
            return
        covered = max((common_prefix(k, prompt) for k in self.states), default=0)
        if len(prompt) - covered < MIN_STATE_GAIN:
            return
        while len(self.states) >= capacity:
            self.states.pop(next(iter(self.states)))
        self.states[tuple(prompt)] = PrefixState.save(llama, len(prompt))
