"""Serving a knowledge base: an HTTP JSON API and an MCP server (HTTP and stdio), no extra dependencies.

>>> service = Service.open("memory://kb.json", "kag.examples.seed")
>>> async with HTTPServer(create_app(service), port=0) as server:
...     print(server.url)   # GET /health, POST /search, /triplet_search, /ask, /ingest, /mcp
"""

from kag.server.app import App, create_app
from kag.server.http import HTTPServer, Request, Response
from kag.server.mcp import MCPServer
from kag.server.service import Service
from kag.server.specs import build_language_model, load_schema, parse_lm_spec
from kag.server.wire import error_response

__all__ = [
    "App",
    "HTTPServer",
    "MCPServer",
    "Request",
    "Response",
    "Service",
    "build_language_model",
    "create_app",
    "error_response",
    "load_schema",
    "parse_lm_spec",
]
