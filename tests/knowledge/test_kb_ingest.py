"""KnowledgeBase ingestion on the real stores: reports, content hashes, replacement, isolation, durability."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kb_fixtures import SUPPORTED_FILES

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE


def test_ingest_reports_each_file_and_keeps_going(make_kb, doc_dir: Path) -> None:
    kb = make_kb()
    report = kb.add_documents(doc_dir)
    assert sorted(Path(d).name for d in report.added) == sorted(SUPPORTED_FILES)
    failed = {Path(f.source).name: f.error for f in report.failed}
    assert set(failed) == {"diagram.xyz", "broken.pdf"}
    assert "unsupported file type '.xyz'" in failed["diagram.xyz"]
    assert "cannot read .pdf file" in failed["broken.pdf"]
    assert not report.ok and report.chunks_written == report.chunks_embedded > 0

    docs = {Path(d.doc_id).name: d for d in kb.list_documents()}
    assert set(docs) == set(SUPPORTED_FILES)
    assert docs["glaciology.pdf"].chunks == 2  # one per page
    stats = kb.stats()
    assert stats["documents"] == len(SUPPORTED_FILES) and stats["chunks"] == report.chunks_written
    assert stats["file_types"][".pdf"] == 1 and stats["space"].endswith("-384")


def test_unchanged_files_cost_no_embedding_and_changed_ones_only_their_new_chunks(
    make_kb, doc_dir: Path, embed_model
) -> None:
    kb = make_kb()
    first = kb.add_documents(doc_dir)
    embedded_once = len(embed_model.documents)
    assert embedded_once == first.chunks_embedded

    again = kb.add_documents(doc_dir)
    assert len(embed_model.documents) == embedded_once  # nothing embedded at all
    assert sorted(Path(d).name for d in again.unchanged) == sorted(SUPPORTED_FILES)
    assert again.chunks_written == again.chunks_embedded == again.chunks_deleted == 0

    handbook = doc_dir / "handbook.md"
    handbook.write_text(
        handbook.read_text().replace("every 14 days", "every 10 days") + "\n## Waste\n\nAll waste is flown out.\n"
    )
    before = {c.item.id for c in _chunks(kb, handbook)}
    embed_model.reset()
    changed = kb.add_documents(doc_dir)
    assert [Path(d).name for d in changed.updated] == ["handbook.md"]
    assert len(changed.unchanged) == len(SUPPORTED_FILES) - 1
    # only the edited chunk and the new section were embedded; the others reused their vectors
    assert changed.chunks_embedded == len(embed_model.documents) == 2
    assert changed.chunks_reused == changed.chunks_written - 2 > 0
    after = _chunks(kb, handbook)
    assert before.isdisjoint({c.item.id for c in after}) and changed.chunks_deleted == len(before)
    assert any("every 10 days" in c.item.content for c in after)
    assert not any("every 14 days" in c.item.content for c in after)
    hits = kb.as_retriever(similarity_top_k=3).retrieve("how often is the battery bank inspected")
    assert "every 10 days" in hits[0].node.get_content()


def _chunks(kb, path: Path):
    from llama_index_memory_hierarchy.types import MemoryFilter

    return kb.runtime.run(kb.scope.arecords(MemoryFilter(metadata={"doc_id": str(path.resolve())})))


def test_add_text_replace_delete_and_clear(make_kb) -> None:
    kb = make_kb()
    report = kb.add_text("# Notes\n\nThe gate code is 4417.", doc_id="note-1", metadata={"author": "ops"})
    assert report.added == ["note-1"] and report.chunks_written == 1
    assert kb.add_text("# Notes\n\nThe gate code is 4417.", doc_id="note-1", metadata={"author": "ops"}).unchanged
    assert kb.add_text("# Notes\n\nThe gate code is 9020.", doc_id="note-1").updated == ["note-1"]
    kb.add_text("Second note about the boiler.", doc_id="note-2")
    info = {d.doc_id: d for d in kb.list_documents()}
    assert set(info) == {"note-1", "note-2"} and info["note-1"].source is None
    hits = kb.as_retriever().retrieve("gate code")
    assert "9020" in hits[0].node.get_content() and all("4417" not in h.node.get_content() for h in hits)
    assert kb.delete_document("note-1") == 1
    assert kb.delete_document("note-1") == 0
    assert [d.doc_id for d in kb.list_documents()] == ["note-2"]
    assert kb.clear() == 1 and kb.list_documents() == [] and kb.stats()["chunks"] == 0


def test_delete_document_by_path(make_kb, doc_dir: Path) -> None:
    kb = make_kb()
    kb.add_documents([doc_dir / "kitchen.txt", doc_dir / "handbook.md"])
    assert kb.delete_document(str(doc_dir / "kitchen.txt")) > 0
    assert [Path(d.doc_id).name for d in kb.list_documents()] == ["handbook.md"]


def test_namespaces_users_and_memory_tiers_are_isolated(make_kb, make_memory, doc_dir: Path) -> None:
    memory = make_memory(user_id="alice")
    docs = make_kb("docs", embed_model=None, llm=None)
    notes = make_kb("notes", embed_model=None, llm=None)
    bob = make_kb("docs", user_id="bob", embed_model=None, llm=None)
    assert docs.context is notes.context is memory.context  # one set of stores
    docs.add_documents(doc_dir / "handbook.md")
    notes.add_text("The wind turbines were serviced by Nordic Wind AS.", doc_id="service")
    bob.add_text("Bob's wind turbine notes.", doc_id="bob-1")
    memory.episodic.add("Alice said the wind was strong today.")

    for hit in docs.as_retriever(similarity_top_k=10).retrieve("wind turbines"):
        assert hit.node.metadata["kb"] == "docs" and hit.node.metadata["doc_id"].endswith("handbook.md")
    assert [h.node.metadata["doc_id"] for h in notes.as_retriever(similarity_top_k=10).retrieve("wind")] == ["service"]
    assert [h.node.metadata["doc_id"] for h in bob.as_retriever(similarity_top_k=10).retrieve("wind")] == ["bob-1"]
    episodes = memory.episodic.retrieve("wind turbines", limit=10)
    assert [e.content for e in episodes] == ["Alice said the wind was strong today."]

    assert notes.clear() == 1
    assert docs.stats()["chunks"] > 0 and bob.stats()["chunks"] == 1 and memory.episodic.get_stats()["count"] == 1
    records = memory.context.runtime.run(memory.context.records.count("alice", namespace=MEMORY_NAMESPACE))
    assert records == 1  # knowledge chunks never count as memories


def test_knowledge_survives_reopening(make_kb, doc_dir: Path, embed_model) -> None:
    kb = make_kb()
    kb.add_documents(doc_dir / "handbook.md")
    listed = kb.list_documents()
    kb.close()
    embed_model.reset()
    reopened = make_kb()
    assert reopened.list_documents() == listed
    assert reopened.add_documents(doc_dir / "handbook.md").unchanged and embed_model.documents == []
    assert "whiteout" in reopened.as_retriever(similarity_top_k=1).retrieve("whiteout")[0].node.get_content()


def test_bad_input_is_refused_precisely(make_kb, tmp_path: Path) -> None:
    from llama_index_memory_hierarchy.knowledge import KnowledgeBase

    with pytest.raises(MemoryValidationError, match="namespace"):
        KnowledgeBase.from_defaults(namespace="kb:evil", persist_dir=str(tmp_path))
    kb = make_kb()
    with pytest.raises(MemoryValidationError, match="text"):
        kb.add_text("   ", doc_id="x")
    with pytest.raises(MemoryValidationError, match="reserved"):
        kb.add_text("fine", doc_id="x", metadata={"doc_id": "y"})
    with pytest.raises(MemoryValidationError, match="doc_id"):
        kb.add_text("fine", doc_id="")
    report = kb.add_documents(tmp_path / "missing-folder")
    assert report.failed and "no such file" in report.failed[0].error and kb.list_documents() == []


async def test_async_twins(make_kb, doc_dir: Path) -> None:
    kb = make_kb()
    reports = await asyncio.gather(
        kb.aadd_documents(doc_dir / "kitchen.txt"), kb.aadd_text("Solar panels on the roof.", doc_id="solar")
    )
    assert all(r.ok for r in reports)
    assert {Path(d.doc_id).name for d in await kb.alist_documents()} == {"kitchen.txt", "solar"}
    assert (await kb.astats())["documents"] == 2
    assert await kb.adelete_document("solar") == 1
    assert await kb.aclear() > 0


def test_progress_bar_on_large_ingest(make_kb, tmp_path: Path, capsys) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(24):
        (folder / f"note{i:02d}.md").write_text(f"# Note {i}\n\nItem {i} is stored on shelf {i * 3}.\n")
    kb = make_kb(show_progress=True)
    assert len(kb.add_documents(folder).added) == 24
    assert "Ingesting into docs" in capsys.readouterr().err


def test_a_renamed_file_reuses_its_embeddings(make_kb, doc_dir: Path, embed_model) -> None:
    kb = make_kb()
    first = kb.add_documents(doc_dir / "handbook.md")
    embed_model.reset()
    moved = doc_dir / "handbook-v2.md"
    (doc_dir / "handbook.md").rename(moved)
    report = kb.add_documents(moved)
    assert report.added == [str(moved.resolve())] and embed_model.documents == []
    assert report.chunks_reused == report.chunks_written == first.chunks_written
    assert kb.delete_document(str(doc_dir / "handbook.md")) == first.chunks_written  # the old path, explicitly
