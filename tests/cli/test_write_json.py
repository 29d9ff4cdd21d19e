"""The JSON columns a revision is written with (tags, aliases, warnings, heading paths) are the compact JSON of
their lists, whichever way the writer makes it."""

from __future__ import annotations

import json
import random

from vaultsync.store.write import dumps, dumps_strings


def test_lists_of_strings_are_written_as_compact_json() -> None:
    rng = random.Random(7)
    alphabet = ["a", " ", '"', "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "東", "\u2028", "\ud800", "😀", ","]
    lists = [(), ("",), ("A", "B"), ("a,b", '"q"')]
    lists += [
        tuple("".join(rng.choice(alphabet) for _ in range(rng.randrange(12))) for _ in range(rng.randrange(5)))
        for _ in range(500)
    ]
    for values in lists:
        text = dumps_strings(values)
        assert text == dumps(list(values)) == json.dumps(list(values), ensure_ascii=False, separators=(",", ":"))
        if "\ud800" not in "".join(values):
            assert json.loads(text) == list(values)
    assert dumps_strings(("a", 1, None)) == '["a",1,null]'  # not all strings: the encoder itself
