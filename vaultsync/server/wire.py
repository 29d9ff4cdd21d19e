"""How a tool's answer and its argument errors go on the wire.

A tool result carries the answer twice: as a text block (what most clients hand the model) and as
``structuredContent`` (what clients that read the output schema use); the MCP specification asks for
both when a tool declares an output schema. The SDK writes the text block as indented JSON; here it is
compact JSON, the same object as the structured copy, and answers built for size (``models.Compact``) leave
out their null fields (their schema gives every such field a default, so it is not required). Every answer is
cut to one size budget here, both copies counted, saying what it left out (``budget``).

Arguments that fail validation get one line per argument naming it and what to give, instead of
pydantic's report with its documentation URLs.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp_types import CallToolResult, ContentBlock, TextContent
from pydantic import BaseModel, ValidationError

from .budget import fit
from .models import Compact


class ArgumentError(ValidationError):
    """A ``ValidationError`` whose text is the readable one: the SDK puts ``str(exc)`` in the tool error."""

    readable = ""

    def __str__(self) -> str:
        return self.readable


def readable(exc: ValidationError) -> str:
    """``exc`` in one line per argument: ``missing argument 'path'`` or ``argument 'limit': <what is wrong>``."""
    lines = []
    for error in exc.errors(include_url=False):
        name = ".".join(str(part) for part in error.get("loc", ()) if part != "arguments") or "arguments"
        if error.get("type") == "missing":
            lines.append(f"missing argument '{name}'")
        elif error.get("type") == "extra_forbidden":
            lines.append(f"unknown argument '{name}'")
        else:
            lines.append(f"argument '{name}': {error.get('msg', 'invalid')}")
    return "; ".join(lines)


class CompactMetadata(FuncMetadata):
    """The SDK's ``FuncMetadata`` with compact answers and readable argument errors."""

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        try:
            return super().validate_arguments(arguments_to_validate)
        except ValidationError as exc:
            error = ArgumentError.from_exception_data(exc.title, [])
            error.readable = readable(exc)
            raise error from None

    def convert_result(self, result: Any) -> Any:
        if self.output_model is None or not isinstance(result, BaseModel):
            converted = super().convert_result(result)
            if not isinstance(converted, CallToolResult) or not isinstance(converted.structured_content, dict):
                return converted
            data = dict(converted.structured_content)
        else:
            data = result.model_dump(mode="json", by_alias=True, exclude_none=isinstance(result, Compact))
        if data.get("omitted") is None:
            data.pop("omitted", None)
        omitted = fit(data)  # one size budget for every answer, both copies counted
        if omitted:
            data["omitted"] = {**data.get("omitted", {}), **omitted}
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        blocks: list[ContentBlock] = [TextContent(type="text", text=text)]
        link = getattr(result, "resource_link", None)  # an answer naming bytes it does not carry (an attachment's)
        if callable(link):
            blocks.append(link())
        return CallToolResult(content=blocks, structured_content=data)


def compact(metadata: FuncMetadata) -> CompactMetadata:
    """The same metadata (argument model, output schema and model) with compact answers."""
    return CompactMetadata(
        arg_model=metadata.arg_model,
        output_schema=metadata.output_schema,
        output_model=metadata.output_model,
        wrap_output=metadata.wrap_output,
    )
