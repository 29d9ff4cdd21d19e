"""A real authorization server for the hosted tests, and the official MCP client's OAuth flow against it.

``start_issuer()`` runs panva's ``oidc-provider`` (``tests/js/oidc/issuer.mjs``, installed by ``make deps``) as a
plain Node process on a free port and returns once its discovery document answers. Its development interactions
accept any login: ``Browser`` plays the person at the browser (it follows the authorization redirect, signs in as a
chosen subject, consents) and hands the code back, as the redirect URI's listener would. ``oauth_client`` builds the
official SDK's ``OAuthClientProvider`` (discovery, DCR or CIMD, PKCE, resource indicator, refresh) around it.

    issuer = start_issuer()
    browser = Browser("alice")
    async with Client(oauth_client(url, browser)) as c: ...
    issuer.stop()
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

ISSUER_DIR = Path(__file__).resolve().parents[1] / "js" / "oidc"
REDIRECT_URI = "http://127.0.0.1:9/callback"
"""Where the issuer sends the browser back: never contacted (``Browser`` stops at the redirect and reads the code)."""


def issuer_missing() -> str | None:
    """Why the issuer cannot run here (a reason to skip), or None."""
    if shutil.which("node") is None:
        return "node not found: the OAuth end-to-end tests need Node.js (apt-get install nodejs)"
    if not (ISSUER_DIR / "node_modules" / "oidc-provider").is_dir():
        return f"oidc-provider is not installed in {ISSUER_DIR} (make deps)"
    return None


@dataclass
class Issuer:
    """A running ``issuer.mjs``: its issuer URL, local port and process."""

    url: str
    port: int
    proc: subprocess.Popen[str]
    log: Path

    @property
    def local(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> str:
        """Stop it and return what it logged (stderr)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.log.read_text(encoding="utf-8", errors="replace")


def start_issuer(log: Path, *, url: str | None = None, timeout: float = 30, **env: str) -> Issuer:
    """``issuer.mjs`` on a free port (``url``: its public issuer URL behind a proxy; ``env``: ``ISSUER_*`` settings,
    see the script), returned once ``/.well-known/oauth-authorization-server`` answers."""
    settings = {**os.environ, **env}
    if url is not None:
        settings["ISSUER_URL"] = url
    with log.open("w") as err:
        proc = subprocess.Popen(
            ["node", "issuer.mjs"],
            cwd=ISSUER_DIR,
            env=settings,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    for line in proc.stdout:  # library notices come first; the script's own line is JSON
        if line.startswith('{"issuer"'):
            facts = json.loads(line)
            break
        if time.monotonic() > deadline:
            break
    else:
        proc.wait(timeout=5)
        raise AssertionError(f"issuer.mjs exited {proc.returncode}: {log.read_text()}")
    issuer = Issuer(facts["issuer"], facts["port"], proc, log)
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"{issuer.local}/.well-known/oauth-authorization-server", timeout=2).status_code == 200:
                return issuer
        except httpx2.TransportError:
            pass
        time.sleep(0.1)
    issuer.stop()
    raise AssertionError(f"the issuer's discovery document did not answer within {timeout:g} s")


@dataclass
class Browser:
    """The person at the browser during the authorization code flow: follows the authorization URL through the
    issuer's sign-in (as ``subject``) and consent pages up to the redirect URI, and keeps the code for the SDK's
    callback handler. ``visits`` records each authorization URL (the test reads its ``resource``)."""

    subject: str
    verify: Any = True
    visits: list[str] = field(default_factory=list)
    _result: AuthorizationCodeResult | None = None

    async def redirect(self, authorization_url: str) -> None:
        self.visits.append(authorization_url)
        async with httpx2.AsyncClient(verify=self.verify, timeout=30) as http:
            url = authorization_url
            for _ in range(12):
                response = await http.get(url)
                if response.status_code == 200 and "/interaction/" in url:
                    response = await self._submit(http, url, response.text)
                if response.status_code not in (302, 303):
                    raise AssertionError(f"the issuer answered {response.status_code} at {url}: {response.text[:500]}")
                url = urljoin(url, response.headers["location"])
                if url.startswith(REDIRECT_URI):
                    query = parse_qs(urlparse(url).query)
                    if "error" in query:
                        raise AssertionError(f"authorization refused: {query}")
                    self._result = AuthorizationCodeResult(
                        code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
                    )
                    return
        raise AssertionError("the authorization flow did not reach the redirect URI")

    async def _submit(self, http: httpx2.AsyncClient, url: str, page: str) -> httpx2.Response:
        """Answer the issuer's dev interaction page: the login form (any subject) or the consent form."""
        prompt = re.search(r'name="prompt" value="(\w+)"', page)
        if prompt is None:
            raise AssertionError(f"no interaction form at {url}: {page[:500]}")
        form = {"prompt": prompt.group(1)}
        if form["prompt"] == "login":
            form |= {"login": self.subject, "password": "any"}
        return await http.post(url, data=form)

    async def callback(self) -> AuthorizationCodeResult:
        assert self._result is not None, "the callback came before the redirect"
        result, self._result = self._result, None
        return result


@dataclass
class MemoryStorage:
    """The SDK's ``TokenStorage`` in memory; ``tokens_seen`` keeps every access token stored (a refresh adds one)."""

    tokens: OAuthToken | None = None
    client: OAuthClientInformationFull | None = None
    tokens_seen: list[OAuthToken] = field(default_factory=list)

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.tokens_seen.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def oauth_provider(
    server_url: str,
    browser: Browser,
    storage: MemoryStorage,
    *,
    client_name: str = "vaultsync tests",
    client_metadata_url: str | None = None,
) -> OAuthClientProvider:
    """The official SDK's OAuth client for ``server_url``: a public client (PKCE, no secret) that registers by DCR,
    or by its client ID metadata document when ``client_metadata_url`` is given and the issuer supports CIMD."""
    metadata = OAuthClientMetadata(
        redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
        client_name=client_name,
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(
        server_url,
        metadata,
        storage,
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
        client_metadata_url=client_metadata_url,
    )


def oauth_client(
    server_url: str, browser: Browser, storage: MemoryStorage | None = None, *, verify: Any = True, **kw: Any
) -> Any:
    """A streamable HTTP transport for ``Client(...)`` whose requests carry the OAuth flow above."""
    provider = oauth_provider(server_url, browser, storage or MemoryStorage(), **kw)
    http = httpx2.AsyncClient(auth=provider, verify=verify, timeout=30)
    return streamable_http_client(server_url, http_client=http)


def client_metadata_document(url: str, *, client_name: str = "vaultsync tests (CIMD)") -> dict[str, Any]:
    """The client ID metadata document a client publishes at ``url`` (its ``client_id`` is that URL)."""
    return {
        "client_id": url,
        "client_name": client_name,
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }


class ClientDocumentSite:
    """An MCP client vendor's https site publishing its client ID metadata document (a thread of this process;
    ``cert``/``key``: a certificate for 127.0.0.1 the issuer trusts through NODE_EXTRA_CA_CERTS)."""

    def __init__(self, cert: Path, key: Path, path: str = "/oauth/vaultsync-tests.json") -> None:
        import ssl
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                site.fetches += 1
                body = json.dumps(site.document).encode()
                found = self.path == path
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body) if found else 0))
                self.end_headers()
                if found:
                    self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.fetches = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://localhost:{self.httpd.server_address[1]}{path}"
        self.document = client_metadata_document(self.url)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
