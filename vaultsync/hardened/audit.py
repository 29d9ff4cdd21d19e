"""The hardened mode's audit log: JSON lines, hash-chained, HMAC-signed when a keystore is configured,
fsynced, its chain head also kept in the store.

A tool call leaves two records: ``call`` when it starts (who, which tool, the digest of its
arguments, ``as_of``), on disk (fsynced) before its answer leaves — the fsync runs while the tool
works, so it adds little to the answer's time —, and ``result`` when it ends (its outcome, result
count and duration), written before the answer leaves and fsynced by a background flush within
milliseconds. A refused call leaves one ``denial`` record, fsynced before the refusal is sent.
A record (canonical JSON: sorted keys, no spaces, UTF-8) is::

    {"v": 1, "log": LOG_ID, "seq": N, "prev": SHA-256 of record N-1 (64 zeros for the first),
     "event": "call", "at": ..., "caller_id": ..., "tool": ..., "arguments_hmac": ..., "digest_key": ...,
     "as_of": ..., "key_id": ..., "hmac": HMAC-SHA256 of the record without "hmac"}

with ``"event": "result"`` and ``call`` (the call record's ``seq``), ``caller_id``, ``tool``,
``result_count``, ``duration_ms``, ``outcome`` ("ok" | "error") for a result, or ``"event":
"denial"`` with ``caller_id, tool_name, attempted_at, reason`` for a refused call. Arguments are
never written, only ``arguments_hmac``: the HMAC-SHA256 of their canonical JSON under the install's digest key
(``DigestKey``; ``digest_key`` names it), so that whoever holds the log but not the key cannot confirm a guess
of what a call asked (a purged secret, say). Logs written before held ``arguments_sha256``, an unkeyed SHA-256
that does allow such a guess; their chain verifies as ever. A record's hash is the SHA-256 of its
canonical JSON (``hmac`` included); the store's head (``vaultsync/store/audit.py``) holds the
record count and the last hash, moved in the same step as each append, so a log that was truncated
or rewritten, even consistently, no longer ends where the store says. ``verify.py`` checks a log.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import stat
import threading
import uuid
from pathlib import Path
from typing import Any

from ..errors import ConfigError, VaultsyncError
from ..store import open_store
from ..times import format_time, now_micros
from .keystore import Keystore
from .manifest import read_private

logger = logging.getLogger(__name__)

GENESIS = "0" * 64
"""The ``prev`` of a log's first record."""
FORMAT = 1
COUNTED = ("hits", "notes", "revisions", "changes", "outgoing", "backlinks")
"""The lists a tool result counts as its result count (a result without one counts 1)."""


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(record: dict[str, Any]) -> str:
    """A record's hash: SHA-256 hex of its canonical JSON."""
    return hashlib.sha256(canonical(record).encode("utf-8")).hexdigest()


def signed_part(record: dict[str, Any]) -> bytes:
    """What a record's HMAC covers: the record without ``hmac`` (its ``key_id`` included)."""
    return canonical({k: v for k, v in record.items() if k != "hmac"}).encode("utf-8")


DIGEST_KEY_NAME = "audit-digest.key"
"""The digest key's file in the audit log's folder, unless the manifest names another (``audit_digest_key_path``)."""


class DigestKey:
    """The secret the arguments of calls are digested with: 32 random bytes as 64 hex digits in a file of mode
    600, made at the first start that needs it (atomically: written aside, then linked into place, so two
    servers starting together read the same key) and read like the keystore (refused when others may read it
    or change a folder on its way). Removing it makes the digests already written unconfirmable for good (the
    chain and HMACs still verify); a new key is made at the next start."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).absolute()
        if not self.path.exists():
            _create_key(self.path)
        text = read_private(self.path, "audit digest key", readable=True).strip()
        try:
            key = bytes.fromhex(text)
        except ValueError:
            key = b""
        if len(key) != 32:
            raise ConfigError(f"the audit digest key {self.path} must hold 64 hex digits (32 random bytes)")
        self.key = key
        self.key_id = hashlib.sha256(b"vaultsync audit digest key\n" + key).hexdigest()[:16]
        """Names the key in each record (it reveals nothing of it)."""

    def arguments(self, arguments: Any) -> str:
        """The HMAC-SHA256 hex of the arguments' canonical JSON."""
        data = canonical(arguments if arguments is not None else {}).encode("utf-8")
        return hmac.new(self.key, data, "sha256").hexdigest()


def _create_key(path: Path) -> None:
    aside = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secrets.token_hex(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(aside, path)
        except FileExistsError:
            pass  # another server made it first: use that one
        except OSError as exc:
            raise ConfigError(f"cannot create the audit digest key {path}: {exc.strerror}") from None
    finally:
        os.unlink(aside)
    logger.info("vaultsync: created the audit digest key %s", path)


def result_count(result: Any) -> int:
    """Hits, notes, revisions, changes or links in a tools/call result (wire form); 1 for another result."""
    if not isinstance(result, dict) or result.get("isError"):
        return 0
    content = result.get("structuredContent")
    if not isinstance(content, dict):
        return 1
    if isinstance(content.get("folders"), dict):  # list_notes: rows grouped by folder
        return sum(len(rows) for rows in content["folders"].values() if isinstance(rows, list))
    notes = content.get("notes")
    if isinstance(notes, list) and all(isinstance(n, dict) and isinstance(n.get("hits"), list) for n in notes):
        return sum(len(n["hits"]) for n in notes)  # search_notes: hits grouped by note
    lists = [content[k] for k in COUNTED if isinstance(content.get(k), list)]
    return sum(len(x) for x in lists) if lists else 1


def check_folder(folder: Path) -> None:
    """The audit log's folder must exist, be a real folder, and be writable by its owner only."""
    try:
        info = os.lstat(folder)
    except OSError as exc:
        raise ConfigError(f"the audit log's folder {folder} cannot be used: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"the audit log's folder {folder} is not a folder (a symlink or a file)")
    if info.st_mode & 0o022:
        raise ConfigError(
            f"the audit log's folder {folder} may be written by other users (mode "
            f"{info.st_mode & 0o777:o}): they could replace the log; chmod go-w {folder}"
        )
    if info.st_uid not in (0, os.getuid()):
        raise ConfigError(f"the audit log's folder {folder} belongs to another user (uid {info.st_uid})")


def read_lines(path: Path) -> list[bytes]:
    """The log's lines (each with its newline; a last line without one is kept as it is)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        return f.readlines()


def parse(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class AuditLog:
    """Appends records to the log at ``path``, each in one step with the store's head (thread-safe; several
    processes appending to one log take turns through the store's write lock).

    Opening checks the folder and the file (mode 600, no symlink) and that the log ends where the store
    says; a log that does not (truncated, emptied, rewritten) is refused: check it with
    ``vaultsync audit verify`` and give the server a new log file.
    """

    def __init__(
        self, path: Path, db_path: Path | str, keystore: Keystore | None = None, digest_key: Path | None = None
    ) -> None:
        self.path = Path(path).absolute()
        self.keystore = keystore
        self._lock = threading.Lock()
        self._closing = False
        self._dirty = threading.Event()
        check_folder(self.path.parent)
        self.digest = DigestKey(digest_key or self.path.parent / DIGEST_KEY_NAME)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            self._fd = os.open(self.path, flags, 0o600)
        except OSError as exc:
            raise ConfigError(f"cannot open the audit log {self.path}: {exc.strerror}") from None
        try:
            info = os.fstat(self._fd)
            if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o077 or info.st_uid != os.getuid():
                raise ConfigError(
                    f"the audit log {self.path} must be a regular file of yours with mode 600 "
                    f"(it is mode {info.st_mode & 0o777:o}, uid {info.st_uid}); chmod 600 {self.path}"
                )
            self.store = open_store(db_path, search=False)
            try:
                refused = self.store.audit_unwritable()
                if refused:
                    raise ConfigError(
                        f"the audit log {self.path} cannot be kept: {refused} (its head is moved with each record); "
                        "grant the server's role INSERT and UPDATE on audit_heads"
                    )
                self.log_id = self._resume()
            except BaseException:
                self.store.close()
                raise
        except BaseException:
            os.close(self._fd)
            raise
        self._flusher = threading.Thread(target=self._flush, name="vaultsync-audit-flush", daemon=True)
        self._flusher.start()

    def _resume(self) -> str:
        """The log's id: the one its records carry, after checking it ends at the store's head; a new one for
        a new (empty) file the store does not know."""
        lines = read_lines(self.path)
        where = f"the audit log {self.path}"
        advice = "check it with `vaultsync audit verify` and point audit_log_path at a new file"
        if not lines:
            known = self.store.audit_head(path=str(self.path))
            if known is not None:
                raise ConfigError(
                    f"{where} is empty but the store's head says it held {known.records} records: "
                    f"it was truncated or replaced; {advice}"
                )
            return uuid.uuid4().hex
        first, last = parse(lines[0]), parse(lines[-1])
        log_id = first.get("log") if first else None
        head = self.store.audit_head(log_id=log_id) if isinstance(log_id, str) else None
        if head is None:
            raise ConfigError(f"{where} is not a log the store knows (no head for its first record's log id); {advice}")
        if not lines[-1].endswith(b"\n") or last is None or len(lines) != head.records or digest(last) != head.head:
            raise ConfigError(f"{where} does not end where the store's head says ({head.records} records); {advice}")
        return log_id  # type: ignore[return-value]  # a str here: head is None for any other value

    def unwritable(self) -> str | None:
        """Why a record could not be appended now (the store refuses to move the head), None when it could."""
        with self._lock:
            if self._fd < 0:
                return "the audit log is closed"
            try:
                return self.store.audit_unwritable()
            except (VaultsyncError, OSError) as exc:
                return str(exc)

    def close(self) -> None:
        with self._lock:
            if self._fd < 0:
                return
            self._closing = True
        self._dirty.set()
        self._flusher.join()
        with self._lock:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1
            self.store.close()

    def begin(self, *, caller_id: str, tool: str, arguments: Any, started: int, vault: str | None = None) -> int:
        """Record that a call starts, on disk when this returns; its ``seq`` (for ``finish``). ``vault``: on a
        hosted server (several vaults, one log), the vault called."""
        event: dict[str, Any] = {
            "event": "call",
            "at": format_time(started),
            "caller_id": caller_id,
            "tool": tool,
            "arguments_hmac": self.digest.arguments(arguments),
            "digest_key": self.digest.key_id,
        }
        if vault is not None:
            event["vault"] = vault
        as_of = arguments.get("as_of") if isinstance(arguments, dict) else None
        if as_of is not None:
            event["as_of"] = str(as_of)
        return self.append(event, durable=True)

    def finish(self, call: int, *, caller_id: str, tool: str, duration_ms: float, result: Any, ok: bool) -> None:
        """Record how call ``call`` ended (``ok``: a result that is not an error); flushed in the background."""
        self.append(
            {
                "event": "result",
                "call": call,
                "caller_id": caller_id,
                "tool": tool,
                "result_count": result_count(result) if ok else 0,
                "duration_ms": round(duration_ms, 3),
                "outcome": "ok" if ok else "error",
            },
            durable=False,
        )

    def denial(self, *, caller_id: str, tool_name: str, reason: str, vault: str | None = None) -> None:
        """Record a refused call (on disk when this returns)."""
        event = {
            "event": "denial",
            "caller_id": caller_id,
            "tool_name": tool_name,
            "attempted_at": format_time(now_micros()),
            "reason": reason,
        }
        if vault is not None:
            event["vault"] = vault
        self.append(event, durable=True)

    def append(self, event: dict[str, Any], *, durable: bool = True) -> int:
        """Append one record and move the store's head; its ``seq``. ``durable``: fsync before returning
        (outside the lock, so calls starting together share the disk's flush); else the flusher does."""
        with self._lock:
            if self._fd < 0 or self._closing:
                raise ConfigError(f"the audit log {self.path} is closed")
            head = self.store.audit_append(
                self.log_id, str(self.path), lambda records, last: self._write(event, records, last)
            )
            fd = self._fd
        if durable:
            os.fsync(fd)
        else:
            self._dirty.set()
        return head.records

    def _flush(self) -> None:
        """The background flush of ``result`` records: fsync soon after each (one fsync for a burst)."""
        while True:
            self._dirty.wait()
            self._dirty.clear()
            with self._lock:
                fd, closing = self._fd, self._closing
            if fd >= 0:
                try:
                    os.fsync(fd)
                except OSError as exc:  # the next durable append fails loudly; say it here too
                    logger.error("vaultsync: cannot flush the audit log %s: %s", self.path, exc.strerror)
            if closing:
                return

    def _write(self, event: dict[str, Any], records: int, head: str) -> str:
        record = {"v": FORMAT, "log": self.log_id, "seq": records + 1, "prev": head or GENESIS, **event}
        if self.keystore is not None:
            record["key_id"] = self.keystore.current_id
            record["hmac"] = self.keystore.sign(signed_part(record))[1]
        line = canonical(record)
        data = (line + "\n").encode("utf-8")
        while data:
            data = data[os.write(self._fd, data) :]
        return hashlib.sha256(line.encode("utf-8")).hexdigest()
