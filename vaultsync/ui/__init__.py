"""``vaultsync ui``: a local web page to see a vault through time (timeline, tree, notes, diffs, search).

``build_app`` makes the guarded Starlette app over a ``Vault``; ``serve`` runs it on loopback. The page
(``static/``) is plain HTML, CSS and JavaScript shipped in the package, so it works offline.
"""

from __future__ import annotations

from .app import build_app, serve
from .views import Explorer

__all__ = ["Explorer", "build_app", "serve"]
