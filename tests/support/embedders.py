"""Embedders for tests."""

from __future__ import annotations

import datetime as dt
import re
import shutil
from pathlib import Path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.search_truth import (BruteVector, FreshKeyword, fresh_default, overlay_oracle, same_ranking,
                          split_export)
from vaultsync.embed.embedders import HashEmbedder
from vaultsync.store.search import signals
from vaultsync.embed.tokenizer import parse_query
from vaultsync.vault import Vault


class FusedHash(HashEmbedder):
    """The hashed embedder, marked as one the default mode fuses (to check the fused pipeline's exactness)."""

    embedder_id = "hash-fused"
    fuse = True
