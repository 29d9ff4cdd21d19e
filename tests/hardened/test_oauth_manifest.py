"""The manifest's ``[oauth]`` table and the ``--oauth-issuer``/``--public-url`` options: read strictly, each
refusal one line naming the key; grants (subjects, groups, ``*``) and the scope ladder; a server whose issuer
cannot be reached does not start, and says so in one line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.mcp_helpers import free_port, history_under

from vaultsync.errors import ConfigError
from vaultsync.hardened.access import (
    ADMIN,
    READ,
    WRITE,
    Grant,
    HostedVault,
    OAuthSettings,
    from_flags,
    ladder,
    level_of,
)
from vaultsync.hardened.manifest import Manifest, load_manifest

HTTP = '[http]\nbind = "127.0.0.1:8765"\n'
OAUTH = '[oauth]\nissuer = "https://id.example.com"\npublic_url = "https://notes.example.com"\n'


def load(tmp_path: Path, text: str) -> Manifest:
    path = tmp_path / "m.toml"
    path.write_text('db_path = "v.db"\n' + text, encoding="utf-8")
    path.chmod(0o600)
    return load_manifest(path)


def refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    assert "\n" not in str(caught.value)
    return str(caught.value)


def test_one_vault_with_defaults(tmp_path: Path) -> None:
    oauth = load(tmp_path, HTTP + OAUTH).oauth
    assert oauth is not None
    assert oauth.resource() == "https://notes.example.com/mcp"
    assert "HS256" not in oauth.algorithms and "none" not in oauth.algorithms
    assert (oauth.leeway_s, oauth.jwks_refresh_s, oauth.groups_claim, oauth.vaults) == (30.0, 5.0, "groups", ())
    assert oauth.grant.open


def test_several_vaults_each_at_its_own_url(tmp_path: Path) -> None:
    text = HTTP + OAUTH + '[[oauth.vaults]]\nname = "team"\nfolder = "team"\nread = ["group:staff"]\n'
    oauth = load(tmp_path, text + '[[oauth.vaults]]\nname = "mine"\nadmin = ["me"]\n').oauth
    assert oauth is not None
    assert [(v.name, v.folder) for v in oauth.vaults] == [("team", tmp_path / "team"), ("mine", None)]
    assert oauth.resource("team") == "https://notes.example.com/vaults/team/mcp"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (OAUTH, "oauth: an OAuth resource server serves HTTP"),
        (HTTP + OAUTH + "colour = 1\n", "oauth.colour: unknown key"),
        (HTTP + '[oauth]\npublic_url = "https://n.example.com"\n', "oauth.issuer: missing"),
        (HTTP + OAUTH + 'algorithms = ["HS256"]\n', "oauth.algorithms: only public-key algorithms"),
        (HTTP + OAUTH + 'algorithms = ["none"]\n', "oauth.algorithms"),
        (HTTP + OAUTH + "leeway_s = 3600\n", "oauth.leeway_s: must be between 0 and 300"),
        (HTTP + OAUTH + 'leeway_s = "30"\n', "oauth.leeway_s: must be a number"),
        (HTTP + OAUTH.replace("https://id", "http://id"), "must be https"),
        (HTTP + OAUTH.replace("notes.example.com", "notes.example.com/mcp"), "without /mcp"),
        (HTTP + OAUTH + '[[oauth.vaults]]\nname = "team"\n', "grants nobody"),
        (HTTP + OAUTH + '[[oauth.vaults]]\nname = "a/b"\nread = ["x"]\n', "oauth.vaults[0].name"),
        (HTTP + OAUTH + '[[oauth.vaults]]\nname = "t"\nread = ["x"]\nwho = 1\n', "oauth.vaults[0].who: unknown"),
        (
            HTTP + OAUTH + 'read = ["x"]\n[[oauth.vaults]]\nname = "t"\nread = ["x"]\n',
            "each vault lists its own",
        ),
        (
            HTTP + OAUTH + '[[oauth.vaults]]\nname = "t"\nread = ["x"]\n[[oauth.vaults]]\nname = "t"\nread = ["y"]\n',
            "listed twice",
        ),
        ('vault_name = "x"\n' + HTTP + OAUTH + '[[oauth.vaults]]\nname = "t"\nread = ["x"]\n', "vault_name: a hosted"),
    ],
)
def test_a_wrong_oauth_table_is_refused_naming_the_key(tmp_path: Path, text: str, named: str) -> None:
    assert named in refused(tmp_path, text)


def test_plain_http_is_accepted_on_loopback_only(tmp_path: Path) -> None:
    text = HTTP + '[oauth]\nissuer = "http://127.0.0.1:9000"\npublic_url = "http://localhost:8765"\n'
    assert load(tmp_path, text).oauth is not None


def test_grants_name_subjects_groups_or_anyone_and_cap_the_ladder() -> None:
    grant = Grant(read=["group:staff"], write=["alice"], admin=["root"])  # type: ignore[arg-type]
    assert grant.level("alice", []) == 2 and grant.level("bob", ["staff"]) == 1 and grant.level("carol", []) == 0
    assert grant.level("root", ["staff"]) == 3
    assert Grant(read=("*",)).level("anyone", []) == 1
    assert ladder(min(level_of([WRITE]), grant.level("bob", ["staff"]))) == (READ,)
    assert ladder(level_of([ADMIN])) == (READ, WRITE, ADMIN)
    assert level_of(["openid", "vault"]) == 0


def test_an_issuer_keeps_its_trailing_slash_a_public_url_loses_it() -> None:
    settings = from_flags("https://tenant.example.com/", "https://n.example.com/", None)
    assert settings is not None and settings.issuer == "https://tenant.example.com/"
    assert settings.resource() == "https://n.example.com/mcp"


def test_oauth_allow_names_who_may_use_the_vault() -> None:
    settings = from_flags("https://id.example.com", "https://n.example.com", None, ["alice", "group:staff"])
    assert settings is not None and settings.resource() == "https://n.example.com/mcp"
    grant = settings.grant
    assert (grant.level("alice", []), grant.level("bob", ["staff"]), grant.level("carol", ["guests"])) == (3, 3, 0)
    open_grant = from_flags("https://id.example.com", "https://n.example.com", None)
    assert open_grant is not None and open_grant.grant.open
    with pytest.raises(ConfigError, match="--oauth-allow needs --oauth-issuer"):
        from_flags(None, None, None, ["alice"])
    with pytest.raises(ConfigError, match=r"^--oauth-allow: give a subject, group:NAME or \*, not an empty name$"):
        from_flags("https://id.example.com", "https://n.example.com", None, ["alice", ""])


def test_the_options_go_together(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "v.db"
    ran = cli("serve", "notes", "--http", "127.0.0.1:1", "--oauth-issuer", "https://id.example.com", db=db)
    assert ran.returncode == 1 and "needs both --oauth-issuer and --public-url" in ran.stderr
    issuer = ("--oauth-issuer", "https://id.example.com", "--public-url", "https://n.example.com")
    ran = cli("serve", "notes", *issuer, db=db)
    assert ran.returncode == 1 and "add --http HOST:PORT" in ran.stderr


@pytest.mark.slow
def test_an_unreachable_issuer_stops_the_start_in_one_line(tmp_path: Path) -> None:
    history = history_under(tmp_path)
    port, dead = free_port(), free_port()
    done = subprocess.run(
        [sys.executable, "-m", "vaultsync", "--db", str(history["db"]), "serve", str(history["root"])]
        + ["--http", f"127.0.0.1:{port}", "--oauth-issuer", f"http://127.0.0.1:{dead}"]
        + ["--public-url", f"http://127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stderr
    assert f"Error: cannot reach the OAuth issuer http://127.0.0.1:{dead}" in done.stderr
    assert "Traceback" not in done.stderr


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hosted.toml"


@pytest.mark.parametrize("optional", [False, True])
def test_the_hosted_example_loads_and_names_every_oauth_key(tmp_path: Path, optional: bool) -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^#: ", "", text) if optional else text
    path = tmp_path / "hosted.toml"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    oauth = load_manifest(path).oauth
    assert oauth is not None and [v.name for v in oauth.vaults] == ["team", "alice"]
    assert oauth.vaults[0].grant.level("bob", []) == 2 and oauth.vaults[1].grant.level("bob", ["staff"]) == 0
    if optional:
        assert oauth.algorithms == ("RS256", "ES256") and oauth.introspection_file == tmp_path / "introspection.toml"
        keys = set(re.findall(r"(?m)^(\w+) = ", text))
        assert set(OAuthSettings.model_fields) - {"vaults"} <= keys and set(HostedVault.model_fields) <= keys
