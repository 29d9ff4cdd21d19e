"""Embedders for tests."""

from __future__ import annotations

from vaultsync.embed.embedders import HashEmbedder


class FusedHash(HashEmbedder):
    """The hashed embedder, marked as one the default mode fuses (to check the fused pipeline's exactness)."""

    embedder_id = "hash-fused"
    fuse = True


class BackgroundHash(FusedHash):
    """``FusedHash`` whose vectors are filled after each batch (``Embedder.background``), as the semantic model's."""

    embedder_id = "hash-background"
    background = True
