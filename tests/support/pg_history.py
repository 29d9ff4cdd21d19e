"""A small vault history (STATES, one state a day from T0) and the queries both engines must answer alike."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from vaultsync import Vault

T0 = 1_700_000_000_000_000


DAY = 86_400_000_000


STATES: list[dict[str, str]] = [
    {
        "Home.md": (
            "# Home\n\nThe lighthouse keeper logs the tide every morning.\n\n## Links\n\n[[Atlas]] and [[東京]]\n"
        ),
        "Atlas.md": "---\ntags: [project/atlas]\n---\n# Atlas\n\nStorage format notes: the tide table is "
        "compressed.\n\nMorning standup at nine.\n",
        "東京.md": "# 東京\n\n東京で会議がありました。灯台の記録。\n",
        "Plans/Q1.md": "# Q1\n\nShip the storage format. Review the lighthouse budget.\n",
    },
    {
        "Home.md": "# Home\n\nThe lighthouse keeper logs the tide every evening now.\n\n## Links\n\n[[Atlas]]\n",
        "Atlas.md": "---\ntags: [project/atlas]\n---\n# Atlas\n\nStorage format notes: the tide table is "
        "compressed.\n\nMorning standup at nine.\n",
        "東京.md": "# 東京\n\n東京で会議がありました。灯台の記録。\n",
        "Plans/2025 Q1.md": "# Q1\n\nShip the storage format. Review the lighthouse budget.\n",
        "Policy.md": "---\nvalid_from: 2023-11-15\nvalid_to: 2023-11-16\n---\n# Policy\n\nTide tables are "
        "reviewed weekly during the storm season.\n",
    },
    {
        "Home.md": "# Home\n\nThe lighthouse keeper logs the tide every evening now.\n\n## Links\n\n[[Atlas]]\n",
        "Atlas.md": "---\ntags: [project/atlas]\n---\n# Atlas\n\nStorage formats compared: tide tables, "
        "logs, budgets.\n",
        "Plans/2025 Q1.md": "# Q1\n\nShip the storage format. Review the lighthouse budget and the tide gauge.\n",
        "Policy.md": "---\nvalid_from: 2023-11-16\n---\n# Policy\n\nTide tables are reviewed daily, "
        "storm season or not.\n",
        "Storm.md": "# Storm\n\nStorm season: the keeper doubles the morning watch. 灯台の記録を毎日。\n",
    },
]


QUERIES = [
    "tide",
    "reviewed",
    "storm season",
    "lighthouse keeper",
    '"storage format"',
    "stor*",
    "morning tide budget",
    "東京",
    "灯台の記録",
    "record",
    "table*",
    "the",
]


def _write(root: Path, files: dict[str, str]) -> None:
    """The vault folder holds ``files`` and nothing else (the same folder: another one is a replaced vault)."""
    for child in root.iterdir() if root.exists() else ():
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _import_all(db: Any, root: Path, embedder: str | None = None) -> list[int]:
    times = []
    for i, files in enumerate(STATES):
        _write(root, files)
        vault = Vault.open(db, root=root, name="v", embedder=embedder)
        try:
            vault.sync(known_at=T0 + i * DAY)
        finally:
            vault.close()
        times.append(T0 + i * DAY)
    return times
