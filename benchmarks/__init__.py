"""vaultsync's benchmarks: ``python -m benchmarks list | run NAME [--quick] | report [NAME]`` (see harness.py)."""

import os as _os

# The benchmarks' databases use the hashed embedder unless one asks for another (``--embedder``, bench_questions'
# MiniLM runs): with the semantic extra installed a new database would otherwise take the semantic model, and the
# recorded figures compare like with like. Inherited by the vaultsync subprocesses they start.
_os.environ.setdefault("VAULTSYNC_EMBEDDER", "hash")
