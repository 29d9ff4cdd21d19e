"""The Starlette app behind ``vaultsync ui``, and the function that serves it on loopback."""

from __future__ import annotations

import logging
import secrets
import socket
import webbrowser
from collections.abc import Callable
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..disk.attachments import mime_type
from ..errors import ConfigError, NoteNotFound, VaultNotFound, VaultsyncError
from ..search_filter import SearchFilter, condition
from ..vault import Vault
from .door import Guard
from .render import RASTER_TYPES
from .views import Explorer

logger = logging.getLogger(__name__)

ASSETS = {"ui.js": "text/javascript; charset=utf-8", "ui.css": "text/css; charset=utf-8", "icon.svg": "image/svg+xml"}
"""The page's only files besides itself, shipped in the package (no CDN, nothing from the network)."""

FILE_CSP = "default-src 'none'; sandbox"
"""A served file's policy: opened as a document by itself, it loads and runs nothing."""


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def _param(request: Request, name: str, required: bool = False) -> str | None:
    value = request.query_params.get(name) or None
    if value is None and required:
        raise ConfigError(f"missing parameter {name!r}")
    return value


def _time(request: Request, name: str) -> int | str | None:
    """A time parameter: integer microseconds as the page sends them, or a typed date form."""
    value = _param(request, name)
    if value is None or value == "now":
        return None
    return int(value) if value.lstrip("-").isdigit() else value


def _filter(request: Request) -> SearchFilter:
    """The search filters of the query string: ``prefix``, and ``tag``, ``where`` (key=value), ``kind``, each
    repeatable, as the command line's options."""
    values = request.query_params.getlist
    where = [condition(text) for text in values("where")]
    return SearchFilter.of(_param(request, "prefix"), values("tag"), where, values("kind"))


def build_app(vault: Vault, token: str, port: int) -> Guard:
    """The page and its JSON API over ``vault`` (read-only), behind the token, Host and Origin guard."""
    explorer = Explorer(vault)
    page = _asset("index.html").replace("{{token}}", token)

    def api(answer: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            try:
                return JSONResponse(await run_in_threadpool(answer, request))
            except (NoteNotFound, VaultNotFound) as exc:
                return JSONResponse({"error": str(exc)}, status_code=404)
            except VaultsyncError as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)

        return endpoint

    async def index(request: Request) -> Response:
        return Response(page, media_type="text/html; charset=utf-8")

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return JSONResponse({"error": "no such file"}, status_code=404)
        return Response(_asset(name), media_type=ASSETS[name])

    async def file(request: Request) -> Response:
        """An embedded image's bytes as of the page's moment: data of its own type, never a document."""
        try:
            path = _param(request, "path", True) or ""
            if mime_type(path) not in RASTER_TYPES:
                return JSONResponse({"error": f"{path} is not an image the page shows"}, status_code=415)
            data = await run_in_threadpool(explorer.file, path, _time(request, "at"))
        except (NoteNotFound, VaultNotFound) as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except VaultsyncError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return Response(data, media_type=mime_type(path), headers={"content-security-policy": FILE_CSP})

    routes = [
        Route("/", index),
        Route("/api/file", file),
        Route("/static/{name}", asset),
        Route("/api/timeline", api(lambda r: explorer.timeline())),
        Route("/api/moment", api(lambda r: explorer.moment(_param(r, "at", True) or ""))),
        Route("/api/tree", api(lambda r: explorer.tree(_time(r, "at"), _time(r, "valid")))),
        Route(
            "/api/note", api(lambda r: explorer.note(_param(r, "path", True) or "", _time(r, "at"), _time(r, "valid")))
        ),
        Route("/api/links", api(lambda r: explorer.links(_param(r, "path", True) or "", _time(r, "at")))),
        Route(
            "/api/diff",
            api(
                lambda r: explorer.diff(
                    _param(r, "a", True) or "", _time(r, "at_a"), _param(r, "b", True) or "", _time(r, "at_b")
                )
            ),
        ),
        Route(
            "/api/search",
            api(
                lambda r: explorer.search(_param(r, "q", True) or "", _time(r, "at"), _time(r, "valid"), 20, _filter(r))
            ),
        ),
        Route("/api/changes", api(lambda r: explorer.changes(_time(r, "since"), _time(r, "until"), _time(r, "valid")))),
        Route("/api/deleted", api(lambda r: explorer.deleted(_time(r, "until")))),
    ]
    return Guard(Starlette(routes=routes), token, port)


def serve(vault: Vault, *, port: int = 0, open_browser: bool = True, announce: Callable[[str], None] = print) -> None:
    """Serve the page on 127.0.0.1 (a random free port unless ``port``) until interrupted."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)  # before the URL is printed or opened: a request sent at once waits instead of being refused
    port = sock.getsockname()[1]
    token = secrets.token_urlsafe(32)
    url = f"http://127.0.0.1:{port}/?token={token}"
    app = build_app(vault, token, port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", server_header=False))
    announce(f"vaultsync: vault '{vault.name}' through time at {url}")
    if open_browser:
        webbrowser.open(url)
    server.run(sockets=[sock])
