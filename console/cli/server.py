"""The console's development server (`jobwarden console`, the demo); production: gunicorn."""

from __future__ import annotations

import logging
import signal
import socket
import sys
from types import FrameType
from typing import Any

from werkzeug.serving import BaseWSGIServer, select_address_family
from werkzeug.serving import make_server as werkzeug_server

from jobwarden.console import create_app
from jobwarden.console.data.replica import ReplicaRefused


def make_server(host: str = "127.0.0.1", port: int = 8080, config: dict[str, Any] | None = None,
                access_log: bool = True) -> BaseWSGIServer:
    """A threaded werkzeug server for the console (serve_forever() / shutdown()).

    `port=0` picks a free port; read it back from `server.server_port`. A busy port
    raises OSError. `access_log=False` keeps per-request lines off the terminal.
    """
    if not access_log:  # werkzeug logs each request at INFO on its own handler
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
    # We bind the socket ourselves: werkzeug answers a busy port with sys.exit(1), and the
    # caller should say which option changes the port.
    listener = socket.create_server((host, port), family=select_address_family(host, port))
    try:
        server = werkzeug_server(host, port, create_app(config), threaded=True,
                                 fd=listener.fileno())
    finally:
        listener.close()  # the server holds its own duplicate of the socket
    server.server_port = server.port  # the bound port, also when `port` was 0
    return server


def serve(host: str = "127.0.0.1", port: int = 8080) -> int:
    """Run the console in the foreground until interrupted (production: gunicorn)."""
    try:
        server = make_server(host, port)
    except ReplicaRefused as exc:
        print(f"jobwarden console: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"jobwarden console: cannot listen on {host}:{port} ({exc.strerror}); "
              "choose another port with --port", file=sys.stderr)
        return 2
    # Ctrl-C stops it even when it was started with SIGINT ignored, as a non-interactive
    # shell starts a background command (a script's `jobwarden console &`, a test run in the
    # background): otherwise it would keep serving. SIGTERM (a process manager, `kill`)
    # stops it the same way. The worker installs its handlers for the same reason.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    print(f"Jobwarden console on http://{host}:{server.server_port}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
