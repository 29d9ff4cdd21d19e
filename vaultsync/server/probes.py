"""What a load balancer and a service manager ask an HTTP server, without a token, and the access log.

- ``GET /health``: the process answers (200 ``{"status": "alive"}``), whatever the database does: restart the
  process only when this fails.
- ``GET /ready``: whether to send it requests: the database answers, and the vault is current, as the heartbeat
  of the process watching it says, here or in another process (``live/heartbeat.py``: fresh, recording, no change
  waiting longer than ``READY_LAG_S``; not during a one-shot import). 200 when ready, 503 when not, with
  ``database`` ("ok" or "unreachable"), ``vault_current`` (true, false, or null when no watcher ever published a
  heartbeat), ``watcher`` (its state: watching, failing, importing, stopped, stale; null without a heartbeat),
  ``heartbeat_age_seconds``, ``watcher_lag_seconds`` (the age of the oldest change not recorded yet) and
  ``audit_log`` ("ok", "refused" when a tool call could not be recorded, so none would be answered, or null
  without an audit log). Nothing private: no vault name, path, note count, process or error text.

Every request gets one line on the ``vaultsync.access`` logger: client address, the subject its token names (or
``-``), method, path (never the query string), status and time taken; never a header (the bearer token), a body or
a note's text. Behind a proxy whose address is trusted (``trusted_proxies``), the client address is the one its
``X-Forwarded-For`` header names: the last address there that is not itself a trusted proxy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..live.heartbeat import READY_LAG_S
from .metrics import Metrics

if TYPE_CHECKING:
    from .served import ServedVault

access = logging.getLogger("vaultsync.access")

CHECK_TIMEOUT_S = 5.0
"""How long ``/ready`` waits for the database to answer."""
HEADERS = {"Cache-Control": "no-store"}


def readiness(served: ServedVault) -> tuple[bool, dict[str, Any]]:
    """Whether the server is ready, and what ``/ready`` says (see the module docstring)."""
    database = "ok" if served.database_answers() else "unreachable"
    told = served.currency()
    current = told.current
    audit: str | None = None
    if served.audit is not None and database == "ok":
        audit = "refused" if served.audit.unwritable() else "ok"
    ready = database == "ok" and current is not False and audit != "refused"
    return ready, {
        "status": "ready" if ready else "not ready",
        "database": database,
        "vault_current": current,
        "watcher": told.state,
        "heartbeat_age_seconds": told.heartbeat_age_s,
        "watcher_lag_seconds": told.lag_s,
        "audit_log": audit,
    }


WORST_FIRST = ["stale", "failing", "importing", "stopped", "watching"]
"""A hosted server's ``watcher``: the worst state of its vaults' watchers."""


def _badness(state: str) -> int:
    return WORST_FIRST.index(state) if state in WORST_FIRST else -1  # one this version does not know: the worst


def readiness_of_all(served: Sequence[ServedVault]) -> tuple[bool, dict[str, Any]]:
    """``readiness`` of a server with several vaults (a hosted server): ready when every one it serves is; the
    database unreachable when it is for one, a vault not current when one is not, the largest lag, and how many
    of its vaults the database does not hold yet (``vaults_missing``: served once a watcher records them; the
    others are answered meanwhile); the worst watcher state, the oldest heartbeat and the largest lag."""
    answers = [readiness(one) for one in served if one.missing is None]
    ready = bool(answers) and all(ok for ok, _ in answers)
    currents = [body["vault_current"] for _, body in answers if body["vault_current"] is not None]
    lags = [body["watcher_lag_seconds"] for _, body in answers if body["watcher_lag_seconds"] is not None]
    ages = [body["heartbeat_age_seconds"] for _, body in answers if body["heartbeat_age_seconds"] is not None]
    states = [body["watcher"] for _, body in answers if body["watcher"] is not None]
    audits = {body["audit_log"] for _, body in answers if body["audit_log"] is not None}
    return ready, {
        "status": "ready" if ready else "not ready",
        "database": "ok" if all(body["database"] == "ok" for _, body in answers) else "unreachable",
        "vault_current": all(currents) if currents else None,
        "watcher": min(states, key=_badness) if states else None,
        "heartbeat_age_seconds": max(ages) if ages else None,
        "watcher_lag_seconds": max(lags) if lags else None,
        "audit_log": ("refused" if "refused" in audits else "ok") if audits else None,
        "vaults_missing": len(served) - len(answers),
    }


def routes(served: ServedVault | Sequence[ServedVault]) -> list[Route]:
    """``/health`` and ``/ready`` for the HTTP app (ahead of ``/mcp`` and its authentication), for one served vault
    or every vault of a hosted server."""
    check: Any = readiness_of_all if isinstance(served, Sequence) else readiness

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "alive"}, headers=HEADERS)

    async def ready(request: Request) -> JSONResponse:
        answer: tuple[bool, dict[str, Any]] = (
            False,
            {
                "status": "not ready",
                "database": "unreachable",
                "vault_current": None,
                "watcher": None,
                "heartbeat_age_seconds": None,
                "watcher_lag_seconds": None,
                "audit_log": None,
            },
        )
        with anyio.move_on_after(CHECK_TIMEOUT_S):
            answer = await anyio.to_thread.run_sync(check, served, abandon_on_cancel=True)
        ok, body = answer
        return JSONResponse(body, status_code=200 if ok else 503, headers=HEADERS)

    return [Route("/health", health, methods=["GET", "HEAD"]), Route("/ready", ready, methods=["GET", "HEAD"])]


SUBJECT = "vaultsync.subject"
"""The ASGI scope key (a one-item list) where the authentication names the request's subject for the log."""


def name_subject(scope: Any, subject: str | None) -> None:
    """Let the access log name ``subject`` for this request (the gate that verified its token calls it)."""
    slot = scope.get(SUBJECT)
    if slot is not None and subject:
        slot[0] = subject


def client_address(scope: Any, trusted: frozenset[str]) -> str:
    """The request's client: its peer, or behind a trusted proxy the last ``X-Forwarded-For`` address that is not
    a trusted proxy itself."""
    peer = (scope.get("client") or ("-", 0))[0]
    if peer not in trusted:
        return str(peer)
    forwarded = [
        part.strip()
        for key, value in scope.get("headers", [])
        if key == b"x-forwarded-for"
        for part in value.decode("latin-1").split(",")
    ]
    for address in reversed(forwarded):
        if address and address not in trusted:
            return address[:64]
    return str(peer)


def _subject_of(scope: Any) -> str:
    found = scope[SUBJECT][0]
    if found:
        return str(found)
    user = scope.get("user")  # a static bearer token: the rule's caller id
    token = getattr(user, "access_token", None)
    return str(getattr(token, "subject", None) or getattr(token, "client_id", None) or "-")


def metrics_of(served: ServedVault | Sequence[ServedVault] | None) -> Metrics:
    """The counters of a server of ``served`` (one vault, a hosted server's vaults, or none)."""
    if served is None:
        return Metrics()
    return Metrics(served if isinstance(served, Sequence) else [served])


async def _metrics_answer(metrics: Metrics, send: Any) -> None:
    body = metrics.render().encode()
    headers = [(b"content-type", b"text/plain; version=0.0.4; charset=utf-8"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def logged(app: Any, trusted_proxies: Sequence[str] = (), metrics: Metrics | None = None) -> Any:
    """``app`` with one access-log line per HTTP request (see the module docstring), and with ``metrics``, its
    counters kept and answered at ``GET /metrics`` (``server/metrics.py``)."""
    trusted = frozenset(trusted_proxies)

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        scope = {**scope, SUBJECT: [None]}
        started = time.monotonic()
        status = [0]
        answer = app
        if metrics is not None and scope.get("path") == "/metrics" and scope.get("method") in ("GET", "HEAD"):

            async def answer(scope: Any, receive: Any, send: Any) -> None:
                await _metrics_answer(metrics, send)

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await answer(scope, receive, sending)
        finally:
            if metrics is not None:
                metrics.observe(scope.get("path", ""), status[0], time.monotonic() - started)
            fields = {
                "client": client_address(scope, trusted),
                "subject": _subject_of(scope),
                "method": scope.get("method", "-"),
                "path": scope.get("path", "-"),
                "status": status[0] or None,
                "ms": round((time.monotonic() - started) * 1000),
            }
            access.info(
                '%s %s "%s %s" %s %d ms',
                fields["client"],
                fields["subject"],
                fields["method"],
                fields["path"],
                fields["status"] or "-",
                fields["ms"],
                extra={"fields": fields},  # --log-format json: each a field of its own
            )

    return wrapped


__all__ = [
    "READY_LAG_S",
    "client_address",
    "logged",
    "metrics_of",
    "name_subject",
    "readiness",
    "readiness_of_all",
    "routes",
]
