# For mypy only (pyproject.toml: mypy_path). apsw's own stubs type every value a row holds as the union of all
# SQLite values (int | float | bytes | str | None), so each row read would need a cast or an assert although the
# SQL fixes its columns' types; here apsw is untyped (Any), as sqlite3 rows are.
from typing import Any

def __getattr__(name: str) -> Any: ...
