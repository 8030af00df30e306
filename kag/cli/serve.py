"""``kag serve``: the HTTP API and MCP of a knowledge base (or MCP over stdio), until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from typing import TextIO

from kag.cli.service import open_service, prepare
from kag.server.specs import public_uri

__all__ = ["serve_command"]


def _stop_event() -> asyncio.Event:
    """An event set by SIGINT/SIGTERM (where the loop supports signal handlers)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    return stop


async def serve_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``kag serve``: check the keys and bind, open the service, serve until stopped."""
    from kag.server.app import create_app
    from kag.server.auth import APIKeys, check_bind
    from kag.server.http import HTTPServer
    from kag.server.mcp import MCPServer
    from kag.server.wire import LOCAL_HOSTS

    # keys and the bind are checked before the backend is opened: a refusal costs nothing
    keys = APIKeys.from_file(args.api_keys) if args.api_keys is not None else APIKeys.from_env()
    if not args.mcp_stdio:
        warning = check_bind(args.host, keys, insecure_no_auth=args.insecure_no_auth)
        if warning:
            print(f"kag: {warning}", file=err, flush=True)
    logging.getLogger("kag.server.access").setLevel(logging.WARNING if args.no_access_log else logging.INFO)
    service = open_service(
        args,
        name=args.name,
        description=args.description,
        source_roots=args.source_root,
        write_timeout=args.write_timeout,
    )
    app = None
    try:
        await prepare(service, args, err)
        await service.knowledge.ready()
        load = getattr(service.language_model, "load", None)
        if load is not None:  # a local model file that is missing or corrupt fails now, not at the first request
            await load()
        stop = _stop_event()
        if args.mcp_stdio:
            print(f"kag: MCP on stdio for {service.kb.uri} (tool search_{args.name})", file=err)
            stdio = asyncio.create_task(MCPServer(service, max_message_bytes=args.max_body).serve_stdio())
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({stdio, stopping}, return_when=asyncio.FIRST_COMPLETED)
            for task in (stdio, stopping):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            return 0
        local = args.host in LOCAL_HOSTS or args.host.startswith("127.")
        app = create_app(
            service,
            mcp=not args.no_mcp,
            allowed_origins=args.allow_origin,
            allowed_hosts=LOCAL_HOSTS | {args.host} if local else None,  # public bind: no Host check
            api_keys=keys,
            metrics=not args.no_metrics,
            max_namespaces=args.max_namespaces,
        )
        server = HTTPServer(
            app,
            args.host,
            args.port,
            max_body_bytes=args.max_body,
            max_header_bytes=args.max_header,
            request_timeout=args.timeout,
            keep_alive_timeout=args.idle_timeout,
            max_connections=args.max_connections,
        )
        await server.start()
        mcp = "" if args.no_mcp else f", MCP at {server.url}/mcp"
        auth = f", API keys: {len(keys)}" if keys is not None else ", no authentication"
        print(f"kag serving {public_uri(service.kb.uri)} on {server.url}{mcp}{auth}", file=out, flush=True)
        print(f"port {server.port}", file=out, flush=True)
        serving = asyncio.create_task(server.serve_forever())
        try:
            await stop.wait()
        finally:
            print("kag: shutting down", file=err, flush=True)
            await server.close()
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        return 0
    finally:
        if app is not None:
            await app.tenants.aclose()  # every namespace's service, this one last
        else:
            await service.aclose()
