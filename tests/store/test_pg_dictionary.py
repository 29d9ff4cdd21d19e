"""The term dictionary in blocks (``store/pg/dictionary.py``) on a real PostgreSQL: every term found by its block after
splits, long terms kept inside blocks, prefixes across block boundaries in byte order, and two writers adding the
same new terms at once ending with one id each."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from vaultsync.store.pg import dictionary, postings

pytestmark = pytest.mark.pg


@pytest.fixture
def dsn() -> str:
    import psycopg

    from vaultsync.store.pg.schema import migrate

    pgserver = pytest.importorskip("support.pgserver")
    dsn = pgserver.fresh_or_skip("dictionary")
    with psycopg.connect(dsn) as con:
        migrate(con)
    return dsn


def _blocks(con: Any) -> list[tuple[str, list[str], list[int]]]:
    return con.execute(f"SELECT first, terms, ids FROM {dictionary.TABLE} ORDER BY first").fetchall()


def _check(con: Any, known: dict[str, int]) -> None:
    """The blocks are well formed and hold exactly ``known``; each term's id is found by the lookups."""
    blocks = _blocks(con)
    assert blocks[0][0] == ""
    together = [t for _, terms, _ in blocks for t in terms]
    assert together == sorted(together) == sorted(known)  # (Python orders str by code point: byte order in UTF-8)
    for first, terms, ids in blocks:
        assert len(terms) == len(ids)
        if len(terms) > 2 * dictionary.BLOCK:  # (only a run of long terms, which cannot begin a block)
            assert all(len(t) > dictionary.KEY_CHARS for t in terms[dictionary.BLOCK :]), terms
        assert first == "" or (first == terms[0] and len(first) <= dictionary.KEY_CHARS)
        assert dict(zip(terms, ids)) == {t: known[t] for t in terms}
    assert dictionary.find(con, sorted(known)) == known
    assert len(set(known.values())) == len(known)


def _terms(n: int, stem: str) -> list[str]:
    return [f"{stem}{i:05d}" for i in range(n)]


def test_new_terms_split_their_blocks_and_every_one_is_found_after(dsn: str) -> None:
    """A first batch of many terms fills the first block and splits it; a second adds many inside one block (between
    two of the first's), which splits again; every term keeps the id it got, and ``find`` ignores the unknown."""
    import psycopg

    with psycopg.connect(dsn) as con:
        first = sorted(_terms(700, "m"))
        known = dictionary.learn(con, first)
        assert len(_blocks(con)) > 3
        _check(con, known)
        inside = sorted(f"m00100-{i:04d}" for i in range(600))  # (all between m00100 and m00101)
        known |= dictionary.learn(con, sorted({*inside, "m00100", "a", "zz"}))
        _check(con, known)
        assert dictionary.learn(con, first) == {t: known[t] for t in first}
        assert dictionary.find(con, ["m00100-x", "b"]) == {}
        assert [i for t in ("m00100", "nothing") for i in postings.term_ids(con, t, False)] == [known["m00100"]]


def test_long_terms_stay_inside_blocks_and_prefixes_cross_block_boundaries(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Terms over ``KEY_CHARS`` characters (and over 2 kB, past a btree entry's limit) never begin a block, and are
    found; a prefix's ids come from every block it spans, in byte order, non-ASCII included."""
    import psycopg

    monkeypatch.setattr(dictionary, "BLOCK", 4)
    long_ = [f"p{i:02d}" + "x" * 300 for i in range(12)] + ["p05" + "ü" * 3000]
    terms = sorted({*_terms(30, "p"), *long_, "pé", "p\U0001f600", "pa", "q", "o", "\uffff"})
    with psycopg.connect(dsn) as con:
        known = dictionary.learn(con, terms[::2])  # (two batches: the second splits the first's blocks)
        known |= dictionary.learn(con, terms[1::2])
        _check(con, known)
        firsts = [b[0] for b in _blocks(con)]
        assert len(firsts) > 4 and max(map(len, firsts)) <= dictionary.KEY_CHARS
        for prefix in ("p", "p0", "p00", "p05", "p05x", "p05ü", "pé", "p\U0001f600", "q", "r", "\uffff", "p" + "x" * 3):
            expected = [known[t] for t in sorted(known) if t.startswith(prefix)]
            assert postings.term_ids(con, prefix, True) == expected, prefix
            assert postings.term_ids(con, prefix, False) == ([known[prefix]] if prefix in known else []), prefix
        assert postings.term_ids(con, long_[-1], False) == [known[long_[-1]]]


def test_two_writers_adding_the_same_terms_at_once_get_one_id_each(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writer A adds terms (splitting the first block) and holds its transaction; writer B, adding overlapping terms,
    waits for A's turn; when A commits, B finds A's terms in the blocks it locks (A's split is committed before B
    locks any: nothing to lock again) and adds only its own. Each term has one id, the one both writers were given."""
    import psycopg

    a_terms = sorted(_terms(600, "w")[::2] + ["shared1", "shared2"])
    b_terms = sorted(_terms(600, "w")[::3] + ["shared1", "shared2", "zb"])
    got: dict[str, Any] = {}
    moved: list[str] = []
    add = dictionary.Learner._add

    def counted(self: dictionary.Learner, missing: list[str]) -> None:
        try:
            add(self, missing)
        except dictionary._Moved:
            moved.append(threading.current_thread().name)
            raise

    monkeypatch.setattr(dictionary.Learner, "_add", counted)
    with psycopg.connect(dsn) as a, psycopg.connect(dsn) as b, psycopg.connect(dsn, autocommit=True) as watch:
        got["a"] = dictionary.learn(a, a_terms)
        pid = b.info.backend_pid

        def writer_b() -> None:
            try:
                got["b"] = dictionary.learn(b, b_terms)
                b.commit()
            except Exception as exc:  # (reported below)
                got["error"] = exc

        thread = threading.Thread(target=writer_b, name="b")
        thread.start()
        for _ in range(200):  # B waits for A's turn
            waiting = watch.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
            if waiting and waiting[0] == "Lock":
                break
            time.sleep(0.05)
        else:
            pytest.fail("writer B never waited for writer A's lock")
        assert "b" not in got
        a.commit()
        thread.join(timeout=30)
        assert not thread.is_alive() and "error" not in got, got.get("error")
        assert moved == []  # (B took its turn after A's split was committed)
        both = {**got["a"], **got["b"]}
        for term in set(a_terms) & set(b_terms):
            assert got["a"][term] == got["b"][term], term
        _check(watch, both)


def test_a_transaction_learning_many_times_writes_each_block_once(dsn: str) -> None:
    """A batch learns note by note: the terms given ids are found by the next ``learn`` before any block is written
    (one id each, none given twice), and ``flush`` writes each block once, split where it grew: no dead copies of a
    block per note."""
    import psycopg

    with psycopg.connect(dsn) as con:
        learner = dictionary.Learner(con)
        for i in range(0, 600, 50):
            learner.learn(set(_terms(600, "n")[i : i + 80]))  # (each overlaps the one before)
        assert len(_blocks(con)) == 1 and _blocks(con)[0][1] == []  # nothing written yet
        learner.flush()
        writes = con.execute(
            f"SELECT n_tup_upd + n_tup_ins FROM pg_stat_xact_user_tables WHERE relid = '{dictionary.TABLE}'::regclass"
        ).fetchone()[0]
        assert writes == len(_blocks(con))  # (the first block updated once, the others inserted)
        _check(con, dict(learner.ids))
        assert len(learner.ids) == 600


def test_two_writers_learning_note_by_note_in_opposite_orders_take_turns(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch learns note by note, its block locks held to its commit: writer A adds a high term then a low one, writer
    B a low term then a high one. Without turns each would hold the block the other wants next (PostgreSQL fails one:
    a deadlock); with them B waits for A's commit before its first lock, and both batches commit."""
    import psycopg

    monkeypatch.setattr(dictionary, "BLOCK", 4)
    with psycopg.connect(dsn) as con:
        dictionary.learn(con, _terms(40, "m"))  # (blocks of a few terms: "a…" and "z…" terms fall in different ones)
        con.commit()
    errors: list[BaseException] = []
    with psycopg.connect(dsn) as a, psycopg.connect(dsn) as b, psycopg.connect(dsn, autocommit=True) as watch:
        b.execute("SET lock_timeout = '15s'")  # (without turns: B fails after A's deadlock error, not hangs)
        b.commit()
        learn_a, learn_b = dictionary.Learner(a), dictionary.Learner(b)
        learn_a.learn(["zz-a"])

        def writer_b() -> None:
            try:
                learn_b.learn(["aa-b"])
                learn_b.learn(["zz-b"])
                learn_b.flush()
                b.commit()
            except BaseException as exc:  # (reported below)
                errors.append(exc)

        thread = threading.Thread(target=writer_b)
        thread.start()
        pid = b.info.backend_pid
        for _ in range(200):  # B waits (for A's turn, or without turns for nothing: it locks its low block)
            waiting = watch.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
            if (waiting and waiting[0] == "advisory") or not thread.is_alive():
                break
            time.sleep(0.05)
        learn_a.learn(["aa-a"])  # (the low block: B's, without turns)
        learn_a.flush()
        a.commit()
        thread.join(timeout=30)
        assert not thread.is_alive() and not errors, errors
        ids = dictionary.find(watch, ["aa-a", "aa-b", "zz-a", "zz-b"])
        assert len(set(ids.values())) == 4, ids
