"""Semantic embedders that run offline: WordLlama (package weights), ONNX models, combinations.

WordLlama runs its real 32,000 x 256 table from the installed ``wordllama``
wheel. ``OnnxEmbedder`` runs real onnxruntime sessions and real ``tokenizers``
tokenizers on tiny artifacts built here: an embedding-lookup ONNX graph (made
with the ``onnx`` helper package) and a word-level ``tokenizer.json``, so the
expected vectors are known exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kag.errors import ConfigError, InvalidInputError
from kag.rag.combined_embedder import CombinedEmbedder
from kag.rag.embedders import Embedder, HashEmbedder
from kag.rag.onnx_embedder import OnnxEmbedder
from kag.rag.wordllama_embedder import WordLlamaEmbedder

ROOT = Path(__file__).resolve().parents[2]

# -- WordLlama ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wordllama() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


def test_wordllama_loads_from_the_package_without_any_network(tmp_path: Path) -> None:
    # a fresh interpreter with sockets disabled and an empty HOME: loading and embedding
    # must neither connect, nor import the wordllama package (whose loader downloads),
    # nor create its ~/.cache/wordllama; the vectors must equal wordllama's own inference
    script = textwrap.dedent(
        """
        import json, socket, sys
        def refuse(*args, **kwargs):
            raise OSError("network disabled in this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from kag.rag.wordllama_embedder import WordLlamaEmbedder, WORDLLAMA_FILES
        emb = WordLlamaEmbedder()
        texts = ["The capital of France is Paris.", "Germny", "", "with statement and context managers"]
        ours = emb.embed_sync(texts)
        report = {"imported": "wordllama" in sys.modules, "dims": list(ours.shape)}
        # reference: the package's own inference class over the same two files
        from importlib import metadata
        from safetensors import safe_open
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference
        dist = metadata.distribution("wordllama")
        with safe_open(str(dist.locate_file(WORDLLAMA_FILES.weights)), framework="np") as f:
            table = f.get_tensor(WORDLLAMA_FILES.tensor)
        ref = WordLlamaInference(table, Tokenizer.from_file(str(dist.locate_file(WORDLLAMA_FILES.tokenizer))))
        theirs = ref.embed([t for t in texts if t], norm=True)
        import numpy as np
        report["max_diff"] = float(np.abs(theirs - ours[[0, 1, 3]]).max())
        report["empty_norm"] = float(np.linalg.norm(ours[2]))
        print(json.dumps(report))
        """
    )
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["imported"] is False
    assert report["dims"] == [4, 256]
    assert report["max_diff"] < 1e-5
    assert report["empty_norm"] == 0.0
    assert not (tmp_path / ".cache" / "wordllama").exists()


def test_wordllama_piecewise_tokenization_equals_the_full_tokenizer(wordllama: WordLlamaEmbedder) -> None:
    from importlib import metadata
    from pydoc_data.topics import topics

    from tokenizers import Tokenizer

    from kag.rag.wordllama_embedder import WORDLLAMA_FILES

    path = metadata.distribution("wordllama").locate_file(WORDLLAMA_FILES.tokenizer)
    reference = Tokenizer.from_file(str(path))
    texts = [topics[k][i : i + 900] for k in sorted(topics)[:40] for i in (0, 900)]
    texts += ["", " ", "   ", "  two  spaces ", "tab\tand\nnewline", "émigré naïve 日本語 🙂", "▁▁ odd ▁", "Germny"]
    expected = [e.ids for e in reference.encode_batch(texts, add_special_tokens=False)]
    assert wordllama.token_ids(texts) == expected
    assert wordllama.token_ids(texts) == expected  # again, now from the piece cache


def test_wordllama_is_an_embedder_with_a_versioned_name(wordllama: WordLlamaEmbedder) -> None:
    assert isinstance(wordllama, Embedder)
    assert wordllama.dimensions == 256
    assert wordllama.name == "wordllama-l2_supercat-256-0.4.0.post1"


async def test_wordllama_embeds_meaning(wordllama: WordLlamaEmbedder) -> None:
    berlin, german, bread = await wordllama.embed(
        ["Berlin is the capital of Germany", "The German capital city", "Sourdough bread needs a starter"]
    )
    assert float(berlin @ german) > 0.6 > 0.2 > float(berlin @ bread)
    lexical = HashEmbedder(384).embed_sync(["Berlin is the capital of Germany", "The German capital city"])
    assert float(berlin @ german) > float(lexical[0] @ lexical[1]) + 0.2  # meaning beyond shared words


async def test_wordllama_finds_the_python_topic_a_question_means(wordllama: WordLlamaEmbedder) -> None:
    from pydoc_data.topics import topics

    keys = ["with", "lambda", "for", "import", "try", "yield"]
    docs = await wordllama.embed([topics[k][:800] for k in keys])
    for question, topic in (
        ("make a small anonymous function in one line", "lambda"),
        ("how do I handle errors in my code", "try"),
    ):
        (q,) = await wordllama.embed([question])
        assert keys[int(np.argmax(docs @ q))] == topic, question


async def test_wordllama_batches_agree_and_large_batches_run_off_the_loop(wordllama: WordLlamaEmbedder) -> None:
    texts = [f"city number {i} in the north of the country" for i in range(150)] + ["", "Paris"]
    whole = await wordllama.embed(texts)  # > 64 texts: worker thread
    small = WordLlamaEmbedder(batch_size=7).embed_sync(texts)
    assert whole.shape == (152, 256) and whole.dtype == np.float32
    np.testing.assert_allclose(whole, small, atol=1e-6)
    norms = np.linalg.norm(whole, axis=1)
    np.testing.assert_allclose(norms[norms > 0], 1.0, atol=1e-5)
    assert norms[150] == 0.0  # no tokens: no direction


def test_wordllama_truncated_dimensions_are_normalized_prefixes(wordllama: WordLlamaEmbedder) -> None:
    texts = ["graph databases store relations", "a recipe for bread"]
    full = wordllama.embed_sync(texts)
    short = WordLlamaEmbedder(64).embed_sync(texts)
    assert short.shape == (2, 64)
    prefix = full[:, :64] / np.linalg.norm(full[:, :64], axis=1, keepdims=True)
    np.testing.assert_allclose(short, prefix, atol=1e-5)


def test_wordllama_rejects_bad_input(wordllama: WordLlamaEmbedder) -> None:
    with pytest.raises(ConfigError, match="one of"):
        WordLlamaEmbedder(100)
    with pytest.raises(InvalidInputError, match="single string"):
        wordllama.embed_sync("one text")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="expected str"):
        wordllama.embed_sync(["ok", 3])  # type: ignore[list-item]


async def test_wordllama_serves_a_knowledge_base_search(wordllama: WordLlamaEmbedder) -> None:
    import kag
    from kag.examples.world import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCapitalOf

    kb = kag.KnowledgeBase(
        "memory://", entity_models=list(ENTITY_MODELS), relation_models=list(RELATION_MODELS), embedder=wordllama
    )
    france, japan = Country(name="France"), Country(name="Japan")
    await kb.upsert(
        [france, japan, City(name="Paris"), City(name="Tokyo"), IsCapitalOf(subj=City(name="Paris"), obj=france)]
    )
    hits = await kb.similarity_search("Country", "the French Republic", k=2)
    assert hits[0].entity.name == "France"
    await kb.aclose()


# -- ONNX --------------------------------------------------------------------------------

VOCAB = ["[PAD]", "[UNK]", "paris", "is", "the", "capital", "of", "france", "tokyo", "japan", "bread", "a", "b"]
DIMS = 8


def _table() -> np.ndarray:
    return np.random.default_rng(7).normal(size=(len(VOCAB), DIMS)).astype(np.float32)


def _tokenizer(path: Path) -> Path:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))
    return path


def _onnx_model(path: Path, *, pooled: bool = False, inputs: tuple[str, ...] = ("input_ids", "attention_mask")) -> Path:
    """An embedding-lookup graph: Gather(table, input_ids) -> (batch, tokens, DIMS), optionally mean-pooled."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph_inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"]) for name in inputs]
    nodes = [helper.make_node("Gather", ["table", inputs[0]], ["hidden"], axis=0)]
    if pooled:
        nodes.append(helper.make_node("ReduceMean", ["hidden", "axes"], ["sentence_embedding"], keepdims=0))
        output = helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", DIMS])
    else:
        nodes.append(helper.make_node("Identity", ["hidden"], ["last_hidden_state"]))
        output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", DIMS])
    init = [numpy_helper.from_array(_table(), "table"), numpy_helper.from_array(np.array([1], np.int64), "axes")]
    graph = helper.make_graph(nodes, "lookup", graph_inputs, [output], initializer=init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _expected(text: str, max_tokens: int | None = None) -> np.ndarray:
    ids = [VOCAB.index(w) if w in VOCAB else 1 for w in text.lower().split()][:max_tokens]
    vec = _table()[ids].mean(axis=0)
    return vec / np.linalg.norm(vec)


@pytest.fixture
def onnx_files(tmp_path: Path) -> tuple[Path, Path]:
    return _onnx_model(tmp_path / "lookup.onnx"), _tokenizer(tmp_path / "tokenizer.json")


async def test_onnx_embedder_mean_pools_real_runtime_output(onnx_files: tuple[Path, Path]) -> None:
    emb = OnnxEmbedder(*onnx_files, batch_size=2)
    assert isinstance(emb, Embedder) and emb.dimensions == DIMS
    assert emb.name.startswith("onnx-lookup-") and len(emb.name) == len("onnx-lookup-") + 12
    texts = ["Paris is the capital of France", "bread", "Tokyo", "the capital of Japan is Tokyo", "a b", "zebra"]
    out = await emb.embed(texts)
    assert out.shape == (6, DIMS) and out.dtype == np.float32
    for row, text in zip(out, texts, strict=True):
        np.testing.assert_allclose(row, _expected(text), atol=1e-5)  # padding never leaks into the mean


def test_onnx_embedder_batch_size_and_order_do_not_change_vectors(onnx_files: tuple[Path, Path]) -> None:
    texts = ["a", "paris is the capital of france", "b a", "tokyo", "japan is a b", "bread bread bread", "the"]
    one = OnnxEmbedder(*onnx_files, batch_size=1).embed_sync(texts)
    many = OnnxEmbedder(*onnx_files, batch_size=3).embed_sync(texts)
    np.testing.assert_allclose(one, many, atol=1e-6)
    np.testing.assert_allclose(many[1], _expected(texts[1]), atol=1e-5)


def test_onnx_embedder_truncates_to_max_length(onnx_files: tuple[Path, Path]) -> None:
    emb = OnnxEmbedder(*onnx_files, max_length=3)
    (row,) = emb.embed_sync(["paris is the capital of france"])
    np.testing.assert_allclose(row, _expected("paris is the", max_tokens=3), atol=1e-5)


def test_onnx_embedder_uses_a_pooled_output_as_is(tmp_path: Path) -> None:
    model = _onnx_model(tmp_path / "pooled.onnx", pooled=True)
    emb = OnnxEmbedder(model, _tokenizer(tmp_path / "tok.json"))
    (row,) = emb.embed_sync(["tokyo japan"])
    np.testing.assert_allclose(row, _expected("tokyo japan"), atol=1e-5)


def test_onnx_embedder_feeds_token_type_ids(tmp_path: Path) -> None:
    model = _onnx_model(tmp_path / "bert.onnx", inputs=("input_ids", "attention_mask", "token_type_ids"))
    emb = OnnxEmbedder(model, _tokenizer(tmp_path / "tok.json"))
    np.testing.assert_allclose(emb.embed_sync(["bread"])[0], _expected("bread"), atol=1e-5)


def test_onnx_embedder_errors_are_typed(tmp_path: Path, onnx_files: tuple[Path, Path]) -> None:
    model, tokenizer = onnx_files
    with pytest.raises(ConfigError, match="does not exist"):
        OnnxEmbedder(tmp_path / "missing.onnx", tokenizer)
    with pytest.raises(ConfigError, match="does not exist"):
        OnnxEmbedder(model, tmp_path / "missing.json")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00not an onnx model" * 50)
    with pytest.raises(ConfigError, match="cannot load"):
        OnnxEmbedder(garbage, tokenizer)
    bad_tok = tmp_path / "bad.json"
    bad_tok.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"tokenizer\.json"):
        OnnxEmbedder(model, bad_tok)
    odd = _onnx_model(tmp_path / "odd.onnx", inputs=("input_ids", "pixel_values"))
    with pytest.raises(ConfigError, match="pixel_values"):
        OnnxEmbedder(odd, tokenizer)
    with pytest.raises(ConfigError, match="batch_size"):
        OnnxEmbedder(model, tokenizer, batch_size=0)
    with pytest.raises(InvalidInputError):
        OnnxEmbedder(model, tokenizer).embed_sync("one text")  # type: ignore[arg-type]


# -- combined ----------------------------------------------------------------------------


async def test_combined_cosine_is_the_weighted_mean_of_the_parts() -> None:
    small, large = HashEmbedder(64), HashEmbedder(512, trigram_weight=0.0)
    combined = CombinedEmbedder([(small, 1.0), (large, 3.0)])
    assert combined.dimensions == 576 and isinstance(combined, Embedder)
    assert combined.name == f"combined({small.name}*0.25+{large.name}*0.75)"
    texts = ["Germany", "Germny", "the capital of Germany", ""]
    out = await combined.embed(texts)
    a, b = small.embed_sync(texts), large.embed_sync(texts)
    for i in range(3):
        for j in range(3):
            np.testing.assert_allclose(out[i] @ out[j], 0.25 * (a[i] @ a[j]) + 0.75 * (b[i] @ b[j]), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(out[:3], axis=1), 1.0, atol=1e-5)


def test_combined_rejects_bad_parts() -> None:
    with pytest.raises(ConfigError):
        CombinedEmbedder([])
    with pytest.raises(ConfigError, match="positive"):
        CombinedEmbedder([(HashEmbedder(64), 0.0)])
