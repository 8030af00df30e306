"""AutoLoader: files, directories, inline text, bytes, HTML, PDF and URLs."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kag.datamodels.documents import Document, document_id
from kag.errors import InvalidInputError, LoaderError, UnsafeURLError
from kag.rag.loaders import AutoLoader, decode_bytes, find_title, html_to_text, list_directory
from tests.helpers.http_server import LocalHTTPServer, Reply
from tests.rag.conftest import StreamingServer

PdfMaker = Callable[..., bytes]


@pytest.fixture
def loader() -> AutoLoader:
    return AutoLoader()


# ------------------------------------------------------------------ the str rule


async def test_inline_text_rules(loader: AutoLoader, tmp_path: Path) -> None:
    multi = "# Notes\nfirst line\nsecond line"
    [doc] = await loader.load(multi)
    assert doc.text == multi and doc.source == "inline"
    assert doc.metadata["title"] == "Notes"
    assert doc.id == document_id("inline", multi)
    [doc] = await loader.load("Paris is the capital of France.")
    assert doc.metadata["title"] == "Paris is the capital of France."
    [doc] = await loader.load("hello")  # one plain token: text
    assert doc.text == "hello"


@pytest.mark.parametrize("missing", ["notes.md", "docs/readme", "./x", "C:\\data\\a.txt"])
async def test_path_like_strings_that_do_not_exist(loader: AutoLoader, missing: str) -> None:
    with pytest.raises(LoaderError, match="file not found"):
        await loader.load(missing)


async def test_missing_path_object_is_not_found(loader: AutoLoader, tmp_path: Path) -> None:
    with pytest.raises(LoaderError, match="file not found"):
        await loader.load(tmp_path / "nope.txt")


async def test_existing_path_with_spaces_is_a_file(loader: AutoLoader, tmp_path: Path) -> None:
    path = tmp_path / "my notes.txt"
    path.write_text("the content", encoding="utf-8")
    [doc] = await loader.load(str(path))
    assert doc.text == "the content"
    assert doc.metadata["path"] == str(path.resolve())


async def test_empty_inline_text_is_an_error(loader: AutoLoader) -> None:
    with pytest.raises(LoaderError, match="empty"):
        await loader.load("   \n  ")


async def test_unsupported_types(loader: AutoLoader) -> None:
    with pytest.raises(InvalidInputError):
        await loader.load(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        await loader.load(["ok text", 3.5])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError):
        await loader.load("x", on_error="ignore")  # type: ignore[arg-type]


# ------------------------------------------------------------------ files and directories


async def test_markdown_file_metadata(loader: AutoLoader, tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text("intro line\n\n## Install kag\n\nrun pip\n", encoding="utf-8")
    [doc] = await loader.load(path)
    assert doc.mime_type == "text/markdown"
    assert doc.metadata == {
        "source": str(path.resolve()),
        "path": str(path.resolve()),
        "title": "Install kag",
    }
    assert doc.id == document_id(str(path.resolve()), doc.text)
    [again] = await loader.load(path)
    assert again.id == doc.id  # idempotent


async def test_title_falls_back_to_file_name(loader: AutoLoader, tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("a,b\n1,2\n", encoding="utf-8")
    [doc] = await loader.load(path)
    assert doc.metadata["title"] == "data.csv"


async def test_directory_walk(loader: AutoLoader, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\ntext a", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("print('b')\n", encoding="utf-8")
    (tmp_path / "sub" / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0")
    (tmp_path / ".hidden.txt").write_text("secret", encoding="utf-8")
    for ignored in (".git", "node_modules", "__pycache__", ".venv", ".cache"):
        (tmp_path / ignored).mkdir()
        (tmp_path / ignored / "x.txt").write_text("ignored", encoding="utf-8")
    docs = await loader.load(tmp_path)
    names = [Path(d.metadata["path"]).name for d in docs]
    assert names == ["a.md", "b.py"]
    assert [p.name for p in list_directory(tmp_path)] == ["a.md", "b.py"]
    # a str path to a directory works the same
    assert [d.id for d in await loader.load(str(tmp_path))] == [d.id for d in docs]


async def test_bad_file_in_directory_does_not_hide_the_good_ones(loader: AutoLoader, tmp_path: Path) -> None:
    (tmp_path / "good.txt").write_text("good text", encoding="utf-8")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    (tmp_path / "binary.txt").write_bytes(b"\0\1\2\3" * 100)
    with pytest.raises(LoaderError):
        await loader.load(tmp_path)
    report = await loader.load_with_report(tmp_path)
    assert [d.text for d in report.documents] == ["good text"]
    failed = sorted(Path(f.source).name for f in report.errors)
    assert failed == ["binary.txt", "broken.pdf"]
    assert all(Path(f.source).name in str(f.error) for f in report.errors)
    skipped = await loader.load(tmp_path, on_error="skip")
    assert [d.text for d in skipped] == ["good text"]


async def test_empty_directory_is_reported(loader: AutoLoader, tmp_path: Path) -> None:
    report = await loader.load_with_report([tmp_path, "fine text here"])
    assert len(report.documents) == 1 and len(report.errors) == 1
    assert "no loadable files" in str(report.errors[0].error)


async def test_mixed_list_keeps_order_and_dedupes(loader: AutoLoader, tmp_path: Path) -> None:
    path = tmp_path / "one.txt"
    path.write_text("file one", encoding="utf-8")
    given = Document.from_text("already a doc", source="mine")
    docs = await loader.load([path, "inline text one", given, b"raw bytes", path])
    assert [d.text for d in docs] == ["file one", "inline text one", "already a doc", "raw bytes"]
    assert docs[2] is given
    assert docs[3].source == "bytes"


async def test_max_bytes_for_files_and_bytes(tmp_path: Path) -> None:
    small = AutoLoader(max_bytes=10)
    path = tmp_path / "big.txt"
    path.write_text("x" * 11, encoding="utf-8")
    with pytest.raises(LoaderError, match="too large"):
        await small.load(path)
    with pytest.raises(LoaderError, match="too large"):
        await small.load(b"y" * 11)


# ------------------------------------------------------------------ decoding


def test_decoding_utf8_bom_fallback_and_binary() -> None:
    assert decode_bytes("héllo".encode(), "n") == "héllo"
    assert decode_bytes(b"\xef\xbb\xbfbom", "n") == "bom"
    assert decode_bytes("caf\u00e9 \u20ac".encode("cp1252"), "n") == "café €"
    assert decode_bytes("utf16 text".encode("utf-16"), "n") == "utf16 text"
    with pytest.raises(LoaderError, match="binary"):
        decode_bytes(b"PK\x03\x04\x00\x00binary", "archive.zip")
    with pytest.raises(LoaderError, match="decode"):
        decode_bytes(b"\x81\x8d\x8f", "n", fallback_encodings=("cp1252",))


async def test_latin1_file_loads(loader: AutoLoader, tmp_path: Path) -> None:
    path = tmp_path / "old.txt"
    path.write_bytes("Gr\u00fc\u00dfe aus K\u00f6ln".encode("latin-1"))
    [doc] = await loader.load(path)
    assert doc.text == "Grüße aus Köln"


async def test_binary_bytes_refused(loader: AutoLoader) -> None:
    with pytest.raises(LoaderError, match="binary"):
        await loader.load(b"\x00\x01\x02binary")


# ------------------------------------------------------------------ HTML and titles


def test_html_to_text_drops_script_and_style() -> None:
    html = (
        "<html><head><title> The  Page </title><style>p{color:red}</style>"
        "<script>alert('x')</script></head><body><h1>Header</h1><p>First &amp; "
        "<b>bold</b> para.</p><ul><li>one</li><li>two</li></ul>"
        "<script>var hidden = 1;</script><pre>  code\n  block</pre></body></html>"
    )
    text, title = html_to_text(html)
    assert title == "The Page"
    assert "alert" not in text and "color" not in text and "hidden" not in text
    assert "First & bold para." in text
    assert "Header" in text and "one\ntwo" in text
    assert "code\n" in text


def test_find_title() -> None:
    assert find_title("text\n# Title here #\nmore") == "Title here"
    assert find_title("Section\n=======\n\nbody") == "Section"
    assert find_title("no heading at all") is None
    assert find_title("#hashtag is not a heading") is None


async def test_html_file(loader: AutoLoader, tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text("<title>T</title><p>Body text</p><script>x()</script>", encoding="utf-8")
    [doc] = await loader.load(path)
    assert doc.text == "Body text"
    assert doc.metadata["title"] == "T"
    assert doc.mime_type == "text/html"


# ------------------------------------------------------------------ PDF


async def test_pdf_one_document_per_page(loader: AutoLoader, tmp_path: Path, pdf_bytes: PdfMaker) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf_bytes(["Page one text", "", "Page three text"], title="Report"))
    docs = await loader.load(path)
    assert [d.metadata["page"] for d in docs] == [1, 3]  # blank page 2 has no text
    assert [d.text for d in docs] == ["Page one text", "Page three text"]
    assert all(d.mime_type == "application/pdf" for d in docs)
    assert docs[0].source == f"{path.resolve()}#page=1"
    assert docs[0].metadata["path"] == str(path.resolve())
    assert docs[0].metadata["title"] == "Report"
    assert docs[0].metadata["page_count"] == 3


async def test_pdf_without_text(loader: AutoLoader, tmp_path: Path, pdf_bytes: PdfMaker) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(pdf_bytes(["", ""]))
    with pytest.raises(LoaderError, match="no extractable text"):
        await loader.load(path)


async def test_malformed_pdf_names_the_file(loader: AutoLoader, tmp_path: Path) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.7\n garbage garbage")
    with pytest.raises(LoaderError, match=r"broken\.pdf"):
        await loader.load(path)


async def test_pdf_without_pypdf(
    loader: AutoLoader, tmp_path: Path, pdf_bytes: PdfMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "x.pdf"
    path.write_bytes(pdf_bytes(["text"]))
    monkeypatch.setitem(sys.modules, "pypdf", None)  # makes `import pypdf` fail
    with pytest.raises(LoaderError, match=r"pip install 'graph-kag\[pdf\]'"):
        await loader.load(path)


# ------------------------------------------------------------------ URLs


async def test_url_html(server: LocalHTTPServer) -> None:
    server.route(
        "GET",
        "/article",
        lambda r: Reply(
            body="<html><title>Article</title><body><p>Graph text.</p></body></html>",
            headers={"Content-Type": "text/html; charset=utf-8"},
        ),
    )
    loader = AutoLoader(allow_private_networks=True)
    [doc] = await loader.load(server.url + "/article")
    assert doc.text == "Graph text."
    assert doc.metadata == {
        "source": server.url + "/article",
        "url": server.url + "/article",
        "title": "Article",
    }
    assert doc.mime_type == "text/html"


async def test_url_redirect_records_final_url(server: LocalHTTPServer) -> None:
    server.route("GET", "/old", lambda r: Reply(status=301, headers={"Location": "/new.txt"}))
    server.route("GET", "/new.txt", lambda r: "plain body")
    [doc] = await AutoLoader(allow_private_networks=True).load(server.url + "/old")
    assert doc.source == server.url + "/new.txt"
    assert doc.metadata["requested_url"] == server.url + "/old"
    assert doc.metadata["title"] == "new.txt"


async def test_url_charset_is_honoured(server: LocalHTTPServer) -> None:
    server.route(
        "GET",
        "/latin",
        lambda r: Reply(body="caf\u00e9".encode("latin-1"), headers={"Content-Type": "text/plain; charset=latin-1"}),
    )
    [doc] = await AutoLoader(allow_private_networks=True).load(server.url + "/latin")
    assert doc.text == "café"


async def test_url_pdf(server: LocalHTTPServer, pdf_bytes: PdfMaker) -> None:
    body = pdf_bytes(["Remote page"])
    server.route("GET", "/doc.pdf", lambda r: Reply(body=body, headers={"Content-Type": "application/pdf"}))
    [doc] = await AutoLoader(allow_private_networks=True).load(server.url + "/doc.pdf")
    assert doc.text == "Remote page"
    assert doc.metadata["page"] == 1
    assert doc.metadata["title"] == "doc.pdf"


async def test_url_refused_by_default(server: LocalHTTPServer) -> None:
    server.route("GET", "/x", lambda r: "never served")
    with pytest.raises(UnsafeURLError):
        await AutoLoader().load(server.url + "/x")
    assert server.requests == []
    with pytest.raises(UnsafeURLError):
        await AutoLoader().load("ftp://example.com/file.txt")


async def test_url_failures_are_reported_with_the_good_ones(server: LocalHTTPServer) -> None:
    server.route("GET", "/ok", lambda r: "fine")
    loader = AutoLoader(allow_private_networks=True)
    report = await loader.load_with_report([server.url + "/ok", server.url + "/missing"])
    assert [d.text for d in report.documents] == ["fine"]
    assert report.errors[0].source == server.url + "/missing"
    assert "HTTP 404" in str(report.errors[0].error)


def test_constructor_validation() -> None:
    with pytest.raises(InvalidInputError):
        AutoLoader(max_bytes=0)
    with pytest.raises(InvalidInputError):
        AutoLoader(timeout=0)
    with pytest.raises(InvalidInputError):
        AutoLoader(max_redirects=-1)


async def test_fail_fast_cancels_the_other_sources(streaming_server: StreamingServer) -> None:
    loader = AutoLoader(allow_private_networks=True, timeout=20.0)
    started = time.monotonic()
    with pytest.raises(LoaderError, match="file not found"):
        # the drip would take ~50 s; the missing file fails at once and cancels it
        await loader.load([streaming_server.url + "/drip", "missing/file.txt"])
    assert time.monotonic() - started < 5.0


def test_damaged_utf8_keeps_replacement_while_legacy_bytes_use_the_fallbacks() -> None:
    from kag.rag.loaders import decode_bytes

    assert decode_bytes(b"caf\xc3\xa9 \xff ok", "x") == "café \ufffd ok"  # UTF-8 with one bad byte
    assert decode_bytes(b"caf\xe9 cr\xe8me", "x") == "café crème"  # no UTF-8 sequence at all: cp1252
    assert decode_bytes("naïve".encode(), "x") == "naïve"


async def test_json_is_formatted_only_when_it_parses(tmp_path: Path) -> None:
    from kag.rag.loaders import format_json

    assert format_json('{"a":1}', "application/json") == '{\n  "a": 1\n}'
    assert format_json("{not json", "application/json") == "{not json"
    assert format_json('{"a":1}\n\n{"b": "é"}', "application/jsonl") == '{"a": 1}\n{"b": "é"}'
    assert format_json('{"a":1}\nbroken', "application/jsonl") == '{"a":1}\nbroken'
    (tmp_path / "rows.ndjson").write_text('{"x": 1}\n', encoding="utf-8")
    (tmp_path / "app.conf").write_text("key = value\n", encoding="utf-8")
    (tmp_path / "run.log").write_text("boot ok\n", encoding="utf-8")
    docs = {Path(d.source).name: d for d in await AutoLoader().load(tmp_path)}
    assert docs["rows.ndjson"].text == '{"x": 1}' and docs["rows.ndjson"].media_type == "application/jsonl"
    assert docs["app.conf"].text == "key = value\n" and docs["run.log"].text == "boot ok\n"
