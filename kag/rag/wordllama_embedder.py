"""``WordLlamaEmbedder``: static semantic token embeddings from the ``wordllama`` package.

WordLlama (MIT) ships a 32,000 x 256 token-embedding table distilled from a
large language model's input embeddings, with its Llama-2 tokenizer, inside
its wheel (about 18 MB). A text's vector is the mean of its tokens' rows: no
neural network runs, so it embeds thousands of passages a second on one core.

The package's own loader looks for its tokenizer in a folder that does not
exist and then downloads it from a model hub; this module never imports the
package: it reads the two files straight from the installed distribution
(version and sha256 pinned), so nothing can reach the network.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from kag.errors import ConfigError, InvalidInputError
from kag.files import sha256_file
from kag.validation import check_int
from kag.version import pip_install

__all__ = ["WORDLLAMA_FILES", "WordLlamaEmbedder", "WordLlamaFiles"]

_INLINE_BATCH = 64  # smaller batches run on the event loop; larger ones in a worker thread
_PIECE = re.compile("▁*[^▁]+|▁+")  # a word with the "▁"s before it, or trailing "▁"s
_MAX_CACHED_PIECES = 500_000


@dataclass(frozen=True)
class WordLlamaFiles:
    """The pinned wordllama release and the two files kag reads from it."""

    distribution: str = "wordllama"
    version: str = "0.4.0.post1"
    weights: str = "wordllama/weights/l2_supercat_256.safetensors"
    weights_sha256: str = "64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5"
    tokenizer: str = "wordllama/tokenizers/l2_supercat_tokenizer_config.json"
    tokenizer_sha256: str = "93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68"
    tensor: str = "embedding.weight"


WORDLLAMA_FILES = WordLlamaFiles()
_ALLOWED_DIMENSIONS = (64, 128, 256)  # matryoshka-trained: prefixes of the 256 columns still work


def _locate(files: WordLlamaFiles) -> tuple[Path, Path]:
    hint = f"install it with `{pip_install('embeddings')}` (or `pip install {files.distribution}=={files.version}`)"
    try:
        dist = metadata.distribution(files.distribution)
    except metadata.PackageNotFoundError:
        raise ConfigError(f"WordLlamaEmbedder needs the {files.distribution!r} package: {hint}.") from None
    if dist.version != files.version:
        raise ConfigError(
            f"{files.distribution} {dist.version} is installed but kag pins {files.version} (stored vectors "
            f"depend on its weights): run `pip install {files.distribution}=={files.version}`."
        )
    paths = []
    for rel, digest in ((files.weights, files.weights_sha256), (files.tokenizer, files.tokenizer_sha256)):
        path = Path(str(dist.locate_file(rel)))
        if not path.is_file():
            raise ConfigError(f"{path} is missing from the {files.distribution} install: reinstall it ({hint}).")
        actual = sha256_file(path)
        if actual != digest:
            raise ConfigError(
                f"{path} has sha256 {actual}, expected {digest}: reinstall with "
                f"`pip install --force-reinstall --no-deps {files.distribution}=={files.version}`."
            )
        paths.append(path)
    return paths[0], paths[1]


class WordLlamaEmbedder:
    """Mean-pooled static token embeddings (WordLlama ``l2_supercat``), L2-normalized.

    Args:
        dimensions: 256 (full), or 128 / 64 (the first columns: the table was
            trained so that prefixes still embed well).
        batch_size: texts tokenized per batch.

    Raises:
        ConfigError: the package is missing, another version, or its files fail the sha256 check.
    """

    def __init__(self, dimensions: int = 256, *, batch_size: int = 1024) -> None:
        if isinstance(dimensions, bool) or dimensions not in _ALLOWED_DIMENSIONS:
            raise ConfigError(f"WordLlamaEmbedder dimensions must be one of {_ALLOWED_DIMENSIONS}, got {dimensions!r}.")
        check_int(batch_size, name="batch_size")
        self.dimensions = int(dimensions)
        self.batch_size = batch_size
        weights_path, tokenizer_path = _locate(WORDLLAMA_FILES)
        try:
            from safetensors import safe_open
            from tokenizers import Tokenizer
        except ImportError as exc:  # both are dependencies of wordllama itself
            raise ConfigError(f"WordLlamaEmbedder needs safetensors and tokenizers ({exc}).") from exc
        with safe_open(str(weights_path), framework="np") as handle:
            table = handle.get_tensor(WORDLLAMA_FILES.tensor)
        self._table = np.ascontiguousarray(table[:, : self.dimensions], dtype=np.float32)
        # The tokenizer's normalizer only prepends "▁" and turns spaces into "▁", and it has no
        # pre-tokenizer: BPE runs over the whole text. No vocabulary piece has a "▁" after another
        # character except runs of "▁", so BPE never merges across the start of a word: splitting
        # the normalized text at word starts and tokenizing each piece alone gives the same ids
        # (checked against the full tokenizer in the tests). Pieces repeat across texts, so their
        # ids are cached: tokenization was 85% of the embedding time.
        tokenizer: Any = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.normalizer = None
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._pieces_tokenizer = tokenizer
        self._piece_ids: dict[str, list[int]] = {}
        self._lock = threading.Lock()  # guards the piece cache

    @property
    def name(self) -> str:
        """``wordllama-l2_supercat-<dimensions>-<version>``: stored with persisted vectors."""
        return f"wordllama-l2_supercat-{self.dimensions}-{WORDLLAMA_FILES.version}"

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The tokenizer's ids of each text (no special tokens), the same as ``encode(text).ids``."""
        split = [_PIECE.findall("▁" + text.replace(" ", "▁")) if text else [] for text in texts]
        with self._lock:
            cache = self._piece_ids
            new = list({piece for pieces in split for piece in pieces if piece not in cache})
            if new:
                if len(cache) + len(new) > _MAX_CACHED_PIECES:
                    cache.clear()
                encodings = self._pieces_tokenizer.encode_batch(new, add_special_tokens=False)
                cache.update(zip(new, (e.ids for e in encodings), strict=True))
            result: list[list[int]] = []
            for pieces in split:
                ids: list[int] = []
                for piece in pieces:
                    ids.extend(cache[piece])
                result.append(ids)
        return result

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (blocking): rows are L2-normalized; a text without tokens gives zeros.

        The mean of the token rows, normalized, equals their normalized sum.
        """
        if isinstance(texts, str):
            raise InvalidInputError("embed() takes a sequence of texts, not a single string.")
        items = list(texts)
        for index, text in enumerate(items):
            if not isinstance(text, str):
                raise InvalidInputError(f"text #{index} is {type(text).__name__}, expected str.")
        out = np.zeros((len(items), self.dimensions), dtype=np.float32)
        table, last = self._table, self._table.shape[0] - 1
        for start in range(0, len(items), self.batch_size):
            batch = items[start : start + self.batch_size]
            # one small gather per text: measured 30x faster than one huge gather + reduceat,
            # whose temporary (tokens x dimensions) array falls out of the caches
            for row, ids in enumerate(self.token_ids(batch), start=start):
                if ids:
                    out[row] = table[np.clip(ids, 0, last)].sum(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; batches over 64 texts run in a worker thread."""
        if isinstance(texts, str):
            raise InvalidInputError("embed() takes a sequence of texts, not a single string.")
        if len(texts) <= _INLINE_BATCH:
            return self.embed_sync(texts)
        return await asyncio.to_thread(self.embed_sync, list(texts))
