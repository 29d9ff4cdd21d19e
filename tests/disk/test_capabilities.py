"""The capability module: what is detected, what can be taken away, and imports that never need a capability."""

from __future__ import annotations

import ntpath
import os
import posixpath
import stat
import subprocess
import sys
import types

import pytest

from vaultsync.disk import capabilities
from vaultsync.errors import ConfigError

# Run before vaultsync is imported: the OS has neither O_NOFOLLOW nor O_DIRECTORY, and vaultsync's own code cannot
# import fcntl (as on Windows). Only vaultsync's imports are refused: the MCP SDK imports fcntl itself on every
# platform but win32 (mcp/server/stdio.py), which a Linux run cannot pretend to be. The pidfile lock stands in for
# msvcrt, which Linux cannot import either.
WINDOWS_LIKE = """
import builtins, os, sys
del os.O_NOFOLLOW, os.O_DIRECTORY
_import = builtins.__import__
def _no_fcntl(name, globals=None, *args, **kwargs):
    if name == "fcntl" and str((globals or {}).get("__name__", "")).startswith("vaultsync"):
        raise ImportError("No module named 'fcntl' (taken away for this test)")
    return _import(name, globals, *args, **kwargs)
builtins.__import__ = _no_fcntl
"""


def test_importing_every_door_needs_no_capability() -> None:
    code = (
        WINDOWS_LIKE
        + """
import vaultsync.cli, vaultsync.server, vaultsync.disk.vaultfs, vaultsync.disk.edit
import vaultsync.live.watcher, vaultsync.store.lock
from vaultsync.disk import capabilities
from vaultsync.errors import ConfigError
caps = capabilities.current()
print(caps.no_follow, caps.o_directory, caps.dir_fd, caps.lock)
"""
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "0", "False", "pidfile"]


def test_a_vault_imports_reads_and_appends_with_those_capabilities_gone(tmp_path) -> None:
    """Not only the import: the whole path (scan, read, append, the lock) runs on what is left."""
    root = tmp_path / "vault"
    root.mkdir()
    (root / "a.md").write_text("# A\n", encoding="utf-8")
    code = (
        WINDOWS_LIKE
        + f"""
from vaultsync import Vault
from vaultsync.disk.edit import append_file, create_file
with Vault.open({str(tmp_path / "db")!r}, root={str(root)!r}) as vault:
    vault.sync()
    append_file({str(root)!r}, "a.md", "more")
    create_file({str(root)!r}, "New/b.md", "# B")
    assert vault.sync().added == 1
    print(vault.read("a.md").content.replace(chr(10), "|"))
"""
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "# A|more"
    assert (root / "a.md").read_text(encoding="utf-8") == "# A\nmore"


def test_capabilities_are_only_taken_away(monkeypatch: pytest.MonkeyPatch) -> None:
    capabilities.reset()
    full = capabilities.current()
    assert full.dir_fd and full.no_follow == os.O_NOFOLLOW and full.lock == "fcntl"  # this Linux machine
    assert full.exchange == "renameat2"
    monkeypatch.setenv(capabilities.OFF_ENV, "dir_fd,no-follow,exchange,fcntl")
    capabilities.reset()
    less = capabilities.current()
    assert (less.dir_fd, less.no_follow, less.exchange, less.lock) == (False, 0, None, "pidfile")
    assert less.o_directory == os.O_DIRECTORY and less.off == {"dir_fd", "no_follow", "exchange", "fcntl"}
    monkeypatch.setenv(capabilities.OFF_ENV, "teleport")
    capabilities.reset()
    with pytest.raises(ConfigError, match="unknown capability teleport"):
        capabilities.current()
    monkeypatch.delenv(capabilities.OFF_ENV)
    capabilities.reset()


def _st(mode: int, attributes: int = 0, tag: int = 0) -> types.SimpleNamespace:
    return types.SimpleNamespace(st_mode=mode, st_file_attributes=attributes, st_reparse_tag=tag)


def test_symlinks_and_junctions_are_links_but_cloud_placeholders_are_not() -> None:
    """Windows stat fields (simulated: Linux has none): a junction (IO_REPARSE_TAG_MOUNT_POINT) and a
    symlink are refused; a OneDrive placeholder (IO_REPARSE_TAG_CLOUD_6) is read as a file."""
    reparse = capabilities.FILE_ATTRIBUTE_REPARSE_POINT
    assert capabilities.is_link(_st(stat.S_IFLNK | 0o777))
    assert capabilities.is_link(_st(stat.S_IFDIR | 0o777, reparse, 0xA0000003))  # junction
    assert capabilities.is_link(_st(stat.S_IFREG | 0o666, reparse, 0xA000000C))  # symlink seen as a file
    assert not capabilities.is_link(_st(stat.S_IFREG | 0o666, reparse, 0x9000601A))  # OneDrive file on demand
    assert not capabilities.is_link(_st(stat.S_IFDIR | 0o777))


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        (r"\\nas\notes\Vault", True),
        ("//nas/notes/Vault", True),
        (r"\\?\UNC\nas\notes", True),
        (r"C:\Users\me\Obsidian Vault", False),
        (r"\\?\C:\Users\me\Vault", False),
        (r"D:Vault", False),
    ],
)
def test_unc_vault_paths_are_refused_by_default(path: str, refused: bool) -> None:
    reason = capabilities.network_root(path, flavor=ntpath)
    assert (reason is not None) == refused
    if refused:
        assert "network (UNC) path" in reason and "VAULTSYNC_ALLOW_NETWORK" in reason
    assert capabilities.network_root(path, flavor=posixpath) is None  # a POSIX path never is one


def test_long_windows_paths_take_the_extended_form() -> None:
    assert capabilities.long_path(r"C:\Users\me\Vault", flavor=ntpath) == "\\\\?\\C:\\Users\\me\\Vault"
    assert capabilities.long_path(r"\\?\C:\x", flavor=ntpath) == r"\\?\C:\x"
    assert capabilities.long_path("/home/me/Vault", flavor=posixpath) == "/home/me/Vault"


def test_case_folding_is_probed_on_the_real_folder_and_simulated_on_request(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "Vault"
    folder.mkdir()
    capabilities.reset()
    assert capabilities.case_folds(str(folder)) is False  # ext4/tmpfs: Vault and vAULT are two names
    monkeypatch.setenv(capabilities.CASE_ENV, "1")
    capabilities.reset()
    assert capabilities.case_folds(str(folder)) is True
    monkeypatch.delenv(capabilities.CASE_ENV)
    capabilities.reset()
