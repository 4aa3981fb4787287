"""Token files and principals of the MCP server: who a request may act for (no server started)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.mcp_server import Principal, TokenTable, token_digest
from llama_index_memory_hierarchy.mcp_server.access import readable_by_others

ALICE = "alice-token-0123456789"
ADMIN = "admin-token-0123456789"


def test_toml_and_json_token_files_map_tokens_to_principals(tmp_path: Path) -> None:
    toml = tmp_path / "tokens.toml"
    toml.write_text(
        f'[[tokens]]\ntoken = "{ALICE}"\nuser = "alice"\n\n[[tokens]]\nsha256 = "{token_digest(ADMIN)}"\nadmin = true\n'
    )
    as_json = tmp_path / "tokens.json"
    as_json.write_text(json.dumps({"tokens": [{"token": ALICE, "user": "alice"}, {"token": ADMIN, "admin": True}]}))
    for path in (toml, as_json):
        table = TokenTable.from_file(path)
        assert len(table) == 2
        assert table.lookup(ALICE) == Principal(user_id="alice")
        assert table.lookup(ADMIN) == Principal(admin=True)
        assert table.lookup("not-a-known-token-at-all") is None
        assert table.lookup(ALICE + "x") is None


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([], "lists no tokens"),
        ([{"token": "short", "user": "alice"}], "at least 16 characters"),
        ([{"token": ALICE}], "needs a 'user'"),
        ([{"token": ALICE, "sha256": token_digest(ALICE), "user": "a"}], "exactly one of"),
        ([{"token": ALICE, "user": "a"}, {"token": ALICE, "user": "b"}], "listed twice"),
        ([{"token": ALICE, "user": "../etc"}], "user: must be"),
        ([{"token": ALICE, "user": "alice", "role": "x"}], "Extra inputs"),
    ],
)
def test_bad_token_files_are_refused_with_the_entry_at_fault(tmp_path: Path, entries: list, message: str) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": entries}))
    with pytest.raises(MemoryValidationError, match=message):
        TokenTable.from_file(path)


def test_unreadable_or_malformed_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(MemoryValidationError, match="cannot read"):
        TokenTable.from_file(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[[tokens]\n")
    with pytest.raises(MemoryValidationError, match="not valid TOML or JSON"):
        TokenTable.from_file(bad)
    flat = tmp_path / "flat.json"
    flat.write_text('{"alice": "x"}')
    with pytest.raises(MemoryValidationError, match="list 'tokens'"):
        TokenTable.from_file(flat)


def test_a_user_principal_never_acts_for_another_user() -> None:
    alice = Principal(user_id="alice")
    assert alice.resolve_user(None) == "alice"
    assert alice.resolve_user("alice") == "alice"
    with pytest.raises(MemoryValidationError, match="another user"):
        alice.resolve_user("bob")
    with pytest.raises(MemoryValidationError, match="user_id: must be"):
        alice.resolve_user("../bob")


def test_an_admin_names_the_user() -> None:
    admin = Principal(admin=True)
    assert admin.resolve_user("bob") == "bob"
    with pytest.raises(MemoryValidationError, match="name one"):
        admin.resolve_user(None)


def test_a_token_file_readable_by_others_is_noticed(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(f'[[tokens]]\ntoken = "{ALICE}"\nuser = "alice"\n')
    for mode, exposed in ((0o600, False), (0o640, True), (0o604, True), (0o400, False)):
        path.chmod(mode)
        assert readable_by_others(path) is exposed, oct(mode)


def test_loading_a_token_file_others_may_read_logs_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Not only ``lmh mcp``: a server built from the library with TokenTable.from_file warns too."""
    path = tmp_path / "tokens.toml"
    path.write_text(f'[[tokens]]\ntoken = "{ALICE}"\nuser = "alice"\n')
    for mode, exposed in ((0o644, True), (0o600, False)):
        path.chmod(mode)
        caplog.clear()
        with caplog.at_level("WARNING", logger="llama_index_memory_hierarchy.mcp_server.access"):
            TokenTable.from_file(path)
        warned = [r for r in caplog.records if "other users of this machine may read the tokens" in r.getMessage()]
        assert bool(warned) is exposed, oct(mode)
        assert ALICE not in caplog.text
