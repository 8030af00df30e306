"""An MCP server (Model Context Protocol) for a knowledge base, without the SDK.

JSON-RPC 2.0 over two transports:

* **Streamable HTTP** at ``POST /mcp`` (see :class:`kag.server.app.App`): each
  POST carries one message (or a batch); requests are answered with
  ``application/json``, notifications/responses with **202** and no body. There
  is no server-initiated stream: ``GET /mcp`` answers **405**. The server is
  stateless (no ``Mcp-Session-Id``); an ``MCP-Protocol-Version`` header, when
  sent, must name a supported version (else **400**). When the app has API keys
  (:mod:`kag.server.auth`), ``/mcp`` needs ``Authorization: Bearer <key>`` with
  the ``read`` scope.
* **stdio** (:meth:`MCPServer.serve_stdio`): newline-delimited JSON-RPC on
  stdin/stdout; nothing else is written to stdout. Each message gets one line on
  the ``kag.server.access`` logger (method, outcome, latency; never params).

Methods: ``initialize`` (protocol version negotiation: the client's version when
supported, else the latest one), ``notifications/initialized``, ``ping``,
``tools/list``, ``tools/call``. Tools:

* ``search_<name>``: :class:`~kag.knowledge.tool.KnowledgeTool` (facts and
  passages as labelled, bounded text), its JSON schema as ``inputSchema``;
* ``triplet_search``: a typed TripletSearch (labels are enums of the schema) or
  a chain of ``hops``; returns the facts, the count and the compiled Cypher as
  JSON text and ``structuredContent``.

Tool failures caused by the arguments come back as results with
``isError: true`` (so a model can correct itself); unknown tools and malformed
params are JSON-RPC errors (``-32602``).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, BinaryIO

import pydantic

from kag.datamodels.schema import provider_schema
from kag.errors import HTTPError, InvalidInputError, KagError, RPCError, SchemaError
from kag.knowledge.tool import KnowledgeTool
from kag.query.plan import MAX_HOPS
from kag.query.triplet import triplet_search_schema
from kag.server.http import Request, Response
from kag.server.service import MAX_REQUEST_K, Service
from kag.server.wire import TripletSearchRequest, parse_json_body
from kag.validation import loads_json

__all__ = ["LATEST_PROTOCOL_VERSION", "SUPPORTED_PROTOCOL_VERSIONS", "MCPServer"]

logger = logging.getLogger("kag.server.mcp")
access_logger = logging.getLogger("kag.server.access")

SUPPORTED_PROTOCOL_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_PROTOCOL_VERSION = SUPPORTED_PROTOCOL_VERSIONS[0]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


def _error(msg_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": err}


def _text_result(text: str, *, is_error: bool = False, structured: Any = None) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if structured is not None:
        result["structuredContent"] = structured
    return result


class MCPServer:
    """MCP tools over a :class:`Service`: ``search_<name>`` and ``triplet_search``.

    Args:
        service: the knowledge base and its Knowledge facade.
        name / version: ``serverInfo`` reported by ``initialize``.
        max_k: the largest ``k`` the search tool accepts.
        max_message_bytes: bound of one stdio message (HTTP bodies are bounded by the HTTP server).
    """

    def __init__(
        self,
        service: Service,
        *,
        name: str = "kag",
        version: str | None = None,
        max_k: int = 20,
        max_message_bytes: int = 1024 * 1024,
    ) -> None:
        from kag.version import __version__

        self.service = service
        self.name = name
        self.version = version or __version__
        self.max_message_bytes = max_message_bytes
        self.search_tool = KnowledgeTool(service.knowledge, max_k=max_k, strict=False)
        search_schema = json.loads(json.dumps(self.search_tool.parameters))
        search_schema["required"] = ["query"]
        graph = service.schema
        relations = "; ".join(
            f"{s.label}: {'|'.join(s.subj_labels)} -> {'|'.join(s.obj_labels)}" for s in graph.relations.values()
        )
        self.tools: list[dict[str, Any]] = [
            {
                "name": self.search_tool.name,
                "title": f"Search {service.knowledge.name}",
                "description": self.search_tool.description,
                "inputSchema": search_schema,
                "annotations": {"readOnlyHint": True, "openWorldHint": False},
            },
            {
                "name": "triplet_search",
                "title": "Typed triplet search",
                "description": (
                    "Search the knowledge graph for (subject)-[relation]->(object) facts. Labels: "
                    f"entities {', '.join(graph.entity_labels)}; relations {relations or '(none)'}. "
                    'Use "*" for any label or any text. Give either the fields of one pattern or '
                    f"`hops`, a chain of up to {MAX_HOPS} patterns where each object is the next subject. "
                    "Returns the facts (best first) and the compiled Cypher."
                ),
                "inputSchema": self._triplet_schema(),
                "annotations": {"readOnlyHint": True, "openWorldHint": False},
            },
        ]
        self._tool_names = {tool["name"] for tool in self.tools}

    def _triplet_schema(self) -> dict[str, Any]:
        single = provider_schema(triplet_search_schema(self.service.schema))
        fields = dict(single["properties"])
        hop = {**single}
        hop.pop("title", None)
        return {
            "type": "object",
            "properties": {
                **fields,
                "hops": {
                    "type": "array",
                    "items": hop,
                    "minItems": 1,
                    "maxItems": MAX_HOPS,
                    "description": "A chain of patterns (instead of the single-pattern fields).",
                },
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_REQUEST_K,
                    "default": 10,
                    "description": "How many facts to return.",
                },
                "threshold": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "default": 0.7,
                    "description": "Minimum similarity in [0, 1] of the matched names.",
                },
            },
            "additionalProperties": False,
        }

    # -- JSON-RPC -------------------------------------------------------------
    async def handle_message(self, message: Any) -> dict[str, Any] | list[dict[str, Any]] | None:
        """Answer one JSON-RPC message or batch; ``None`` when nothing is to be sent back."""
        if isinstance(message, list):
            if not message:
                return _error(None, INVALID_REQUEST, "empty batch")
            replies = [r for r in [await self._one(m) for m in message] if r is not None]
            return replies or None
        return await self._one(message)

    async def _one(self, message: Any) -> dict[str, Any] | None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(_safe_id(message), INVALID_REQUEST, "not a JSON-RPC 2.0 message")
        if "method" not in message:
            return None  # a response to a request we never sent: nothing to do
        method = message["method"]
        has_id = "id" in message
        msg_id = message.get("id")
        if has_id and (isinstance(msg_id, bool) or not isinstance(msg_id, str | int)):
            return _error(None, INVALID_REQUEST, "id must be a string or an integer")
        if not isinstance(method, str):
            return _error(msg_id if has_id else None, INVALID_REQUEST, "method must be a string")
        params = message.get("params", {})
        if params is None:
            params = {}
        if not has_id:  # a notification: never answered
            if not method.startswith("notifications/"):
                logger.debug("ignored notification-style call of %s", method)
            return None
        if not isinstance(params, dict):
            return _error(msg_id, INVALID_PARAMS, "params must be an object")
        try:
            result = await self._call(method, params)
        except RPCError as exc:
            return _error(msg_id, exc.code, exc.message, exc.data)
        except Exception:
            logger.exception("MCP method %s failed", method)
            return _error(msg_id, INTERNAL_ERROR, "internal error")
        return {"jsonrpc": "2.0", "id": msg_id, "result": result}

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            return self.initialize(params)
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": self.tools}
        if method == "tools/call":
            name = params.get("name")
            arguments = params.get("arguments", {})
            if arguments is None:
                arguments = {}
            if not isinstance(name, str) or name not in self._tool_names:
                raise RPCError(INVALID_PARAMS, f"unknown tool {name!r}; tools: {sorted(self._tool_names)}")
            if not isinstance(arguments, dict):
                raise RPCError(INVALID_PARAMS, "arguments must be an object")
            return await self.call_tool(name, arguments)
        raise RPCError(METHOD_NOT_FOUND, f"method not found: {method}")

    def initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The ``initialize`` result: the client's protocol version if supported, else the latest."""
        requested = params.get("protocolVersion")
        version = requested if requested in SUPPORTED_PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
        knowledge = self.service.knowledge
        about = f" ({knowledge.description.strip()})" if knowledge.description.strip() else ""
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": self.name, "version": self.version},
            "instructions": (
                f"Knowledge '{knowledge.name}'{about}: call {self.search_tool.name} for facts and passages "
                "about a question, or triplet_search for typed graph patterns."
            ),
        }

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run a tool; argument problems come back as ``isError`` results."""
        try:
            if name == self.search_tool.name:
                unknown = sorted(set(arguments) - {"query", "k", "where"})
                if unknown:
                    raise InvalidInputError(f"unknown argument(s) {unknown}; expected query, k, where.")
                rendered = await self.search_tool.run(
                    arguments.get("query", ""), arguments.get("k"), arguments.get("where")
                )
                return _text_result(rendered.text)
            return await self._triplet_search(arguments)
        except (InvalidInputError, SchemaError) as exc:
            return _text_result(f"Error: {exc}", is_error=True)
        except pydantic.ValidationError as exc:
            return _text_result(f"Error: invalid arguments: {exc.errors(include_url=False)[:5]}", is_error=True)
        except KagError as exc:
            return _text_result(f"Error ({type(exc).__name__}): {exc}", is_error=True)

    async def _triplet_search(self, arguments: dict[str, Any]) -> dict[str, Any]:
        request = TripletSearchRequest.model_validate({**arguments, "include_vectors": False})
        result = await self.service.triplet_search(request.search(), k=request.k, threshold=request.threshold)
        result.pop("params", None)
        if result["count"] is not None:
            lines = [f"count: {result['count']}"]
        elif result["facts"]:
            lines = [f"{i}. {f['text']} (score {f['score']:.3f})" for i, f in enumerate(result["facts"], 1)]
        else:
            lines = ["No facts matched."]
        text = "\n".join(lines) + f"\n\nCypher:\n{result['cypher']}"
        return _text_result(text, structured=result)

    # -- transports -----------------------------------------------------------
    async def handle_http(self, request: Request) -> Response:
        """``POST /mcp`` of the Streamable HTTP transport (JSON responses, no SSE)."""
        version = request.header("mcp-protocol-version")
        if version and version not in SUPPORTED_PROTOCOL_VERSIONS:
            body = _error(
                None,
                INVALID_REQUEST,
                f"unsupported MCP-Protocol-Version {version!r}; supported: {list(SUPPORTED_PROTOCOL_VERSIONS)}",
            )
            return Response.json(400, body)
        accept = request.header("accept")
        if accept and not any(a in accept for a in ("application/json", "*/*", "application/*")):
            return Response.error(406, "NotAcceptable", "Accept must allow application/json")
        try:
            message = parse_json_body(request)
        except HTTPError as exc:
            if exc.status == 415:
                return Response.error(exc.status, exc.kind, exc.message, exc.headers)
            return Response.json(400, _error(None, PARSE_ERROR, exc.message))
        reply = await self.handle_message(message)
        if reply is None:
            return Response(202)
        return Response.json(200, reply)

    async def serve_stdio(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve newline-delimited JSON-RPC on ``stdin``/``stdout`` (default: the process's) until EOF."""
        reader: BinaryIO | _FDReader = stdin if stdin is not None else _FDReader(sys.stdin.fileno())
        writer = stdout if stdout is not None else sys.stdout.buffer
        limit = self.max_message_bytes

        def read_line() -> tuple[bytes, bool]:
            line = reader.readline(limit + 1)
            if len(line) > limit and not line.endswith(b"\n"):
                while True:  # skip the rest of the oversized line
                    more = reader.readline(65536)
                    if not more or more.endswith(b"\n"):
                        break
                return b"", True
            return line, False

        def write(reply: Any) -> None:
            writer.write(json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
            writer.flush()

        # A daemon thread reads stdin, so that shutting the loop down never waits on a blocked read.
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[tuple[bytes, bool]] = asyncio.Queue(maxsize=16)

        def pump() -> None:
            while True:
                try:
                    item = read_line()
                except (OSError, ValueError):  # stdin closed under us
                    item = (b"", False)
                try:
                    asyncio.run_coroutine_threadsafe(lines.put(item), loop).result()
                except RuntimeError:  # the loop is gone
                    return
                if not item[0] and not item[1]:
                    return

        threading.Thread(target=pump, name="kag-mcp-stdin", daemon=True).start()
        while True:
            line, too_long = await lines.get()
            if too_long:
                write(_error(None, INVALID_REQUEST, f"message exceeds {limit} bytes"))
                continue
            if not line:
                return
            if not line.strip():
                continue
            try:
                message = loads_json(line, what="the message")
            except InvalidInputError as exc:  # bad UTF-8, bad JSON, or nested too deeply: answered, not fatal
                write(_error(None, PARSE_ERROR, f"parse error: {exc}"))
                continue
            start = time.perf_counter()
            reply = await self.handle_message(message)
            if reply is not None:
                write(reply)
            _log_stdio(message, reply, time.perf_counter() - start)


class _FDReader(io.RawIOBase):
    """``readline`` straight from a file descriptor, holding no buffer lock.

    The process's ``sys.stdin.buffer`` cannot be read from a daemon thread: at
    interpreter shutdown Python aborts when that thread still holds its lock.
    """

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> bytes:
        limit = size if size is not None and size >= 0 else None
        while True:
            cut = self._pending.find(b"\n")
            if cut >= 0 and (limit is None or cut < limit):
                line, self._pending = self._pending[: cut + 1], self._pending[cut + 1 :]
                return line
            if limit is not None and len(self._pending) >= limit:
                line, self._pending = self._pending[:limit], self._pending[limit:]
                return line
            chunk = os.read(self.fd, 65536)
            if not chunk:
                line, self._pending = self._pending, b""
                return line
            self._pending += chunk


def _log_stdio(message: Any, reply: Any, seconds: float) -> None:
    """One access log line per stdio message: method, outcome, latency (never params or results)."""
    if not access_logger.isEnabledFor(logging.INFO):
        return
    if isinstance(message, list):
        method = f"batch({len(message)})"
    else:
        name = message.get("method") if isinstance(message, dict) else None
        method = name[:64] if isinstance(name, str) else "-"
    replies = reply if isinstance(reply, list) else [reply]
    failed = any(isinstance(r, dict) and ("error" in r or (r.get("result") or {}).get("isError")) for r in replies)
    outcome = "error" if failed else ("ok" if reply is not None else "notification")
    access_logger.info(
        "stdio MCP %r %s %.1fms",
        method,
        outcome,
        seconds * 1000,
        extra={"transport": "stdio", "method": method, "status": outcome, "latency_ms": round(seconds * 1000, 3)},
    )


def _safe_id(message: Any) -> Any:
    if isinstance(message, dict):
        msg_id = message.get("id")
        if isinstance(msg_id, str | int) and not isinstance(msg_id, bool):
            return msg_id
    return None
