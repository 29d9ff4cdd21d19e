"""Who may use which tool, and the record of what they did: the manifest's ``allowed_tools`` and
``[role_filter]``, and the audit log, applied to a server.

``allowed_tools``: a tool it does not name is not registered at all. ``[role_filter]``: every
``tools/list`` shows the caller only the tools its roles allow, and a ``tools/call`` of any other
is refused with JSON-RPC -32601 (method not found: as if the tool did not exist), in both protocol
eras. Deny always wins, then an allow naming one of the caller's roles, then ``default``.

The caller: over HTTP, the bearer token's ``[[http.tokens]]`` entry (``caller_id``, ``roles``), or for an OAuth
access token its subject, with its effective scopes (``vault:read``…) as its roles; without
a token (stdio, or loopback HTTP without tokens), ``role_filter.caller_roles`` under the caller id
``stdio`` (``local`` over HTTP).

Resources (``resources/*``, ``subscriptions/listen``) serve the same note text as ``read_note``, so
they are ``read_note``'s: a caller who may not use it (or a server whose ``allowed_tools`` leaves it
out) is answered -32601 for them too, and every ``resources/read`` is audited like a tool call.

Both run as one SDK server middleware (``MCPServer(middleware=...)``, public API of mcp 2.x), built
only when the manifest has a ``[role_filter]`` or an ``audit_log_path``: without them the server is
exactly the plain one.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from mcp import MCPError
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.types import INTERNAL_ERROR, METHOD_NOT_FOUND

from .. import write_caller
from ..errors import ConfigError, VaultsyncError
from ..times import now_micros
from .audit import AuditLog
from .keystore import Keystore
from .manifest import Manifest, RoleFilter

logger = logging.getLogger(__name__)

READS = "read_note"
"""The tool whose permission the note:// resources follow."""


@dataclass(frozen=True)
class Caller:
    caller_id: str
    roles: tuple[str, ...]


def refusal(rules: RoleFilter, tool: str, roles: Iterable[str]) -> str | None:
    """Why ``rules`` refuse ``tool`` to a caller holding ``roles`` (None: allowed). Same decision as
    ``RoleFilter.allows``, with the rule that made it."""
    held = set(roles)
    denied = sorted(held & set(rules.deny.get(tool, ())))
    if denied:
        return f"role_filter.deny.{tool} names the caller's role {denied[0]!r}"
    if held & set(rules.allow.get(tool, ())):
        return None
    if rules.default == "allow_all":
        return None
    return f"no role_filter.allow.{tool} entry names the caller's roles and the default is deny_all"


def check_tool_names(manifest: Manifest, known: Iterable[str]) -> None:
    """Every tool the manifest names (``allowed_tools``, ``role_filter.allow``/``deny``) must exist: a
    typo would silently allow or hide a tool. ConfigError naming the first unknown one."""
    names = set(known)
    named: list[tuple[str, str]] = [("allowed_tools", t) for t in manifest.allowed_tools or ()]
    if manifest.role_filter is not None:
        for kind in ("allow", "deny"):
            named += [(f"role_filter.{kind}.{t}", t) for t in getattr(manifest.role_filter, kind)]
    for key, tool in named:
        if tool not in names:
            raise ConfigError(
                f"manifest {manifest.path}: {key}: unknown tool {tool!r} (known: {', '.join(sorted(names))})"
            )


def restrict(tools: list[Any], manifest: Manifest | None, known: Iterable[str]) -> list[Any]:
    """``tools`` (SDK ``Tool`` objects) without those the manifest's ``allowed_tools`` leaves out; names checked
    against ``known``, every tool a server may offer (though its settings may not register it)."""
    if manifest is None:
        return tools
    check_tool_names(manifest, {*known, *(t.name for t in tools)})
    if manifest.allowed_tools is None:
        return tools
    allowed = set(manifest.allowed_tools)
    return [t for t in tools if t.name in allowed]


class Guard:
    """The SDK server middleware that filters tools per caller and audits calls and refusals."""

    def __init__(
        self,
        manifest: Manifest,
        audit: AuditLog | None,
        sequential: Iterable[str] = (),
        same_as: Mapping[str, str] | None = None,
        vault: str | None = None,
    ) -> None:
        self.vault = vault
        """The vault's name in the records, on a hosted server (several vaults share the log)."""
        self.rules = manifest.role_filter
        self.same_as = dict(same_as or {})
        """Tools the manifest cannot name, allowed to whoever may call the tool named here (a view's own tools)."""
        self.audit = audit
        self.sequential = frozenset(sequential)
        """Tools that change the vault: their call is recorded before they start, not beside them."""
        self.reads_listed = manifest.allowed_tools is None or READS in manifest.allowed_tools
        self.anonymous = Caller(
            "stdio" if manifest.http is None else "local", self.rules.caller_roles if self.rules else ()
        )
        tokens = manifest.http.tokens if manifest.http else ()
        self.by_token = {t.sha256: Caller(t.caller_id, t.roles) for t in tokens}

    def caller(self) -> Caller:
        token = get_access_token()  # set by the SDK's auth middleware for this request (HTTP with tokens)
        if token is None:
            return self.anonymous
        found = self.by_token.get(hashlib.sha256(token.token.encode()).hexdigest())
        if found is not None:
            return found
        if token.subject:  # an OAuth access token: its subject, and its (effective) scopes as roles
            return Caller(token.subject, tuple(token.scopes))
        return Caller(token.client_id, ())

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/list" and self.rules is not None:
            return self._listed(await call_next(ctx), self.caller())
        params = ctx.params if isinstance(ctx.params, dict) else {}
        if ctx.method.startswith("resources/") or ctx.method == "subscriptions/listen":
            return await self._resource(ctx, call_next, params)
        if ctx.method != "tools/call":
            return await call_next(ctx)
        name = params.get("name")
        caller = self.caller()
        if isinstance(name, str) and self.rules is not None:
            reason = refusal(self.rules, self.same_as.get(name, name), caller.roles)
            if reason is not None:
                await self._deny(caller, name, reason)
                raise MCPError(code=METHOD_NOT_FOUND, message=f"Unknown tool: {name}")
        with write_caller.acting_for(caller.caller_id):  # a write tool's batch records whom it was done for
            return await self._audited(ctx, call_next, caller, str(name), params.get("arguments"))

    async def _resource(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, params: dict[str, Any]
    ) -> HandlerResult:
        """Resources are read_note's: refused as a method that does not exist when it is."""
        caller = self.caller()
        reason = None
        if not self.reads_listed:
            reason = f"allowed_tools leaves out {READS}, which the note:// resources stand for"
        elif self.rules is not None:
            why = refusal(self.rules, READS, caller.roles)
            reason = None if why is None else f"the note:// resources are {READS}'s: {why}"
        if reason is not None:
            await self._deny(caller, ctx.method, reason)
            raise MCPError(code=METHOD_NOT_FOUND, message=f"Method not found: {ctx.method}")
        if ctx.method != "resources/read":
            return await call_next(ctx)
        return await self._audited(ctx, call_next, caller, ctx.method, {"uri": params.get("uri")})

    async def _deny(self, caller: Caller, name: str, reason: str) -> None:
        if self.audit is not None:
            audit = self.audit
            await self._record(
                lambda: audit.denial(caller_id=caller.caller_id, tool_name=name, reason=reason, vault=self.vault)
            )

    async def _audited(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, caller: Caller, name: str, arguments: Any
    ) -> HandlerResult:
        """Run the request and, with an audit log, record it: the ``call`` record is on disk before the
        answer leaves (written while the tool works, or before it starts for a tool that changes the
        vault), then the ``result`` record. A call that cannot be recorded is not answered."""
        if self.audit is None:
            return await call_next(ctx)
        audit = self.audit
        started, clock = now_micros(), time.perf_counter()

        def begin() -> int:
            return audit.begin(
                caller_id=caller.caller_id, tool=name, arguments=arguments, started=started, vault=self.vault
            )

        def finish(seq: int, result: Any, ok: bool) -> None:
            audit.finish(
                seq,
                caller_id=caller.caller_id,
                tool=name,
                result=result,
                ok=ok,
                duration_ms=(time.perf_counter() - clock) * 1000,
            )

        if name in self.sequential:
            seq = await self._record(begin)
            failure, result = await self._run(ctx, call_next)
        else:
            box: dict[str, Any] = {}

            async def begin_beside() -> None:
                try:
                    box["seq"] = await self._record(begin)
                except MCPError as exc:
                    box["error"] = exc

            async with anyio.create_task_group() as tg:
                tg.start_soon(begin_beside)
                failure, result = await self._run(ctx, call_next)
            if "error" in box:
                raise box["error"]
            seq = box["seq"]
        await self._record(
            lambda: finish(seq, result, failure is None and isinstance(result, dict) and not result.get("isError"))
        )
        if failure is not None:
            raise failure
        return result

    @staticmethod
    async def _run(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> tuple[Exception | None, Any]:
        try:
            return None, await call_next(ctx)
        except Exception as exc:  # recorded as an error, then raised as it was
            return exc, None

    @staticmethod
    async def _record(append: Callable[[], Any]) -> Any:
        """Append to the audit log off the event loop; a call that cannot be audited is not answered."""
        try:
            with anyio.CancelScope(shield=True):
                return await anyio.to_thread.run_sync(append)
        except (VaultsyncError, OSError) as exc:
            logger.error("vaultsync: the audit log refused a record: %s", exc)
            raise MCPError(
                code=INTERNAL_ERROR, message="the call could not be audited; the server's log says why"
            ) from None

    def _listed(self, result: HandlerResult, caller: Caller) -> HandlerResult:
        assert self.rules is not None
        if not isinstance(result, dict):
            return result
        tools = result.get("tools")
        if not isinstance(tools, list):
            return result
        shown = [
            t
            for t in tools
            if refusal(self.rules, self.same_as.get(str(t.get("name")), str(t.get("name"))), caller.roles) is None
        ]
        return {**result, "tools": shown}


def guard(
    manifest: Manifest | None,
    keystore: Keystore | None = None,
    sequential: Iterable[str] = (),
    same_as: Mapping[str, str] | None = None,
    audit: AuditLog | None = None,
    vault: str | None = None,
) -> list[Guard]:
    """The middleware the manifest asks for: none without ``[role_filter]``, ``audit_log_path`` and an
    ``allowed_tools`` that leaves ``read_note`` out. ``keystore``: the manifest's, loaded once by the
    caller, signs the audit records. ``audit``: a log already open (a hosted server's vaults share one),
    its records naming ``vault``."""
    if manifest is None or (
        manifest.role_filter is None
        and manifest.audit_log_path is None
        and (manifest.allowed_tools is None or READS in manifest.allowed_tools)
    ):
        return []
    if audit is None and manifest.audit_log_path:
        audit = AuditLog(manifest.audit_log_path, manifest.db_path, keystore, manifest.audit_digest_key_path)
    return [Guard(manifest, audit, sequential, same_as, vault)]
