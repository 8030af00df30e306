"""Serving a knowledge base: an HTTP JSON API and an MCP server (HTTP and stdio), no extra dependencies.

>>> service = Service.open("memory://kb.json", "kag.examples.seed")
>>> async with HTTPServer(create_app(service), port=0) as server:
...     print(server.url)   # GET /health, POST /search, /triplet_search, /ask, /ingest, /mcp
"""

from kag.server.app import App, create_app, error_response
from kag.server.config import Service, UsageError, build_language_model, load_schema, parse_lm_spec
from kag.server.http import HTTPServer, Request, Response
from kag.server.mcp import MCPServer

__all__ = [
    "App",
    "HTTPServer",
    "MCPServer",
    "Request",
    "Response",
    "Service",
    "UsageError",
    "build_language_model",
    "create_app",
    "error_response",
    "load_schema",
    "parse_lm_spec",
]
