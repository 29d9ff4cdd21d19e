"""How long a save waits to be recorded: a batch never waits for the semantic model's vectors, and the watcher says
its delay from the save (the burst's first change) to the commit, in its log, its status and each batch's summary."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.embedders import BackgroundHash
from support.watch_helpers import no_thread_leaks, wait_until  # noqa: F401  (fixture)

from vaultsync import NoteNotFound, Vault
from vaultsync.live.watcher import Watcher
from vaultsync.sync import BatchSummary

FAST = {"step_ms": 50, "debounce_ms": 500, "reconcile_s": 0}


class GatedBackground(BackgroundHash):
    """A background embedder that, like a slow model on a busy machine, stays inside its embedding until the test
    opens ``gate`` (``entered`` says it is inside)."""

    embedder_id = "hash-gated"
    entered = threading.Event()
    gate = threading.Event()

    def embed_quantized(self, texts: Any) -> list[bytes]:
        type(self).entered.set()
        assert type(self).gate.wait(60), "the test never opened the gate"
        return super().embed_quantized(texts)


class Scripted:
    """An observer the test speaks for: its events arrive when the test says (``mark``), as a busy machine delivers
    a low-priority process's file events late."""

    kind = "scripted"

    def __init__(self, root: Path, mark: Any, polling: bool) -> None:
        self.mark = mark

    def intact(self) -> bool:
        return True

    def alive(self) -> bool:
        return True

    def stop(self) -> None:
        pass


def content(vault: Vault, path: str) -> str | None:
    try:
        return vault.read(path).content
    except NoteNotFound:
        return None


def test_a_batch_is_written_while_the_vector_filler_is_inside_its_embedding(
    monkeypatch: pytest.MonkeyPatch, db_path: Path, vault_dir: Path
) -> None:
    from vaultsync.embed import embedders

    monkeypatch.setitem(embedders.EMBEDDERS, "hash-gated", GatedBackground)
    monkeypatch.setattr(GatedBackground, "entered", threading.Event())
    monkeypatch.setattr(GatedBackground, "gate", threading.Event())
    with Vault.open(db_path, root=vault_dir, embedder="hash-gated") as vault:
        vault.sync()
        assert vault.vector_progress()["filled"] == 0, "a backlog of texts to fill"
        watcher = Watcher(vault, **FAST)
        try:
            watcher.start()
            assert GatedBackground.entered.wait(30), "the watcher began filling the backlog"
            (vault_dir / "Later.md").write_text("# Later\n\n- call the plumber\n", encoding="utf-8")
            wait_until(lambda: content(vault, "Later.md") is not None, timeout=20, what="the save recorded")
            assert not GatedBackground.gate.is_set() and vault.vector_progress()["filled"] == 0, (
                "recorded while the filler was still inside its embedding"
            )
        finally:
            GatedBackground.gate.set()
            watcher.stop()
        progress = vault.vector_progress()
        assert progress["filled"] > 0, "the filler went on after the batch"


def test_the_reported_delay_counts_from_the_save_when_its_event_arrives_late(db_path: Path, vault_dir: Path) -> None:
    observers: list[Scripted] = []

    def factory(root: Path, mark: Any, polling: bool) -> Scripted:
        observers.append(Scripted(root, mark, polling))
        return observers[-1]

    seen: list[BatchSummary] = []
    with (
        Vault.open(db_path, root=vault_dir) as vault,
        Watcher(vault, **FAST, observer_factory=factory, on_batch=seen.append) as watcher,
    ):
        time.sleep(0.05)  # the save comes after the catch-up batch's commit
        (vault_dir / "Later.md").write_text("# Later\n\n- call the plumber\n", encoding="utf-8")
        saved = time.time()
        time.sleep(1.0)  # the event reaches the watcher a second after the save
        observers[0].mark(["Later.md"])
        batch = wait_until(lambda: next((s for s in seen if "Later.md" in s.paths), None), what="the batch")
        assert batch.known_at is not None
        true_delay_ms = (batch.known_at / 1e6 - saved) * 1000
        assert true_delay_ms >= 1000, "the commit came after the late event"
        reported = watcher.status()["last_latency_ms"]
        assert reported >= round(true_delay_ms) - 1, "the reported delay is at least the save's wait for its commit"
        assert batch.delay_ms is not None and batch.delay_ms >= true_delay_ms
        assert batch.to_json()["delay_ms"] == round(batch.delay_ms), "told in watch --json's line too"
