"""Names and log lines made safe to print: control characters shown as escapes, never sent raw.

A note's name is chosen by whoever wrote the file, and a name can hold anything but ``/`` and NUL:
``ESC ]0;title BEL`` retitles a terminal, colour codes recolour what follows, a newline starts what
looks like a line of its own (a forged log line), a bidirectional override reorders what is shown.
Every name and message vaultsync prints for people (the command line's human output, its error
lines, its log) goes through ``printable``: each such character is written as a Python-style escape
(``\\x1b``, ``\\n``, ``\\u202e``), everything else as it is. JSON output is escaped by JSON itself.
Write tools refuse these characters in the names they create (``disk.paths.writable_note_path``).
"""

from __future__ import annotations

import logging
import re

__all__ = ["UNPRINTABLE", "PrintableFormatter", "printable"]

UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""Control characters (C0, DEL, C1), line and paragraph separators, and bidirectional embeddings,
overrides and isolates: what can move the cursor, end a line or change what a terminal shows."""

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every ``UNPRINTABLE`` character written as an escape (one line, nothing a terminal acts on).

    Example:
        >>> printable("Inbox/\\x1b]0;owned\\x07 note\\nforged.md")
        'Inbox/\\\\x1b]0;owned\\\\x07 note\\\\nforged.md'
    """
    return UNPRINTABLE.sub(_escape, text)


class PrintableFormatter(logging.Formatter):
    """A log formatter whose messages are ``printable``: one record, one line, whatever a name holds.

    The message (with its arguments filled in) is escaped; a traceback that follows it stays as it is.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's own name
        record.message = printable(record.message)
        return super().formatMessage(record)
