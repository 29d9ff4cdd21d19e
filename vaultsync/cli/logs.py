"""How the command line's log lines look on stderr: text for people, or one JSON object a line for a log collector
(``--log-format json``: ``time``, ``level``, ``logger``, ``message``, and a line's own fields, such as an access
log line's ``client``, ``subject``, ``method``, ``path``, ``status`` and ``ms``)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys

from ..printable import PrintableFormatter

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FIELDS = "fields"
"""The ``extra`` key under which a log call gives its own fields (a dict) to the JSON format."""


class JsonFormatter(logging.Formatter):
    """One JSON object a line; never a multi-line record (a traceback is one string field)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, dict):
            line.update({k: v for k, v in fields.items() if k not in line})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(level: int, log_format: str) -> None:
    """The root handler on stderr, in ``log_format`` ("text" or "json")."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else PrintableFormatter(TEXT))
    logging.basicConfig(level=level, handlers=[handler])


__all__ = ["FIELDS", "JsonFormatter", "configure"]
