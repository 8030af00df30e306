"""``OnnxEmbedder``: sentence-transformer exports run with onnxruntime, on CPU, offline.

Give it a ``model.onnx`` (for example all-MiniLM-L6-v2 exported by optimum or
``torch.onnx``) and the matching Hugging Face ``tokenizer.json``; nothing is
downloaded. Texts are tokenized in batches (sorted by length so each batch pads
little), run through the model, mean-pooled over the attention mask and
L2-normalized: the sentence-transformers recipe. A model whose output is
already pooled (2-D, e.g. ``sentence_embedding``) is used as is.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kag.errors import ConfigError, EmbeddingError, InvalidInputError
from kag.rag.embedders import check_matrix
from kag.runtime import available_cores
from kag.validation import check_int
from kag.version import pip_install

__all__ = ["OnnxEmbedder"]

_INSTALL = f"install them with `{pip_install('onnx')}`"
_OUTPUT_PREFERENCE = ("sentence_embedding", "last_hidden_state", "token_embeddings")


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


class OnnxEmbedder:
    """A transformer embedding model in ONNX format, with a ``tokenizers`` tokenizer.

    Args:
        model_path: the ``.onnx`` file. Inputs named ``input_ids``, ``attention_mask``
            and (optionally) ``token_type_ids`` are fed; other inputs are refused.
        tokenizer_path: the model's ``tokenizer.json``.
        batch_size: texts per model run.
        max_length: tokens kept per text (longer texts are truncated).
        normalize: L2-normalize the pooled vectors (kag stores normalized vectors).
        n_threads: onnxruntime intra-op threads; default: every available core.
        name: the identifier stored with vectors; default ``onnx-<file stem>-<sha256[:12]>``.

    Raises:
        ConfigError: a missing file, an unreadable model or tokenizer, unsupported
            model inputs, or onnxruntime / tokenizers not installed.
    """

    def __init__(
        self,
        model_path: str | Path,
        tokenizer_path: str | Path,
        *,
        batch_size: int = 32,
        max_length: int = 256,
        normalize: bool = True,
        n_threads: int | None = None,
        name: str | None = None,
    ) -> None:
        check_int(batch_size, name="batch_size")
        check_int(max_length, name="max_length")
        if n_threads is not None:
            check_int(n_threads, name="n_threads (or None)")
        self.model_path = Path(model_path).expanduser()
        self.tokenizer_path = Path(tokenizer_path).expanduser()
        for what, path in (("model", self.model_path), ("tokenizer", self.tokenizer_path)):
            if not path.is_file():
                raise ConfigError(f"The ONNX {what} file {path} does not exist: pass the path of an existing file.")
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ConfigError(f"OnnxEmbedder needs onnxruntime and tokenizers: {_INSTALL}.") from exc
        self.batch_size = batch_size
        self.max_length = max_length
        self.normalize = bool(normalize)
        self.n_threads = n_threads or available_cores()
        try:
            tokenizer: Any = Tokenizer.from_file(str(self.tokenizer_path))
        except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
            raise ConfigError(
                f"{self.tokenizer_path} is not a Hugging Face tokenizer.json ({exc}); pass the model's tokenizer.json."
            ) from exc
        pad_id = tokenizer.padding.get("pad_id", 0) if tokenizer.padding else (tokenizer.token_to_id("[PAD]") or 0)
        tokenizer.enable_padding(pad_id=pad_id)  # to the longest text of each batch
        tokenizer.enable_truncation(max_length=max_length)
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.n_threads
        options.inter_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(
                str(self.model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own non-exported exception types
            raise ConfigError(f"onnxruntime cannot load {self.model_path} ({exc}); pass a valid .onnx model.") from exc
        self._inputs = self._check_inputs()
        outputs = [o.name for o in self._session.get_outputs()]
        self._output = next((n for n in _OUTPUT_PREFERENCE if n in outputs), outputs[0])
        self._digest = _file_digest(self.model_path)
        self._name = name or f"onnx-{self.model_path.stem}-{self._digest[:12]}"
        self._lock = threading.Lock()  # one run at a time: the session already uses every core
        self.dimensions = int(self._run(["dimensions probe"]).shape[1])

    def _check_inputs(self) -> dict[str, type[np.integer[Any]]]:
        known = {"input_ids", "attention_mask", "token_type_ids"}
        inputs: dict[str, type[np.integer[Any]]] = {}
        for spec in self._session.get_inputs():
            if spec.name not in known:
                raise ConfigError(
                    f"{self.model_path} has an input {spec.name!r}; OnnxEmbedder feeds only "
                    f"{sorted(known)} (export the model with the standard transformer inputs)."
                )
            inputs[spec.name] = np.int32 if spec.type == "tensor(int32)" else np.int64
        if "input_ids" not in inputs:
            raise ConfigError(f"{self.model_path} has no 'input_ids' input; it is not a text embedding model.")
        return inputs

    @property
    def name(self) -> str:
        """A stable identifier of the model file (stored with persisted vectors)."""
        return self._name

    def _run(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings])
        mask = np.array([e.attention_mask for e in encodings])
        feed: dict[str, np.ndarray] = {}
        for input_name, dtype in self._inputs.items():
            if input_name == "input_ids":
                feed[input_name] = ids.astype(dtype)
            elif input_name == "attention_mask":
                feed[input_name] = mask.astype(dtype)
            else:
                feed[input_name] = np.array([e.type_ids for e in encodings], dtype=dtype)
        try:
            (output,) = self._session.run([self._output], feed)
        except Exception as exc:
            raise EmbeddingError(f"onnxruntime failed on {self.model_path.name}: {exc}") from exc
        output = np.asarray(output, dtype=np.float32)
        if output.ndim == 3:  # token vectors: mean over the real (unpadded) tokens
            weights = mask.astype(np.float32)[..., None]
            counts = np.maximum(weights.sum(axis=1), 1.0)
            output = (output * weights).sum(axis=1) / counts
        if output.ndim != 2 or output.shape[0] != len(texts):
            raise EmbeddingError(
                f"{self.model_path.name} output {self._output!r} has shape {output.shape}; expected "
                "(batch, dimensions) or (batch, tokens, dimensions)."
            )
        return output

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (blocking), ``batch_size`` at a time, in the input order."""
        if isinstance(texts, str):
            raise InvalidInputError("embed() takes a sequence of texts, not a single string.")
        items = list(texts)
        for index, text in enumerate(items):
            if not isinstance(text, str):
                raise InvalidInputError(f"text #{index} is {type(text).__name__}, expected str.")
        out = np.zeros((len(items), self.dimensions), dtype=np.float32)
        # similar lengths share a batch, so little compute goes to padding
        order = sorted(range(len(items)), key=lambda i: len(items[i]))
        for start in range(0, len(order), self.batch_size):
            picked = order[start : start + self.batch_size]
            out[picked] = self._run([items[i] for i in picked])
        if not self.normalize:
            return out
        return check_matrix(out, len(items), self.dimensions, self._name)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in a worker thread (a transformer run blocks for milliseconds or more)."""
        if isinstance(texts, str):
            raise InvalidInputError("embed() takes a sequence of texts, not a single string.")
        return await asyncio.to_thread(self.embed_sync, list(texts))
