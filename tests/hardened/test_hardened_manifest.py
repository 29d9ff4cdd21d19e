"""The manifest's and the safe-spawn checks' edge cases, in process (the subprocess tests of every
refusal path are in test_hardened_spawn.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from vaultsync.errors import ConfigError
from vaultsync.hardened import spawn
from vaultsync.hardened.access import OAuthSettings
from vaultsync.hardened.keystore import load_keystore
from vaultsync.hardened.manifest import DEFAULT_SECRET_ENV, Manifest, RoleFilter, TokenRule, load_manifest

HASH = "ab" * 32


def manifest_at(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "m.toml"
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def load(tmp_path: Path, text: str) -> Manifest:
    return load_manifest(manifest_at(tmp_path, 'db_path = "v.db"\n' + text))


def refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    message = str(caught.value)
    assert "\n" not in message
    return message


# ------------------------------------------------------------------ the manifest


def test_paths_are_relative_to_the_manifest_and_expand_home(tmp_path: Path) -> None:
    m = load(tmp_path, 'keystore_path = "keys/k.toml"\naudit_log_path = "~/audit.jsonl"\n')
    assert m.db_path == tmp_path / "v.db" and m.keystore_path == tmp_path / "keys" / "k.toml"
    assert m.audit_log_path == Path("~/audit.jsonl").expanduser()


def test_defaults(tmp_path: Path) -> None:
    m = load(tmp_path, "")
    assert (m.watch, m.allow_writes, m.allowed_parents, m.pass_env, m.http, m.role_filter) == (
        False,
        False,
        (),
        (),
        None,
        None,
    )
    assert m.secret_env == DEFAULT_SECRET_ENV


def test_reject_env_extends_the_secret_list_once(tmp_path: Path) -> None:
    m = load(tmp_path, 'reject_env = ["SLACK_TOKEN", "HF_TOKEN"]\n')
    assert m.secret_env == (*DEFAULT_SECRET_ENV, "SLACK_TOKEN")


@pytest.mark.parametrize(
    "text,named",
    [
        ('vault_name = ""\n', "vault_name: must not be empty"),
        ('allowed_parents = ["claude", ""]\n', "allowed_parents: must be a list of strings"),
        ("allow_writes = 1\n", "allow_writes: must be true or false"),
        ('http = "127.0.0.1:1"\n', "http: must be a table"),
        ('[http]\ntls_cert = "c.pem"\n', "http.bind: missing"),
        ('[http]\nbind = "1"\ntls_cert = "c.pem"\n', "http.tls_key: give both"),
        (
            '[http]\nbind = "1"\n[[http.tokens]]\nsha256 = "abc"\ncaller_id = "a"\n',
            "http.tokens[0].sha256: must be the 64",
        ),
        (f'[http]\nbind = "1"\n[[http.tokens]]\nsha256 = "{HASH}"\n', "http.tokens[0].caller_id: missing"),
        (
            f'[http]\nbind = "1"\n[[http.tokens]]\nsha256 = "{HASH}"\ncaller_id = "a"\n[[http.tokens]]\n'
            f'sha256 = "{HASH.upper()}"\ncaller_id = "b"\n',
            "http.tokens: the same token is listed twice",
        ),
        ('[role_filter]\ndefault = "allow"\n', "role_filter.default: must be"),
        ('[role_filter.allow]\nsearch_notes = "reader"\n', "role_filter.allow.search_notes: must be a list"),
        ('[role_filter.deny]\nsearch_notes = [""]\n', "role_filter.deny.search_notes: must be a list"),
    ],
)
def test_nested_and_typed_mistakes_are_named(tmp_path: Path, text: str, named: str) -> None:
    assert named in refused(tmp_path, text)


@pytest.mark.parametrize(
    "text,said",
    [
        ("audit_log_path = 1\n", "audit_log_path: must be a path (string), not int 1"),
        ('keystore_path = ["k"]\n', "keystore_path: must be a path (string), not list ['k']"),
        ('allowed_tools = ["a", 1]\n', "allowed_tools: must be a list of strings, not list ['a', 1]"),
        ('path = "elsewhere.toml"\n', "path: unknown key (known here: allow_writes, allowed_parents, allowed_tools,"),
        ('[http]\nbind = "1"\ncolour = 1\n', "http.colour: unknown key (known here: bind, metrics, tls_cert,"),
        ('[http]\nbind = "1"\ntokens = ["a"]\n', "http.tokens: must be an array of tables, not list ['a']"),
        (
            f'[http]\nbind = "1"\n[[http.tokens]]\nsha256 = "{HASH}"\ncaller_id = "a"\nwho = 1\n',
            "http.tokens[0].who: unknown key (known here: caller_id, roles, sha256)",
        ),
        ('[http]\nbind = "1"\nmetrics = "yes"\n', "http.metrics: must be true or false, not str 'yes'"),
        ("[role_filter]\ndefault = 1\n", "role_filter.default: must be a string, not int 1"),
        ('[role_filter]\nallow = "x"\n', "role_filter.allow: must be a table, not str 'x'"),
        # the first mistake in the file; in a table, its form before its content
        ("zz = 1\nallow_writes = 2\n", "zz: unknown key"),
        ("allow_writes = 2\nzz = 1\n", "allow_writes: must be true or false, not int 2"),
        ('[http]\n[[http.tokens]]\nsha256 = "00"\n', "http.bind: missing"),
        ('[role_filter]\nzz = 1\ndefault = "x"\n', "role_filter.zz: unknown key"),
    ],
)
def test_each_mistake_is_said_as_before(tmp_path: Path, text: str, said: str) -> None:
    assert f"m.toml: {said}" in refused(tmp_path, text)


def test_a_setting_built_in_code_is_checked_like_one_read_from_a_file(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="must be https"):
        OAuthSettings(issuer="http://id.example.com", public_url="https://n.example.com")
    with pytest.raises(ValidationError, match="allow_all"):
        RoleFilter(default="allow")
    with pytest.raises(ValidationError, match="64 hex digits"):
        TokenRule(sha256="abc", caller_id="laptop")
    m = Manifest(path=tmp_path / "m.toml", db_path="v.db", keystore_path=Path("k.toml"))
    assert (m.db_path, m.keystore_path) == ("v.db", Path("k.toml"))  # resolved only when read from a file


def test_a_manifest_that_is_not_a_file_or_not_utf8_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a regular file"):
        load_manifest(tmp_path)
    with pytest.raises(ConfigError, match="cannot read the manifest"):
        load_manifest(tmp_path / "missing.toml")
    path = tmp_path / "bad.toml"
    path.write_bytes(b'db_path = "\xff"\n')
    path.chmod(0o600)
    with pytest.raises(ConfigError, match="cannot read the manifest"):
        load_manifest(path)


@pytest.mark.skipif(os.name != "posix" or os.getuid() != 0, reason="changing a file's owner needs root")
def test_a_manifest_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = manifest_at(tmp_path, 'db_path = "v.db"\n')
    os.chown(path, 4242, -1)
    with pytest.raises(ConfigError, match="belongs to another user"):
        load_manifest(path)


def test_a_world_readable_manifest_is_fine_but_a_keystore_is_not(tmp_path: Path) -> None:
    load_manifest(manifest_at(tmp_path, 'db_path = "v.db"\n', mode=0o644))
    keys = tmp_path / "k.toml"
    keys.write_text(f'key_id = "k"\nkey_hex = "{HASH}"\n', encoding="utf-8")
    keys.chmod(0o644)
    with pytest.raises(ConfigError, match="may be read or written by other users"):
        load_keystore(keys)


def test_a_manifest_in_a_folder_others_may_change_is_refused_even_through_a_symlink(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    real = manifest_at(shared, 'db_path = "v.db"\n')
    shared.chmod(0o777)  # anyone could rename m.toml away and put theirs in its place
    with pytest.raises(ConfigError, match=r"is in .*shared, which other users may change \(mode 777"):
        load_manifest(real)
    link = tmp_path / "m.toml"
    link.symlink_to(real)
    with pytest.raises(ConfigError, match="which other users may change"):
        load_manifest(link)
    shared.chmod(0o1777)  # sticky, like /tmp: others cannot rename what is ours
    assert load_manifest(link).db_path == tmp_path / "v.db"  # relative to where the manifest was named


# ------------------------------------------------------------------ the safe-spawn checks


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "v", "--manifest", "m", "-v"],
        ["-vv", "serve", "v", "--manifest=m"],
        ["serve", "./-c", "--manifest", "m"],
        ["serve", "v", "--manifest", "m", "--configure"],
        ["serve", "v", "--manifest", "m", "--secrets"],
        ["serve", "v", "--manifest", "m", "-C", "x"],
        ["serve", "/tmp/-c", "--manifest", "m"],
    ],
)
def test_argv_without_configuration_passes(argv: list[str]) -> None:
    assert spawn.wants_hardened(argv)
    spawn.check_argv(argv)


def test_only_the_manifest_option_asks_for_the_hardened_mode() -> None:
    assert not spawn.wants_hardened(["serve", "v", "--manifests", "m"])
    assert not spawn.wants_hardened(["serve", "--manifest-x"])
    assert spawn.wants_hardened(["serve", "v", "--manifest="])


def test_the_environment_checks(tmp_path: Path) -> None:
    m = load(tmp_path, 'reject_env = ["SLACK_TOKEN"]\nallowed_parents = ["claude"]\n')
    assert spawn.check_environment(m, {"PATH": "/bin"}) is None
    with pytest.raises(ConfigError, match=r"^environment variable HF_TOKEN \(and SLACK_TOKEN\) refused"):
        spawn.check_environment(m, {"SLACK_TOKEN": "x", "HF_TOKEN": "y"})
    warning = spawn.check_environment(m, {"VAULTSYNC_REJECT_INHERITED_SECRETS": "0"})
    assert warning is not None and "none found now" in warning
    spawn.check_parent(m, {}, terminal=False)  # unset: no check
    spawn.check_parent(m, {"VAULTSYNC_PARENT_BASENAME": "claude"}, terminal=False)
    spawn.check_parent(m, {"VAULTSYNC_PARENT_BASENAME": "evil"}, terminal=True)
    with pytest.raises(ConfigError, match="parent 'Claude'"):  # compared exactly
        spawn.check_parent(m, {"VAULTSYNC_PARENT_BASENAME": "Claude"}, terminal=False)


def test_the_scrub_keeps_the_allow_list_and_pass_env_never_a_secret(tmp_path: Path) -> None:
    m = load(tmp_path, 'pass_env = ["SSL_CERT_FILE", "HF_TOKEN"]\nreject_env = ["TERM"]\n')
    env = {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_TIME": "C",
        "TERM": "xterm",
        "SSL_CERT_FILE": "/c.pem",
        "HF_TOKEN": "s",
        "DATABASE_URL": "postgres://",
        "PYTHONPATH": "/x",
        "VAULTSYNC_PARENT_BASENAME": "claude",
    }
    removed = spawn.scrub_environment(m, env)
    assert env == {"PATH": "/bin", "HOME": "/h", "LC_TIME": "C", "SSL_CERT_FILE": "/c.pem"}
    assert removed == ["DATABASE_URL", "HF_TOKEN", "PYTHONPATH", "TERM", "VAULTSYNC_PARENT_BASENAME"]
