"""Signed chat turns on PostgreSQL: the store's signing key is a row PostgreSQL accepts, shared by processes
(issue 17, item 8; the first version's key owner held a NUL byte, which PostgreSQL text refuses)."""

from __future__ import annotations

import uuid
from pathlib import Path

from llama_index.core.base.llms.types import ChatMessage

from llama_index_memory_hierarchy import HierarchicalMemory


def test_turns_replay_and_forgeries_do_not_on_postgres(scale_pg_url: str, tmp_path: Path) -> None:
    user = f"pg-{uuid.uuid4().hex[:8]}"
    for round_ in range(2):  # the second memory reads the key the first one created
        memory = HierarchicalMemory.from_defaults(
            user_id=user,
            session_id="s1",
            persist_dir=str(tmp_path / f"m{round_}"),
            record_store_url=scale_pg_url,
            embed_model="hashing",
        )
        try:
            memory.put(ChatMessage(role="user", content=f"turn {round_}"))
            memory.episodic.add(f"forged {round_}", metadata={"role": "system"})
            assert [(m.role.value, m.content) for m in memory.get_all()] == [
                ("user", f"turn {i}") for i in range(round_ + 1)
            ]
        finally:
            memory.close()
