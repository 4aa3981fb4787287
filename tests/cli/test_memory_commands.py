"""``lmh add``, ``search``, ``timeline``, ``stats``, ``graph``, ``forget``, ``export``, ``import``, ``reindex``
and ``migrate`` through the real entry point, one subprocess per command, on one folder per test.

These tests check the command line's plumbing (scoping, filters, exit codes, files), so they run
on the package's hashing embedding (``LMH_EMBED_MODEL=hashing``, a built-in setting): a run then
takes about a second instead of loading torch and MiniLM each time. The demo, knowledge and chat
tests run on the bundled MiniLM.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import cli_helpers
from cli_helpers import assert_clean_error
from PIL import Image

run_lmh = functools.partial(cli_helpers.run_lmh, env={"LMH_EMBED_MODEL": "hashing"})


def test_add_search_timeline_stats_graph_forget(tmp_path: Path) -> None:
    folder = str(tmp_path / "memory")
    common = ["--dir", folder, "--user", "alice"]

    pinned = run_lmh(
        "add", "I'm allergic to peanuts and I love genmaicha tea", "--tier", "semantic", "--pin", "--json", *common
    ).json()
    assert pinned["tier"] == "semantic" and pinned["memory"]["pinned"] is True
    museum = run_lmh(
        "add", "-", "--when", "2026-01-05T10:00", "--metadata", '{"place": "Kyoto"}', "--json", *common,
        stdin="Yesterday I visited the Kyoto tea museum with Bob\n",
    ).json()  # fmt: skip
    assert museum["tier"] == "episodic", museum  # routed by the lifecycle's heuristics: an event in time
    assert museum["memory"]["metadata"]["place"] == "Kyoto"
    assert museum["memory"]["timestamp"].startswith("2026-01-05T10:00")
    run_lmh("add", "Bob's tea kettle is broken", "--tier", "episodic", "--dir", folder, "--user", "bob").ok()
    image = tmp_path / "sketch.png"
    Image.new("RGB", (64, 48), "navy").save(image)
    photo = run_lmh("add", "a navy blue sketch", "--file", str(image), "--json", *common).json()
    assert photo["tier"] == "perceptual"

    found = run_lmh("search", "tea", "--limit", "10", "--json", *common).json()
    ids = [r["id"] for r in found["results"]]
    assert pinned["id"] in ids and museum["id"] in ids
    assert all(r["user_id"] == "alice" for r in found["results"]), "another user's memory leaked"
    assert not any("kettle" in r["content"] for r in found["results"])

    january = run_lmh(
        "search", "tea", "--tier", "episodic", "--since", "2026-01-01", "--until", "2026-01-31", "--json", *common
    ).json()
    assert [r["id"] for r in january["results"]] == [museum["id"]]

    table = run_lmh("search", "genmaicha", *common).ok().stdout
    assert "genmaicha" in table and pinned["id"] in table and "semantic" in table

    timeline = run_lmh("timeline", "--since", "2026-01-01", "--last", "-n", "5", "--json", *common).json()["events"]
    assert [e["id"] for e in timeline] == [museum["id"]]

    stats = run_lmh("stats", "--json", *common).json()
    assert stats["user_id"] == "alice" and stats["episodic"]["count"] == 1 and stats["perceptual"]["count"] == 1
    assert stats["semantic"]["count"] >= 1 and stats["users_in_store"] == 2

    html = tmp_path / "graph.html"
    graph = run_lmh("graph", "--html", str(html), "--json", *common).json()
    assert graph["facts"], graph  # offline extraction found facts in the semantic memory
    assert html.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    assert graph["written"]["html"] == str(html.resolve())
    entity = graph["facts"][0]["subject"]
    detail = run_lmh("graph", "--entity", entity, "--depth", "1", *common).ok().stdout
    assert entity in detail and "Knowledge graph" in detail
    assert_clean_error(run_lmh("graph", "--entity", "Nobody Known", *common), 1, "no entity")

    # another user's id counts as absent
    assert_clean_error(run_lmh("forget", pinned["id"], "--dir", folder, "--user", "bob"), 1)
    dry = run_lmh("forget", "--strategy", "importance_based", "--threshold", "1", "--dry-run", "--json", *common).json()
    would = [i["id"] for tier in dry["tiers"].values() for i in tier["items"]]
    assert museum["id"] in would and pinned["id"] not in would, "a pinned memory would be forgotten"
    assert dry["dry_run"] is True and dry["total"] == len(would)
    forgot = run_lmh("forget", museum["id"], "--json", *common).json()
    assert forgot == {"deleted": [{"id": museum["id"], "tier": "episodic"}], "not_found": []}
    after = run_lmh("search", "Kyoto museum", "--tier", "episodic", "--json", *common).json()
    assert after["results"] == []


def test_export_import_erase_and_reindex(tmp_path: Path) -> None:
    source, target = str(tmp_path / "a"), str(tmp_path / "b")
    added = run_lmh(
        "add", "Yesterday Carol bought green tea at the morning market", "--tier", "episodic", "--session", "s1",
        "--json", "--dir", source, "--user", "carol",
    ).json()  # fmt: skip
    export = tmp_path / "carol.json"
    report = run_lmh("export", str(export), "--json", "--dir", source, "--user", "carol").json()
    assert report["user_id"] == "carol" and report["records"] >= 1
    assert json.loads(export.read_text(encoding="utf-8"))["user_id"] == "carol"
    assert_clean_error(run_lmh("export", str(export), "--dir", source, "--user", "carol"), 1, "--force")

    transcript = run_lmh("export", "-", "--session", "s1", "--dir", source, "--user", "carol").ok().stdout
    assert "# Session s1" in transcript and "morning market" in transcript
    assert_clean_error(run_lmh("export", "-", "--session", "nope", "--dir", source, "--user", "carol"), 1, "nope")

    imported = run_lmh("import", str(export), "--user", "dave", "--json", "--dir", target).json()
    assert imported["user_id"] == "dave" and imported["records"] == report["records"]
    assert imported["reembedded"] == 0, "the same model: embeddings are reused"
    copied = run_lmh("search", "green tea market", "--json", "--dir", target, "--user", "dave").json()
    assert [r["id"] for r in copied["results"]] == [added["id"]]
    assert_clean_error(run_lmh("import", str(tmp_path / "nothing.json"), "--dir", target), 1, "no such file")
    not_export = tmp_path / "other.json"
    not_export.write_text("{}", encoding="utf-8")
    assert_clean_error(run_lmh("import", str(not_export), "--dir", target), 2, "path")

    reindex = run_lmh("reindex", "--json", "--dir", source).json()
    assert reindex["records"] >= 1 and reindex["keyword_index"] is True
    still = run_lmh("search", "green tea", "--json", "--dir", source, "--user", "carol").json()
    assert added["id"] in [r["id"] for r in still["results"]]

    target = tmp_path / "target.toml"
    target.write_text(f'[memory]\npersist_dir = "{tmp_path / "c"}"\n', encoding="utf-8")
    moved = run_lmh("migrate", "--from", source, "--to", str(target), "--json").json()
    assert moved["ok"] is True and all(check["ok"] for check in moved["checks"])
    there = run_lmh("search", "green tea market", "--json", "--dir", str(tmp_path / "c"), "--user", "carol").json()
    assert [r["id"] for r in there["results"]] == [added["id"]]
    assert_clean_error(run_lmh("migrate", "--from", source, "--to", str(tmp_path / "nope.toml")), 2, "nope.toml")

    erased = run_lmh("forget", "--everything", "--yes", "--json", "--dir", source, "--user", "carol").json()
    assert erased["user_id"] == "carol" and sum(erased["rows"].values()) >= 1
    stats = run_lmh("stats", "--json", "--dir", source, "--user", "carol").json()
    assert stats["episodic"]["count"] == stats["semantic"]["count"] == stats["perceptual"]["count"] == 0


def test_reindex_moves_a_store_to_another_embedding_model(tmp_path: Path) -> None:
    """A store embedded by MiniLM, opened with multilingual E5: detected, then `lmh reindex` re-embeds it.

    The query shares no word with the memory it should find (English question, Chinese memory),
    so only the dense side can find it: not before the reindex (the records sit in MiniLM's
    space), and first after it.
    """
    folder = str(tmp_path / "memory")
    common = ["--dir", folder, "--user", "zhang", "--json"]
    minilm, e5 = {"LMH_EMBED_MODEL": "minilm"}, {"LMH_EMBED_MODEL": "e5"}
    food = cli_helpers.run_lmh("add", "我喜欢吃辣的川菜", "--tier", "episodic", *common, env=minilm).json()
    cli_helpers.run_lmh(
        "add", "My manager Lee asked me for the weekly report", "--tier", "episodic", *common, env=minilm
    )

    before = cli_helpers.run_lmh("search", "spicy Sichuan food", *common, env=e5)
    assert before.json()["results"] == []
    assert "embedded by another model" in before.stderr and "lmh reindex" in before.stderr

    report = cli_helpers.run_lmh("reindex", "--dir", folder, "--json", env=e5).json()
    assert list(report["reembedded"].values()) == [2] and "minilm" in next(iter(report["reembedded"]))
    assert list(report["spaces"]) == ["multilingual-e5-small-q4-384"]

    after = cli_helpers.run_lmh("search", "spicy Sichuan food", *common, env=e5)
    assert after.json()["results"][0]["id"] == food["id"]
    assert "another model" not in after.stderr
    again = cli_helpers.run_lmh("reindex", "--dir", folder, "--json", env=e5).json()
    assert again["reembedded"] == {}  # nothing left to move


def test_ids_shown_are_whole_and_consistent(tmp_path: Path) -> None:
    """What `add` reports is what `search` lists (the memory and the facts derived from it), whole at 80 columns."""
    common = ["--dir", str(tmp_path / "memory"), "--user", "erin"]
    added = run_lmh("add", "I work at Acme as a data analyst", "--tier", "semantic", "--json", *common).json()
    derived = {fact["id"]: fact["content"] for fact in added["derived"]}
    assert derived and added["id"] not in derived  # the statement and the facts extracted from it
    narrow = cli_helpers.run_lmh("add", "My brother Tom plays the cello", "--tier", "semantic", *common,
                                 env={"LMH_EMBED_MODEL": "hashing", "COLUMNS": "80"}).ok().stdout  # fmt: skip
    assert "derived fact" in narrow
    found = run_lmh("search", "Acme analyst", "--limit", "10", "--json", *common).json()["results"]
    listed = {r["id"] for r in found}
    assert listed & ({added["id"]} | set(derived)), "search lists neither the memory nor its facts"
    table = cli_helpers.run_lmh(
        "search", "Acme analyst", "--limit", "10", *common, env={"LMH_EMBED_MODEL": "hashing", "COLUMNS": "80"}
    ).ok()
    assert max(len(line) for line in table.stdout.splitlines()) <= 80
    for memory_id in listed:
        assert memory_id in table.stdout, f"{memory_id} cut at 80 columns"
    some = next(iter(listed))
    assert run_lmh("forget", some, "--json", *common).json()["deleted"][0]["id"] == some  # pasteable


def test_timeline_last_takes_a_count(tmp_path: Path) -> None:
    common = ["--dir", str(tmp_path / "memory"), "--user", "finn"]
    ids = [
        run_lmh("add", f"Day {day}: I watered the plants", "--tier", "episodic", "--when", f"2026-03-0{day}T09:00",
                "--json", *common).json()["id"]
        for day in range(1, 8)
    ]  # fmt: skip
    assert [e["id"] for e in run_lmh("timeline", "--last", "5", "--json", *common).json()["events"]] == ids[-5:]
    assert [e["id"] for e in run_lmh("timeline", "--last", "-n", "2", "--json", *common).json()["events"]] == ids[-2:]
    assert len(run_lmh("timeline", "--last", "--json", *common).json()["events"]) == 7
    assert_clean_error(run_lmh("timeline", "--last", "0", *common), 2, "at least 1")
