"""One size budget for every tool answer, kept where answers go on the wire (``wire``), so a new tool has it
without doing anything.

An answer travels twice in one message: as ``structuredContent`` and as the same object in a text block (a
JSON string inside the JSON-RPC message, so escaped once more). ``MAX_ANSWER_BYTES`` bounds both copies
together, in UTF-8 bytes, below the 1 MiB a 2025-era client reads in one server-sent event, with room for the
message around them.

An answer over the budget is cut field by field, the largest first: lists and objects (links, tags, hits,
rows, frontmatter keys) lose items from their end before any text is shortened, and text last. What was
left out is said in the answer's ``omitted``: for each field cut, how many items (or characters) are not
in it. A tool that pages a field says how to ask for the rest in its ``omitted`` description (read_note:
``links_offset``, ``tags_offset``; its content pages with ``offset`` and is sized by read_note itself).
"""

from __future__ import annotations

import json
from typing import Any

MAX_ANSWER_BYTES = 900_000
"""Both copies of a tool answer together (structured and text), in UTF-8 bytes."""

OMITTED = (
    "What was left out to keep the answer under the size budget: each cut field's number of items (for text, "
    "characters) not in this answer; absent when nothing was"
)


def encoded(value: Any) -> int:
    """Bytes of ``value`` as compact JSON (UTF-8)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))


def wire_bytes(value: Any) -> int:
    """Bytes of both copies of ``value`` in a tool result: the JSON, and that JSON as an escaped string."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8", "surrogatepass")) + encoded(text)


def fit(data: dict[str, Any], budget: int = MAX_ANSWER_BYTES) -> dict[str, int]:
    """Cut ``data`` (a tool answer as JSON) in place until both its copies fit ``budget``; what was left out."""
    omitted: dict[str, int] = {}
    given = data.get("omitted")
    said: dict[str, int] = dict(given) if isinstance(given, dict) else {}
    while (size := wire_bytes(data)) > budget:
        name = _largest(data)
        if name is None:
            break  # nothing left to cut (scalars only): as small as it gets
        value = data[name]
        own, on_wire = encoded(value), wire_bytes(value)  # a byte of the field is one to several on the wire
        keep = max(0, (on_wire - (size - budget)) * own // on_wire - 64)
        kept = _prefix(value, keep)
        omitted[name] = omitted.get(name, 0) + len(value) - len(kept)
        data[name] = kept
        data["omitted"] = {**said, **omitted}  # the answer says what it left out: counted in its size too
    return omitted


def _largest(data: dict[str, Any]) -> str | None:
    """The field to cut next: the largest list or object, else the largest text (None: nothing to cut)."""
    for kinds in ((list, dict), (str,)):
        sizes = {k: encoded(v) for k, v in data.items() if isinstance(v, kinds) and v and k != "omitted"}
        if sizes:
            return max(sizes, key=lambda k: sizes[k])
    return None


def _prefix(value: Any, keep: int) -> Any:
    """The longest start of ``value`` (items of a list or object, characters of a text) within ``keep`` bytes."""
    if isinstance(value, str):
        low, high = 0, len(value)
        while low < high:  # the longest prefix whose JSON fits
            mid = (low + high + 1) // 2
            low, high = (mid, high) if encoded(value[:mid]) <= keep else (low, mid - 1)
        return value[:low]
    items = list(value.items()) if isinstance(value, dict) else value
    used, count = 2, 0
    for item in items:
        used += encoded(list(item) if isinstance(value, dict) else item) + 1
        if used > keep:
            break
        count += 1
    return dict(items[:count]) if isinstance(value, dict) else items[:count]


def with_omitted(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's output schema with its answer's ``omitted`` (unless the answer's model describes it itself)."""
    properties = schema.get("properties")
    if isinstance(properties, dict) and "omitted" not in properties:
        properties["omitted"] = {"type": "object", "additionalProperties": {"type": "integer"}, "description": OMITTED}
    return schema
