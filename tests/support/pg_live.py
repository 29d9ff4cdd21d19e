"""Live-table states and the searches the PostgreSQL engine's live docs must answer as its full tables."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from vaultsync import Vault

T0 = 1_700_000_000_000_000


HOUR = 3_600_000_000


SHARED = "# Shared\n\nThe tide gauge and the lighthouse keeper, shared by both vaults.\n"


STATES: list[dict[str, str]] = [
    {
        "Home.md": "# Home\n\nThe lighthouse keeper logs the tide.\n\n## More\n\nMorning watch.\n",
        "Shared.md": SHARED,
        "Old.md": "# Old\n\nAn old storm report, tide tables and gauges.\n",
    },
    {
        "Home.md": "# Home\n\nThe lighthouse keeper logs the tide every evening.\n\n## More\n\nMorning watch.\n",
        "Shared.md": SHARED,
        "Archive/Old.md": "# Old\n\nAn old storm report, tide tables and gauges.\n",
        "Copy.md": "# Home\n\nThe lighthouse keeper logs the tide.\n\n## More\n\nMorning watch.\n",
    },
    {
        "Home.md": "# Home\n\nThe lighthouse keeper logs the tide.\n\n## More\n\nMorning watch.\n",  # back again
        "Shared.md": SHARED,
        "Storm.md": "# Storm\n\nStorm season: the keeper doubles the morning watch.\n",
    },
    {
        "Home.md": "# Home\n\nThe lighthouse keeper logs the tide.\n\n## More\n\nMorning watch.\n",
        "Storm.md": "# Storm\n\nStorm season: the keeper doubles the morning watch.\n",
    },
]


VECTOR_COLUMNS = (
    "SELECT array_agg(c.relname || '.' || a.attname ORDER BY 1) FROM pg_attribute a "
    "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
    "AND a.attnum > 0 AND NOT a.attisdropped AND (a.attname IN ('vec', 'embedding') "
    "OR format_type(a.atttypid, NULL) IN ('vector', 'halfvec'))"
)
"""Every column of the schema's tables that holds a vector (a copy of one doc's)."""


OTHER = {"Shared.md": SHARED, "Note.md": "# Note\n\nThe tide tables of the other vault.\n"}


QUERIES = ["tide", "lighthouse keeper", "storm season", "stor*", "morning watch", "the", "keeper tide gauge"]


def _write(root: Path, files: dict[str, str]) -> None:
    """The vault folder holds ``files`` and nothing else (the same folder: another one is a replaced vault)."""
    for child in root.iterdir() if root.exists() else ():
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


def _history(db: Any, tmp_path: Path, check: Any = None, states: list[dict[str, str]] = STATES) -> list[int]:
    times = []
    for i, files in enumerate(states):
        _write(tmp_path / "v", files)
        with Vault.open(db, root=tmp_path / "v", name="v") as vault:
            vault.sync(known_at=T0 + 2 * i * HOUR)
        times.append(T0 + 2 * i * HOUR)
        if i == 1:
            _write(tmp_path / "w", OTHER)
            with Vault.open(db, root=tmp_path / "w", name="w") as other:
                other.sync(known_at=T0 + 2 * i * HOUR + HOUR)
        if check is not None:
            check(db)
    return times


def _hits(vault: Vault, query: str, mode: str, at: int | None, **options: Any) -> list[tuple]:
    return [
        (h["path"], h["chunk_id"], h["score"])
        for h in vault.search(query, mode=mode, as_of=at, limit=5, **options).hits
    ]


def _same_searches(lite_db: Path, dsn: str, times: list[int]) -> int:
    compared = 0
    with Vault.open(lite_db, name="v", readonly=True) as lite, Vault.open(dsn, name="v", readonly=True) as pg:
        for at in (None, T0 - 1, *times, *(t + HOUR for t in times)):
            for query in QUERIES:
                for mode in ("keyword", "hybrid", "vector"):
                    for options in ({}, {"prefix": "Archive/"}):
                        want, got = _hits(lite, query, mode, at, **options), _hits(pg, query, mode, at, **options)
                        assert [g[:2] for g in got] == [w[:2] for w in want], (query, mode, at, options)
                        tolerance = 0.0 if mode == "vector" else 1e-9
                        assert all(abs(g[2] - w[2]) <= tolerance for g, w in zip(got, want)), (query, mode, at)
                        compared += len(want)
    return compared
