"""Where a fresh import of the Hub's newest commit spends its CPU (issue 22's import/parse figures).

    .venv/bin/python benchmarks/import_parts.py [--work DIR]

The Hub bundle (../shared/corpora/obsidian-hub.bundle, read at run time, never copied) is cloned into --work.
Printed, each measured in this process with ``time.process_time`` unless said:

1. the import through the library (``Vault.open(...).sync()`` with the default parse workers): wall seconds,
   the writer's CPU, and its parse workers' (``RUSAGE_CHILDREN``), and the statements that took the most time
   in the writer (apsw's statement profile; wall time, statements within triggers included in theirs);
2. the workers' steps done alone over every note: parsing, ``indexed_text``, the hashed embedding and ``quantize``,
   then ``embed_quantized`` (the two in one, what the workers run) with the word cache cold again;
3. compressing every stored text with the database's dictionary at zlib memory levels 8 and 9, and plainly.
"""

from __future__ import annotations

import argparse
import collections
import resource
import sys
import tempfile
import time
import zlib
from pathlib import Path

import apsw

from common import clone


def library_import(hub: Path, db: Path) -> None:
    from vaultsync.sync import default_workers
    from vaultsync.vault import Vault

    spent: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])

    def profile(statement: str, ns: int) -> None:
        entry = spent[" ".join(statement.split())[:100]]
        entry[0], entry[1] = entry[0] + 1, entry[1] + ns

    apsw.connection_hooks.append(lambda con: con.set_profile(profile))
    started, cpu = time.perf_counter(), time.process_time()
    with Vault.open(db, root=str(hub), parse_workers=default_workers()) as vault:
        vault.sync()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    apsw.connection_hooks.pop()
    print(f"import: {time.perf_counter() - started:.2f} s wall, writer {time.process_time() - cpu:.2f} CPU-s, "
          f"parse workers {children.ru_utime + children.ru_stime:.2f} CPU-s")
    for text, (count, ns) in sorted(spent.items(), key=lambda item: -item[1][1])[:8]:
        print(f"  {ns / 1e9:6.2f} s {count:7d}x  {text}")


def worker_steps(hub: Path) -> None:
    from vaultsync.embed.embedders import HashEmbedder, quantize
    from vaultsync.disk.folder import Present, decode, scan
    from vaultsync.parsers import parse_note
    from vaultsync.embed.tokenizer import indexable, indexed_text

    found, _ = scan(hub)
    notes = [(decode(obs.read()), path) for path, obs in sorted(found.items()) if isinstance(obs, Present)]
    tick = time.process_time()
    parsed = [parse_note(text, path) for text, path in notes]
    parse, tick = time.process_time() - tick, time.process_time()
    texts = [indexed_text(p.title, p.aliases, c.heading_path, c.text) for p in parsed
             for c, keep in zip(p.chunks, indexable([c.text for c in p.chunks])) if keep]
    index_text, tick = time.process_time() - tick, time.process_time()
    vectors = HashEmbedder().embed_normalized(texts)
    embed, tick = time.process_time() - tick, time.process_time()
    for vector in vectors:
        quantize(vector)
    quant = time.process_time() - tick
    embedder = HashEmbedder()
    embedder._words.clear()
    tick = time.process_time()
    embedder.embed_quantized(texts)
    both = time.process_time() - tick
    print(f"worker steps alone: parse {parse:.2f}, indexed_text {index_text:.2f}, embed {embed:.2f} (a cold word "
          f"cache), quantize {quant:.2f}, embed_quantized {both:.2f} (cold again) CPU-s for {len(notes)} notes, "
          f"{len(texts)} indexed chunks")


def compression(db: Path) -> None:
    from vaultsync.store import codec

    con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    dictionary = bytes(con.execute("SELECT body FROM dictionaries").fetchone()[0])
    codec.register(dictionary)
    texts = [codec.unpack(bytes(body)).encode("utf-8", "surrogatepass") for (body,) in con.execute("SELECT body FROM texts")]
    con.close()
    for level in (8, 9, 8, 9):
        primed = zlib.compressobj(6, zlib.DEFLATED, -15, level, zlib.Z_DEFAULT_STRATEGY, dictionary)
        tick, size = time.process_time(), 0
        for text in texts:
            compressor = primed.copy()
            size += len(compressor.compress(text) + compressor.flush())
        print(f"zlib, dictionary, memory level {level}: {time.process_time() - tick:.2f} CPU-s, {size / 1e6:.2f} MB")
    tick = time.process_time()
    size = sum(len(zlib.compress(text, 6)) for text in texts)
    print(f"zlib, no dictionary: {time.process_time() - tick:.2f} CPU-s, {size / 1e6:.2f} MB ({len(texts)} texts)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "vaultsync-import-parts")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    hub = clone("obsidian-hub.bundle", args.work / "obsidian-hub")
    db = args.work / "hub.db"
    for old in args.work.glob("hub.db*"):
        old.unlink()
    library_import(hub, db)
    worker_steps(hub)
    compression(db)


if __name__ == "__main__":
    sys.exit(main())
