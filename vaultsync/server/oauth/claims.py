"""A token's claims as the resource server reads them: each of the type the specifications give it, or the token
is refused (never coerced: an ``exp`` of ``"9999999999"`` is not a time, a ``groups`` of ``"not staff"`` is not two
groups).

- ``exp``, ``nbf``, ``iat``: numbers (RFC 7519 NumericDate), never strings or booleans;
- ``iss``, ``sub``, the subject claim, ``client_id``, ``azp``: strings; ``aud``: a string or a list of strings;
- ``scope``: a space-separated string (RFC 9068); ``scp``: a list of strings;
- the groups claim: a list of strings, or one string naming **one** group (never split).

``problem`` says which claim is of the wrong type; ``scopes_of`` and ``groups_of`` read a checked token.
"""

from __future__ import annotations

from typing import Any

NUMBERS = ("exp", "nbf", "iat")
STRINGS = ("iss", "sub", "client_id", "azp")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def problem(claims: dict[str, Any], *, subject_claim: str, groups_claim: str) -> str | None:
    """Why ``claims`` cannot be taken (a claim of the wrong type), or None."""
    for name in NUMBERS:
        if name in claims and not _is_number(claims[name]):
            return f"the token's {name} claim is not a number"
    for name in (*STRINGS, subject_claim):
        if name in claims and not isinstance(claims[name], str):
            return f"the token's {name} claim is not a string"
    if "aud" in claims and not (isinstance(claims["aud"], str) or _is_strings(claims["aud"])):
        return "the token's aud claim is not a string or a list of strings"
    if "scope" in claims and not isinstance(claims["scope"], str):
        return "the token's scope claim is not a space-separated string"
    if "scope" not in claims and "scp" in claims and not _is_strings(claims["scp"]):
        return "the token's scp claim is not a list of strings"
    groups = claims.get(groups_claim)
    if groups is not None and not (isinstance(groups, str) or _is_strings(groups)):
        return f"the token's {groups_claim} claim is not a string or a list of strings"
    return None


def scopes_of(claims: dict[str, Any]) -> list[str]:
    """The ``scope`` claim (space-separated, RFC 9068) or ``scp`` (a list)."""
    value = claims.get("scope", claims.get("scp"))
    if isinstance(value, str):
        return value.split()
    return [s for s in value if isinstance(s, str)] if isinstance(value, list) else []


def groups_of(claims: dict[str, Any], claim: str) -> list[str]:
    """The groups claim: a list of names, or one string that is one group's name."""
    value = claims.get(claim)
    if isinstance(value, str):
        return [value] if value else []
    return [g for g in value if isinstance(g, str)] if isinstance(value, list) else []
