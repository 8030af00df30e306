"""kag's own token loop over a loaded llama.cpp model: grammar-constrained sampling, guarded against loops.

:class:`GrammarDecoder` evaluates a prompt (resuming the longest prefix already in the
KV cache, live or saved in its :class:`~kag.lm.llamacpp_cache.PrefixCache`), then samples
one token at a time under the schema's grammar: the model's favourite token is checked
alone against the grammar before the whole vocabulary is masked (:class:`GrammarSampler`),
and a :class:`~kag.lm.guards.RepetitionGuard` cuts a looping string or list at its first
repeat and closes it. Each grammar is parsed by llama.cpp once and cloned per answer.

It reaches into llama-cpp-python's ``Llama`` (``_model.vocab``, ``_ctx``, ``input_ids``,
``n_tokens``) and its ctypes bindings; :class:`~kag.lm.llamacpp.LlamaCppLM` is its only user
and holds the lock that keeps calls to one model from overlapping.
"""

from __future__ import annotations

import codecs
import ctypes
import itertools
import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from kag.errors import InvalidInputError, InvalidOutputError, LanguageModelError
from kag.lm.guards import Repetition, RepetitionGuard
from kag.lm.llamacpp_cache import PrefixCache

__all__ = ["MAX_GRAMMARS", "DecodingSettings", "GrammarDecoder", "GrammarSampler", "empty_timings"]

log = logging.getLogger(__name__)

MAX_GRAMMARS = 64
"""Grammars cached per model (converted text, and parsed llama.cpp samplers)."""
_MAX_CUTS = 4  # repetition cuts per answer before it counts as invalid
_PENALTY_WINDOW = 64  # tokens repeat_penalty looks back on (llama-cpp-python's default)


@dataclass(frozen=True)
class DecodingSettings:
    """What one answer is decoded with (read from the model's settings at each call)."""

    name: str
    n_ctx: int
    max_tokens: int
    seed: int
    temperature: float
    repeat_penalty: float
    repetition_guard: bool
    prefix_cache_states: int


def empty_timings() -> dict[str, float]:
    """The split of one call that :class:`GrammarDecoder` fills in (seconds and token counts)."""
    return {
        "prompt_eval_seconds": 0.0,
        "sample_seconds": 0.0,
        "decode_seconds": 0.0,
        "prompt_tokens_evaluated": 0.0,
        "prompt_tokens_reused": 0.0,
        "repetition_cuts": 0.0,
    }


class GrammarDecoder:
    """The decoder of one loaded model: its parsed grammars and its saved prompt prefixes."""

    def __init__(self) -> None:
        self.samplers: dict[str, Any] = {}  # schema key -> parsed llama.cpp grammar sampler (cloned per call)
        self.prefixes = PrefixCache()

    def close(self) -> None:
        """Free the parsed grammars and drop the saved states (before the model itself is closed)."""
        if self.samplers:
            from llama_cpp import llama_cpp as C

            for sampler in self.samplers.values():
                C.llama_sampler_free(sampler)
        self.samplers.clear()
        self.prefixes.clear()

    def decode(
        self,
        llama: Any,
        prompt: list[int],
        key: str,
        grammar: str,
        settings: DecodingSettings,
        timings: dict[str, float],
    ) -> tuple[str, str, int, int]:
        """Evaluate ``prompt`` (reusing a cached prefix) and sample under ``grammar``, guarded.

        Returns ``(text, finish reason, prompt tokens, completion tokens)``; ``timings``
        (see :func:`empty_timings`) is filled in as the call goes.
        """
        from llama_cpp import llama_cpp as C

        clock = time.perf_counter()
        reused = self.prefixes.reuse(llama, prompt)
        llama.n_tokens = reused  # eval first drops every cell after the reused prefix
        try:
            llama.eval(prompt[reused:])
        except Exception as exc:  # llama_decode failures surface as RuntimeError
            raise LanguageModelError(f"{settings.name} failed to evaluate the prompt: {exc}.") from exc
        self.prefixes.remember(llama, prompt, reused, capacity=settings.prefix_cache_states)
        timings["prompt_eval_seconds"] = time.perf_counter() - clock
        timings["prompt_tokens_evaluated"] = float(len(prompt) - reused)
        timings["prompt_tokens_reused"] = float(reused)

        sampler = GrammarSampler(C, self._parsed(llama, C, key, grammar), llama.n_vocab())
        try:
            return _Loop(llama, C, sampler, prompt, settings, timings).run()
        except RuntimeError as exc:  # llama_decode failed (e.g. the context filled up during a cut)
            raise LanguageModelError(f"{settings.name} failed while decoding: {exc}.") from exc
        finally:
            sampler.close()

    def _parsed(self, llama: Any, C: Any, key: str, grammar: str) -> Any:
        """llama.cpp's sampler for ``grammar``, parsed once per schema key."""
        pristine = self.samplers.get(key)
        if pristine is None:
            pristine = C.llama_sampler_init_grammar(llama._model.vocab, grammar.encode("utf-8"), b"root")
            if not pristine:
                raise InvalidInputError("llama.cpp rejected the grammar built from the output schema; simplify it.")
            if len(self.samplers) >= MAX_GRAMMARS:
                C.llama_sampler_free(self.samplers.pop(next(iter(self.samplers))))
            self.samplers[key] = pristine
        return pristine


class _Loop:
    """One answer's token loop: sample, accept, evaluate; cut and close a repetition when the guard sees one."""

    def __init__(
        self,
        llama: Any,
        C: Any,
        sampler: GrammarSampler,
        prompt: list[int],
        settings: DecodingSettings,
        timings: dict[str, float],
    ) -> None:
        self.llama, self.C, self.sampler, self.prompt = llama, C, sampler, prompt
        self.settings, self.timings = settings, timings
        self.vocab = llama._model.vocab
        self.tokens: list[int] = []
        self.pieces: list[bytes] = []

    def run(self) -> tuple[str, str, int, int]:
        llama, settings, timings, tokens, pieces = self.llama, self.settings, self.timings, self.tokens, self.pieces
        n_vocab = llama.n_vocab()
        rng = np.random.default_rng(settings.seed)
        guard = RepetitionGuard()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        finish = "length"
        while len(tokens) < settings.max_tokens and len(self.prompt) + len(tokens) < settings.n_ctx:
            clock = time.perf_counter()
            logits = np.ctypeslib.as_array(llama._ctx.get_logits_ith(-1), shape=(n_vocab,))
            token = self.sampler.pick(self._penalized(logits), settings.temperature, rng)
            timings["sample_seconds"] += time.perf_counter() - clock
            if self.C.llama_vocab_is_eog(self.vocab, token):
                finish = "stop"
                break
            self.sampler.accept(token)
            tokens.append(token)
            piece = _piece(self.C, self.vocab, token)
            pieces.append(piece)
            repetition = guard.feed(decoder.decode(piece)) if settings.repetition_guard else None
            clock = time.perf_counter()
            if repetition is None:
                llama.eval([token])
            elif not self._cut(repetition):
                timings["decode_seconds"] += time.perf_counter() - clock
                raise InvalidOutputError(
                    f"the answer started repeating itself ({repetition.description}) and could not be cut "
                    "there; say each thing once and keep the answer short",
                    raw=guard.text,
                )
            else:
                timings["repetition_cuts"] += 1
                log.info("%s: cut a repetition (%s)", settings.name, repetition.description)
                guard, decoder = RepetitionGuard(), codecs.getincrementaldecoder("utf-8")(errors="replace")
                if guard.feed(decoder.decode(b"".join(pieces))) is not None or timings["repetition_cuts"] > _MAX_CUTS:
                    raise InvalidOutputError(
                        f"the answer kept repeating itself ({repetition.description}); say each thing once",
                        raw=guard.text,
                    )
            timings["decode_seconds"] += time.perf_counter() - clock
        text = b"".join(pieces).decode("utf-8", errors="replace")
        return text, finish, len(self.prompt), len(tokens)

    def _penalized(self, logits: Any) -> Any:
        penalty = self.settings.repeat_penalty
        if penalty == 1.0:
            return logits
        recent = np.array(sorted(set((self.prompt + self.tokens)[-_PENALTY_WINDOW:])), dtype=np.intc)
        out = np.array(logits, copy=True)
        hit = out[recent]
        out[recent] = np.where(hit > 0, hit / penalty, hit * penalty)
        return out

    def _cut(self, repetition: Repetition) -> bool:
        """Roll the answer back to ``repetition.cut`` and close it there; ``False`` if the grammar refuses."""
        llama, sampler, tokens, pieces = self.llama, self.sampler, self.tokens, self.pieces
        text = b"".join(pieces).decode("utf-8", errors="replace")
        cut = len(text[: repetition.cut].encode("utf-8"))
        ends = list(itertools.accumulate(len(p) for p in pieces))
        keep = sum(1 for end in ends if end <= cut)
        kept_bytes = ends[keep - 1] if keep else 0
        missing = b"".join(pieces)[kept_bytes:cut] + repetition.closer.encode("utf-8")
        forced = list(llama.tokenize(missing, add_bos=False, special=False))
        sampler.restart(tokens[:keep])
        for token in forced:
            if not sampler.allows(token):
                return False
            sampler.accept(token)
        del tokens[keep:], pieces[keep:]
        tokens.extend(forced)
        pieces.extend(_piece(self.C, self.vocab, t) for t in forced)
        llama.n_tokens = len(self.prompt) + keep  # eval drops the rolled-back cells from the KV cache first
        llama.eval(forced)
        return True


class GrammarSampler:
    """llama.cpp's grammar sampler, asked about one token first (llama.cpp's own fast path).

    Applying a grammar to all ~49k candidates at every step is the expensive part
    of constrained sampling; most of the time the model's favourite token is
    allowed, so it is checked alone and the whole vocabulary is masked only when
    it is refused. Greedy decoding picks exactly the same tokens either way.
    """

    def __init__(self, C: Any, pristine: Any, n_vocab: int) -> None:
        self.C = C
        self._pristine, self.n_vocab = pristine, n_vocab
        self._sampler = C.llama_sampler_clone(pristine)
        self._one = (C.llama_token_data * 1)()
        self._one_array = C.llama_token_data_array(data=self._one, size=1, selected=-1, sorted=False)
        self._all = (C.llama_token_data * n_vocab)()
        self._all_np = np.ctypeslib.as_array(self._all)
        self._ids = np.arange(n_vocab, dtype=np.intc)

    def allows(self, token: int) -> bool:
        """Whether the grammar, in its current state, lets ``token`` come next."""
        self._one[0].id, self._one[0].logit, self._one[0].p = token, 0.0, 0.0
        self._one_array.size, self._one_array.selected, self._one_array.sorted = 1, -1, False
        self.C.llama_sampler_apply(self._sampler, ctypes.byref(self._one_array))
        return bool(np.isfinite(self._one[0].logit))

    def pick(self, logits: Any, temperature: float, rng: Any) -> int:
        """The greedy (or sampled, ``temperature > 0``) token among those the grammar allows."""
        if temperature <= 0:
            first = int(np.argmax(logits))
        else:
            probs = _softmax(logits / temperature)
            first = int(rng.choice(len(probs), p=probs))
        if self.allows(first):
            return first
        self._all_np["id"] = self._ids
        self._all_np["logit"] = logits
        self._all_np["p"] = 0.0
        array = self.C.llama_token_data_array(data=self._all, size=self.n_vocab, selected=-1, sorted=False)
        self.C.llama_sampler_apply(self._sampler, ctypes.byref(array))
        masked = self._all_np["logit"]
        if temperature <= 0:
            return int(np.argmax(masked))
        # sampling the masked distribution after one rejected draw is exact rejection sampling
        probs = _softmax(masked / temperature)
        return int(rng.choice(len(probs), p=probs))

    def accept(self, token: int) -> None:
        """Advance the grammar past ``token``."""
        self.C.llama_sampler_accept(self._sampler, token)

    def restart(self, tokens: list[int]) -> None:
        """Back to the grammar state after ``tokens`` (replayed from the pristine grammar)."""
        self.C.llama_sampler_free(self._sampler)
        self._sampler = self.C.llama_sampler_clone(self._pristine)
        for token in tokens:
            self.accept(token)

    def close(self) -> None:
        """Free this answer's clone of the grammar (the pristine one stays cached)."""
        if self._sampler is not None:
            self.C.llama_sampler_free(self._sampler)
            self._sampler = None


def _piece(C: Any, vocab: Any, token: int) -> bytes:
    """The bytes a token stands for (special tokens render as nothing)."""
    buffer = ctypes.create_string_buffer(64)
    size = int(C.llama_token_to_piece(vocab, token, buffer, 64, 0, False))
    return buffer.raw[: max(size, 0)]


def _softmax(values: Any) -> Any:
    finite = np.where(np.isfinite(values), values, -np.inf)
    shifted = np.exp(finite - np.max(finite))
    return shifted / shifted.sum()
