"""``list_deleted``: the notes deleted in a window, read-only, a few lines over ``Vault.deleted``."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..times import ACCEPTED
from ..vault.lookback import deleted
from .models import DeletedResult, DeletedRow
from .served import ServedVault
from .toolkit import ToolSet, friendly, when


def add_list_deleted(tools: ToolSet, rt: ServedVault) -> None:
    @tools.add
    @friendly
    def list_deleted(
        since: Annotated[
            str | None, Field(description=f"Start of the window (exclusive): {ACCEPTED}; omit for all", max_length=64)
        ] = None,
        until: Annotated[
            str | None, Field(description="End of the window (inclusive); omit for now", max_length=64)
        ] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="Most notes to list (the latest deletions)")] = 200,
    ) -> DeletedResult:
        """List the notes deleted in a window (by default all of the history) that were still absent at its end,
        oldest deletion first: each with when it was deleted, its last revision (read_note takes it as as_of)
        and its size, and the restore command that brings it back. A renamed note is not listed, nor a note
        deleted and then created again at its path."""
        start, end = when(since, "since"), when(until, "until")
        with rt.reading() as vault:
            found = deleted(vault, start, end)
        rows = [DeletedRow.model_validate(d.to_json()) for d in found[-limit:]]
        return DeletedResult(since=since, until=until, deleted=rows, truncated=len(found) > limit)
