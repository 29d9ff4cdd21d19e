"""A small token issuer for the resource-server tests: its metadata, its key set (JWKS) and RFC 7662 introspection
over real HTTP (a stdlib HTTP server on a thread), keys made with ``cryptography``, tokens signed with PyJWT.

It is not an authorization server (no login, no client registration): it only publishes what a resource server
reads and mints the tokens the tests present, good and bad. Its key set can turn hostile (``jwks_mode``):
``"trickle"`` sends the document one byte every ``trickle_s``, ``"hang"`` answers nothing until the mode changes;
``extra_keys`` are published after the good keys as they are (malformed ones included). Each is bounded: a
request held ends when the mode changes, the issuer stops, or after ``HOLD_S``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

INTROSPECTION_CLIENT = ("vaultsync-rs", "introspection-secret-0123456789")
HOLD_S = 120.0
"""The longest a hostile key set holds one request."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Issuer:
    """``with Issuer() as issuer:`` serves ``issuer.url``; ``issuer.token(...)`` mints a token."""

    def __init__(self) -> None:
        self.private: dict[str, Any] = {}
        self.published: list[str] = []
        self.jwks_fetches = 0
        """Requests for the key set (answered or not)."""
        self.jwks_mode = "serve"
        self.trickle_s = 4.0
        self.extra_keys: list[Any] = []
        self._stopping = threading.Event()
        self.opaque: dict[str, dict[str, Any]] = {}
        """Opaque token -> what introspection answers for it."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Issuer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------ keys

    def add_key(self, kid: str, alg: str = "RS256", publish: bool = True) -> str:
        key = ec.generate_private_key(ec.SECP256R1()) if alg == "ES256" else rsa.generate_private_key(65537, 2048)
        self.private[kid] = (key, alg)
        if publish:
            self.published.append(kid)
        return kid

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid in self.published:
            key, alg = self.private[kid]
            algo = jwt.algorithms.ECAlgorithm if alg == "ES256" else jwt.algorithms.RSAAlgorithm
            jwk = algo.to_jwk(key.public_key(), as_dict=True)
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": alg})
        return {"keys": keys + self.extra_keys}

    def _held(self, mode: str, started: float) -> bool:
        """Whether a hostile answer in ``mode`` goes on (not once the mode changed, the issuer stops, or HOLD_S)."""
        return self.jwks_mode == mode and not self._stopping.is_set() and time.monotonic() - started < HOLD_S

    def public_pem(self, kid: str) -> bytes:
        key, _ = self.private[kid]
        spki = serialization.PublicFormat.SubjectPublicKeyInfo
        return key.public_key().public_bytes(serialization.Encoding.PEM, spki)

    # ------------------------------------------------------------ tokens

    def claims(self, sub: str, aud: Any, scope: str, *, ttl_s: float = 300, **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        base = {"iss": self.url, "sub": sub, "aud": aud, "scope": scope, "iat": now, "exp": now + ttl_s}
        return {**base, **extra}

    def token(
        self,
        sub: str,
        aud: Any,
        scope: str = "vault:read",
        *,
        kid: str | None = None,
        without: tuple[str, ...] = (),
        **extra: Any,
    ) -> str:
        """A JWT signed with key ``kid`` (default: the first published one), without the claims ``without``."""
        kid = kid or self.published[0]
        key, alg = self.private[kid]
        claims = {k: v for k, v in self.claims(sub, aud, scope, **extra).items() if k not in without}
        return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})

    def unsigned(self, sub: str, aud: Any, scope: str = "vault:read") -> str:
        """``alg: none``: no signature at all."""
        head = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": self.published[0]}).encode())
        return f"{head}.{_b64(json.dumps(self.claims(sub, aud, scope)).encode())}."

    def hs256_with_public_key(self, sub: str, aud: Any, scope: str = "vault:read") -> str:
        """HS256 whose HMAC secret is the issuer's public key (PEM): the classic key-confusion forgery."""
        kid = self.published[0]
        head = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
        body = _b64(json.dumps(self.claims(sub, aud, scope)).encode())
        sig = hmac.new(self.public_pem(kid), f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{_b64(sig)}"

    # ------------------------------------------------------------ HTTP

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, status: int, data: Any) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/.well-known/oauth-authorization-server":
                    return self._json(
                        200,
                        {
                            "issuer": issuer.url,
                            "jwks_uri": f"{issuer.url}/jwks",
                            "introspection_endpoint": f"{issuer.url}/introspect",
                            "authorization_endpoint": f"{issuer.url}/authorize",
                            "token_endpoint": f"{issuer.url}/token",
                            "response_types_supported": ["code"],
                        },
                    )
                if self.path == "/jwks":
                    issuer.jwks_fetches += 1
                    if issuer.jwks_mode == "serve":
                        return self._json(200, issuer.jwks())
                    return self._hostile(issuer.jwks_mode)
                self._json(404, {"error": "not_found"})

            def _hostile(self, mode: str) -> None:
                started = time.monotonic()
                if mode == "trickle":
                    body = json.dumps(issuer.jwks()).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    for i in range(len(body)):
                        if not issuer._held(mode, started):
                            break
                        try:
                            self.wfile.write(body[i : i + 1])
                            self.wfile.flush()
                        except OSError:  # the client gave up
                            break
                        issuer._stopping.wait(issuer.trickle_s)
                else:  # hang: the connection stays open, nothing is sent
                    while issuer._held(mode, started):
                        issuer._stopping.wait(0.05)
                self.close_connection = True

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = parse_qs(self.rfile.read(length).decode())
                expected = "Basic " + base64.b64encode(":".join(INTROSPECTION_CLIENT).encode()).decode()
                if self.path != "/introspect" or self.headers.get("Authorization") != expected:
                    return self._json(401, {"error": "invalid_client"})
                token = (form.get("token") or [""])[0]
                self._json(200, issuer.opaque.get(token, {"active": False}))

        return Handler
