"""``lmh procedural``: list, add, edit and delete standing instructions, through the real entry point."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import assert_clean_error, run_lmh


def test_add_supersede_edit_delete(tmp_path: Path) -> None:
    common = ["--dir", str(tmp_path / "memory"), "--user", "alice", "--json"]
    first = run_lmh("procedural", "--add", "Always answer in metric units.", *common).json()
    second = run_lmh("procedural", "--add", "Actually, imperial units are fine again.", *common).json()
    assert [i["id"] for i in second["instructions"]] == [second["added"]]  # the newer replaced the older
    history = run_lmh("procedural", "--history", *common).json()["instructions"]
    assert [i["id"] for i in history] == [first["added"], second["added"]]
    assert history[0]["metadata"]["superseded_by"] == second["added"]
    stats = run_lmh("stats", *common).json()["procedural"]
    assert (stats["count"], stats["instructions"], stats["ended_instructions"], stats["procedures"]) == (2, 1, 1, 0)
    table = run_lmh("stats", "--dir", str(tmp_path / "memory"), "--user", "alice").ok().stdout
    assert "procedural" in table and "1 instructions, 1 replaced, 0 procedures" in table

    edited = run_lmh("procedural", "--edit", second["added"], "--text", "Use imperial units.", *common).json()
    assert edited["instructions"][0]["content"] == "Use imperial units."
    found = run_lmh("search", "units", "--tier", "procedural", *common).json()
    assert second["added"] in [r["id"] for r in found["results"]]

    gone = run_lmh("procedural", "--delete", second["added"], *common).json()
    assert gone["instructions"] == []
    assert_clean_error(run_lmh("procedural", "--delete", second["added"], *common), 1, "no instruction or procedure")
    assert_clean_error(run_lmh("procedural", "--edit", first["added"], *common), 2, "--edit needs --text")
    table = run_lmh("procedural", "--history", "--dir", str(tmp_path / "memory"), "--user", "alice").ok()
    assert "standing instructions" in table.stdout and "procedures" in table.stdout
