"""The note-history MCP App (extension ``io.modelcontextprotocol/ui``): a view of a note through time,
shown inside the chat by hosts that support apps. See ``history.py``."""

from .history import APP_URI, attach_history_app

__all__ = ["APP_URI", "attach_history_app"]
