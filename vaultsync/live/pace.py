"""The watcher's default pace, in one place: the ``Watcher``, ``watch`` and the ``watch`` command's options use
these. A module of its own, without imports, so that the command line can show them without loading the watcher."""

STEP_MS = 300
"""Quiet period: a set of changes is written once no change arrived for this long."""

DEBOUNCE_MS = 3000
"""Maximum wait: a set of changes is written at the latest this long after its first change."""

RECONCILE_S = 300.0
"""A full rescan this often repairs changes the OS did not report (0 disables it)."""

MAX_FAILING_S = 60.0
"""Batches that keep failing this long (for a reason no outage the watcher waits out explains) stop the ``watch``
command with an error naming the cause: a service manager restarts it, and its catch-up scan records what was
pending. About seven attempts, the retries backing off from half a second to 30 s."""
