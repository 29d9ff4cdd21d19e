"""The ``receipt verify`` command: check provenance receipts of the hardened server against the store.

``commands.py`` adds ``COMMANDS`` to its group; this module does not import ``commands.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from .base import Context, echo_json, friendly, json_option, pass_ctx


@click.group()
def receipt() -> None:
    """Provenance receipts: what a hardened server (a manifest with keystore_path) signs.

    \b
    Example:
        vaultsync receipt verify answer.json --keystore /etc/vaultsync/keys.toml
    """


@receipt.command()
@click.argument("source", metavar="[FILE]", type=click.File("r", encoding="utf-8"), default="-")
@click.option(
    "--keystore",
    "keystore_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The keystore (mode 600) holding the key that signed the receipt (current or [[retired]]).",
)
@click.option(
    "--manifest",
    "manifest_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Take the keystore and the database from the server's manifest instead.",
)
@json_option
@pass_ctx
@friendly
def verify(obj: Context, source: Any, keystore_path: Path | None, manifest_path: Path | None, as_json: bool) -> None:
    """Check receipts: the MAC under the named key, and the revision in the store (--db).

    FILE ('-' or omitted: stdin) holds a receipt, or a whole answer carrying one (a read_note result
    or a search hit: its text is checked against the stored revision too), or a search result or a
    JSON array of any of those (each is checked). Prints one line per receipt: valid, or why not (bad MAC, unknown
    key id, purged,
    content differs from the store, not in this store). Exit status 0 only when every one is valid.

    \b
    Example:
        vaultsync --db ~/vaultsync.db receipt verify answer.json --keystore /etc/vaultsync/keys.toml
        pbpaste | vaultsync receipt verify --manifest /etc/vaultsync/manifest.toml --json
    """
    from ..hardened.keystore import load_keystore

    keystore_path, db = _keystore_and_db(obj, keystore_path, manifest_path)
    keystore = load_keystore(keystore_path)
    try:
        data = json.loads(source.read())
    except (ValueError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"{source.name} is not JSON: {exc}") from None
    answers = (
        data
        if isinstance(data, list)
        else data["hits"]
        if isinstance(data, dict) and isinstance(data.get("hits"), list)
        else [data]
    )
    verdicts = _check(db, keystore, answers)
    if as_json:
        found = [v.to_json() for v in verdicts]
        echo_json(found[0] if len(found) == 1 and answers[0] is data else found)
    else:
        for verdict in verdicts:
            click.echo(verdict.message)
    if not all(v.valid for v in verdicts):
        raise SystemExit(1)


def _keystore_and_db(obj: Context, keystore_path: Path | None, manifest_path: Path | None) -> tuple[Path, Path | str]:
    """The keystore and the database: given (``--keystore``, ``--db``) or the manifest's."""
    from ..hardened.manifest import load_manifest

    if (keystore_path is None) == (manifest_path is None):
        raise click.UsageError("give --keystore PATH or --manifest PATH (exactly one)")
    if manifest_path is None:
        assert keystore_path is not None
        return keystore_path, obj.db
    source_of_db = click.get_current_context().find_root().get_parameter_source("db")
    if source_of_db is not None and source_of_db.name in ("COMMANDLINE", "ENVIRONMENT"):
        raise click.UsageError("--manifest names the database: leave out --db and VAULTSYNC_DB")
    manifest = load_manifest(manifest_path)
    if manifest.keystore_path is None:
        raise click.ClickException(f"manifest {manifest.path} has no keystore_path: its server signs nothing")
    return manifest.keystore_path, manifest.db_path


def _check(db: Path | str, keystore: Any, answers: list[Any]) -> list[Any]:
    """Each answer's verdict, each receipt's vault opened (read-only) once."""
    from ..errors import VaultNotFound
    from ..hardened.provenance import check_answer, receipt_vault
    from ..vault import Vault

    vaults: dict[str, Vault | None] = {}

    def vault_for(answer: object) -> Vault | None:
        name = receipt_vault(answer)
        if name is None:
            return None
        if name not in vaults:
            try:
                vaults[name] = Vault.open(db, name=name, readonly=True)
            except VaultNotFound:
                vaults[name] = None
        return vaults[name]

    try:
        return [check_answer(answer, keystore, vault_for(answer)) for answer in answers]
    finally:
        for vault in vaults.values():
            if vault is not None:
                vault.close()


COMMANDS = (receipt,)
