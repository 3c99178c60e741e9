"""``rag serve``: the HTTP API on uvicorn, around one service built from the environment."""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from types import FrameType
from typing import Any

from rag_service.config import Settings
from rag_service.errors import ConfigurationError
from rag_service.heap import freeze_startup_objects
from rag_service.shutdown import STOP_SIGNALS


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    try:
        import uvicorn

        from rag_service.server.app import create_app
        from rag_service.server.config import load_server_config
        from rag_service.server.connections import uvicorn_options
        from rag_service.server.hosts import host_policy
    except ImportError as exc:
        raise ConfigurationError(
            f"`rag serve` needs the server extra ({exc.name} is missing): pip install 'rag_service[server]'"
        ) from None
    from rag_service.service import build_service

    config = load_server_config()
    listener = _listen(args.host, args.port)  # first: a port in use fails in one line, before the model loads
    try:
        service = build_service(settings)
        service.embedder()  # load the model now (one that cannot load stops here), not in the first request
    except BaseException:
        listener.close()
        raise
    if config.write_token is None:
        print("rag serve: RAG_API_TOKEN is not set, so this server is read-only (writes answer 403)", file=sys.stderr)
    if config.reads_token is None:
        print("rag serve: reads are open to anyone reaching this address (RAG_API_READ_TOKEN)", file=sys.stderr)
    hosts, note = host_policy(config, args.host)
    if note is not None:
        print(note, file=sys.stderr)
    app = create_app(service, config, owns_service=True, hosts=hosts)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            access_log=args.access_log,
            **uvicorn_options(config),
        )
    )
    freeze_startup_objects()
    # bound here, so the line below names the port (the one the system chose for port 0)
    return _run_until_stopped(server, args.host, listener.getsockname()[1], sockets=[listener])


def _listen(host: str, port: int) -> socket.socket:
    """The server's socket, listening; a host or port it cannot have is a ConfigurationError naming both."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        reason = (exc.strerror or str(exc)).split(" (while attempting")[0]  # create_server's suffix repeats us
        raise ConfigurationError(
            f"rag serve cannot listen on {host}:{port} ({reason.lower()}); stop what uses it or pick another "
            "--port (0: any free port) or --host"
        ) from None


def _port(value: str) -> int:
    """``--port``: 0..65535."""
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is no port: use 1-65535, or 0 for any free port")
    return port


def _run_until_stopped(server: Any, host: str, port: int, sockets: list[socket.socket]) -> int:
    """Serve until SIGINT or SIGTERM; 0 once uvicorn has finished the requests in flight and closed the service.

    From before the line saying where it serves, a stop signal goes to uvicorn's own graceful stop
    (``handle_exit``), whatever phase uvicorn is in. Left at Python's default, a SIGINT that came before
    uvicorn listens for it went to asyncio's runner, which cancels the server's task mid-startup; the
    cancellation was swallowed there and the server ran on (a SIGINT 3 ms after the line, on a loaded machine).
    """
    stops: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        stops.append(signum)
        server.handle_exit(signum, frame)

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        print(f"rag serve: http://{host}:{port}/ (search page), /openapi.json, /metrics", file=sys.stderr)
        server.run(sockets=sockets)
    except KeyboardInterrupt:
        stops.append(signal.SIGINT)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
    if stops:
        print("rag serve: stopped", file=sys.stderr)
    return 0


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``rag serve`` to the ``rag`` parser."""
    serve = commands.add_parser(
        "serve",
        help="run the HTTP API and the search page (extra 'server')",
        description="Run the HTTP API and the search page (extra 'server'). Writes need RAG_API_TOKEN set "
        "(sent as 'Authorization: Bearer <token>'); without it the server is read-only. RAG_API_READ_TOKEN, "
        "when set, is needed for reads too.",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", metavar="ADDRESS", help="address to listen on (default 127.0.0.1)"
    )
    serve.add_argument("--port", type=_port, default=8000, help="port (default 8000; 0: any free port)")
    serve.add_argument(
        "--log-level",
        default="warning",
        type=str.lower,  # as `rag mcp --log-level`, either case
        choices=["critical", "error", "warning", "info", "debug"],
        help="uvicorn's (default %(default)s)",
    )
    serve.add_argument("--access-log", action="store_true", help="log every request")
    serve.set_defaults(handler=_serve)
