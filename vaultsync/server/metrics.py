"""``GET /metrics``: an HTTP server's counters in the Prometheus text format (opt-in: ``[http] metrics = true``).

What it counts: requests by kind (``mcp``, ``health``, ``ready``, ``metadata``, ``metrics``, ``other``) and status
class, their latency (a histogram), the answers that were server errors, and for each vault a watcher in this
process records, its batches, failed attempts, pending paths and lag, and for every vault served whether it is
current and how old its watcher's heartbeat is (``live/heartbeat.py``: the watcher may run in another process).
Never a note's text or path, a query, a header or a subject. Like ``/health`` and ``/ready`` it answers without a
token: expose it to the machine's monitoring only (the nginx example refuses it from outside).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .served import ServedVault

BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Upper bounds of the request latency histogram, in seconds."""
KINDS = {"/health": "health", "/ready": "ready", "/metrics": "metrics"}


def kind_of(path: str) -> str:
    """What a request asked for, without anything it named (a vault, a note)."""
    if path in KINDS:
        return KINDS[path]
    if path.startswith("/.well-known/"):
        return "metadata"
    if path == "/mcp" or path.endswith("/mcp"):
        return "mcp"
    return "other"


class Metrics:
    """One server's counters; ``observe`` from any thread, ``render`` for ``/metrics``."""

    def __init__(self, served: Sequence[ServedVault] = ()) -> None:
        self.served = list(served)
        self._lock = threading.Lock()
        self._requests: Counter[tuple[str, str]] = Counter()
        self._errors: Counter[str] = Counter()
        self._buckets: Counter[tuple[str, float]] = Counter()
        self._sum: dict[str, float] = {}
        self._count: Counter[str] = Counter()

    def observe(self, path: str, status: int, seconds: float) -> None:
        kind = kind_of(path)
        with self._lock:
            self._requests[(kind, f"{status // 100}xx" if status else "none")] += 1
            if status >= 500 or not status:
                self._errors[kind] += 1
            for bound in BUCKETS_S:
                if seconds <= bound:
                    self._buckets[(kind, bound)] += 1
            self._sum[kind] = self._sum.get(kind, 0.0) + seconds
            self._count[kind] += 1

    def render(self) -> str:
        lines = [
            "# HELP vaultsync_http_requests_total HTTP requests answered, by kind and status class.",
            "# TYPE vaultsync_http_requests_total counter",
        ]
        with self._lock:
            for (kind, status), n in sorted(self._requests.items()):
                lines.append(f'vaultsync_http_requests_total{{kind="{kind}",status="{status}"}} {n}')
            lines += [
                "# HELP vaultsync_http_errors_total HTTP requests that ended in a server error (5xx or no answer).",
                "# TYPE vaultsync_http_errors_total counter",
            ]
            for kind, n in sorted(self._errors.items()):
                lines.append(f'vaultsync_http_errors_total{{kind="{kind}"}} {n}')
            lines += [
                "# HELP vaultsync_http_request_seconds Time to answer an HTTP request.",
                "# TYPE vaultsync_http_request_seconds histogram",
            ]
            for kind in sorted(self._count):
                for bound in BUCKETS_S:
                    n = self._buckets[(kind, bound)]
                    lines.append(f'vaultsync_http_request_seconds_bucket{{kind="{kind}",le="{bound:g}"}} {n}')
                total = self._count[kind]
                lines.append(f'vaultsync_http_request_seconds_bucket{{kind="{kind}",le="+Inf"}} {total}')
                lines.append(f'vaultsync_http_request_seconds_sum{{kind="{kind}"}} {self._sum[kind]:.6f}')
                lines.append(f'vaultsync_http_request_seconds_count{{kind="{kind}"}} {total}')
        lines += self._watchers()
        lines += self._currency()
        return "\n".join(lines) + "\n"

    def _watchers(self) -> list[str]:
        rows = []
        for one in self.served:
            watcher = one.watcher
            if watcher is not None:
                rows.append((one.config.vault or watcher.vault.name, watcher.status()))
        if not rows:
            return []
        lines = []
        for name, help_, key, kind, scale in (
            ("vaultsync_watcher_batches_total", "Batches this process's watcher wrote.", "batches", "counter", 1),
            ("vaultsync_watcher_failures_total", "Failed attempts to write a batch.", "failures", "counter", 1),
            ("vaultsync_watcher_pending_paths", "Changed paths waiting for the next batch.", "pending", "gauge", 1),
            ("vaultsync_watcher_lag_seconds", "Age of the oldest change not yet written.", "lag_ms", "gauge", 1000),
        ):
            lines += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}"]
            for vault, status in rows:
                value = (status.get(key) or 0) / scale
                label = vault.replace("\\", "\\\\").replace('"', '\\"')
                lines.append(f'{name}{{vault="{label}"}} {value:g}')
        return lines

    def _currency(self) -> list[str]:
        rows = []
        for one in self.served:
            told = one.currency()
            name = one.config.vault or (one.reader.name if one.reader is not None else None)
            if told.current is not None and name:
                rows.append((name.replace("\\", "\\\\").replace('"', '\\"'), told))
        if not rows:
            return []
        lines = [
            "# HELP vaultsync_vault_current 1 while the vault's watcher records and is not behind, else 0.",
            "# TYPE vaultsync_vault_current gauge",
            *(f'vaultsync_vault_current{{vault="{vault}"}} {int(bool(told.current))}' for vault, told in rows),
            "# HELP vaultsync_watcher_heartbeat_age_seconds Time since the vault's watcher last published.",
            "# TYPE vaultsync_watcher_heartbeat_age_seconds gauge",
        ]
        for vault, told in rows:
            lines.append(f'vaultsync_watcher_heartbeat_age_seconds{{vault="{vault}"}} {told.heartbeat_age_s or 0:g}')
        return lines


__all__ = ["BUCKETS_S", "Metrics", "kind_of"]
