"""The heading-aware chunker: heading paths, a real token bound, overlap, exact slices, no text lost."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core import Document
from llama_index.core.schema import NodeRelationship

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.knowledge.chunking import MarkdownHeadingSplitter, merge_spans, parse_sections

DOC = """Preamble before any heading.

# Guide

## Install

Run the installer.

```bash
# this is a shell comment, not a heading
pip install thing
```

## Usage

Setext Title
------------

Body under the setext heading.

### Deep

Deep text.
"""


def test_heading_paths_atx_setext_and_fences() -> None:
    splitter = MarkdownHeadingSplitter(chunk_size=200, chunk_overlap=20)
    spans = splitter.split_spans(DOC)
    paths = [" > ".join(s.headings) for s in spans]
    assert paths[0] == ""  # the preamble
    assert "Guide > Install" in paths
    # "# this is a shell comment" inside the fence is not a heading
    assert not any("shell comment" in p for p in paths)
    install = spans[paths.index("Guide > Install")]
    assert DOC[install.start : install.end].startswith("# Guide\n\n## Install")  # parent heading carried in
    assert "pip install thing" in DOC[install.start : install.end]
    assert "Guide > Usage" in paths  # "## Usage" has no body but is not followed by a nested heading
    assert "Guide > Setext Title" in paths and "Guide > Setext Title > Deep" in paths


def test_parse_sections_levels() -> None:
    sections = parse_sections("# A\n\ntext\n\n### C\n\nx\n\n## B\n\ny\n")
    assert [s.headings for s in sections] == [["A"], ["A", "C"], ["A", "B"]]


def test_oversize_paragraph_is_really_split_within_the_token_bound() -> None:
    splitter = MarkdownHeadingSplitter(chunk_size=40, chunk_overlap=8)
    sentence = "The quick brown fox jumps over the lazy dog near the riverbank today. "
    text = "# Title\n\n" + sentence * 30  # one paragraph of ~450 tokens, no blank lines
    spans = splitter.split_spans(text)
    assert len(spans) > 10
    for span in spans:
        assert splitter.count_tokens(text[span.start : span.end]) <= 40
        assert span.headings == ["Title"]


@pytest.mark.parametrize(
    "text",
    [
        "word " * 500,  # words only
        "https://example.org/" + "a" * 3000,  # one long token run
        "中文句子没有空格也没有标点" * 200,  # CJK without spaces or punctuation
    ],
)
def test_token_bound_holds_without_separators(text: str) -> None:
    splitter = MarkdownHeadingSplitter(chunk_size=32, chunk_overlap=6)
    spans = splitter.split_spans(text)
    assert spans
    assert all(splitter.count_tokens(text[s.start : s.end]) <= 32 for s in spans)
    assert spans[-1].end == len(text.rstrip())


def test_overlap_repeats_the_previous_tail_within_budget() -> None:
    splitter = MarkdownHeadingSplitter(chunk_size=50, chunk_overlap=10)
    text = " ".join(f"Sentence number {i} talks about topic {i}." for i in range(60))
    spans = splitter.split_spans(text)
    assert len(spans) > 3
    for previous, current in itertools.pairwise(spans):
        assert current.start < previous.end  # overlapping
        overlap = text[current.start : previous.end]
        assert 0 < splitter.count_tokens(overlap) <= 10
        assert not text[current.start].isspace()  # starts on a word boundary
    merged = merge_spans([(s.start, s.end, text[s.start : s.end]) for s in spans])
    assert merged == text[spans[0].start : spans[-1].end]


def test_node_parser_interface_keeps_offsets_metadata_and_source() -> None:
    splitter = MarkdownHeadingSplitter(chunk_size=30, chunk_overlap=5)
    repeated = "# Rep\n\n" + "same words again and again. " * 40  # repeated text: str.find would misplace
    document = Document(text=repeated, metadata={"file_name": "rep.md"})
    nodes = splitter.get_nodes_from_documents([document])
    assert len(nodes) > 3
    starts = [n.start_char_idx for n in nodes]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    for i, node in enumerate(nodes):
        assert repeated[node.start_char_idx : node.end_char_idx] == node.get_content()
        assert node.metadata["file_name"] == "rep.md"
        assert node.metadata["heading_path"] == "Rep" and node.metadata["headings"] == ["Rep"]
        assert node.metadata["chunk_index"] == i
        assert node.relationships[NodeRelationship.SOURCE].node_id == document.doc_id


def test_overlap_must_be_smaller_than_size() -> None:
    with pytest.raises(MemoryValidationError, match="chunk_overlap"):
        MarkdownHeadingSplitter(chunk_size=10, chunk_overlap=10)


_texts = st.lists(
    st.one_of(
        st.sampled_from(["# H1", "## H2", "### H3", "```", "", "", "-----", "====="]),
        st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=120),
        st.from_regex(r"[A-Za-z ]{0,300}\.", fullmatch=True),
    ),
    max_size=40,
).map("\n".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts)
def test_property_bound_slices_and_no_text_lost(text: str) -> None:
    splitter = MarkdownHeadingSplitter(chunk_size=24, chunk_overlap=5)
    spans = splitter.split_spans(text)
    covered = [False] * len(text)
    for span in spans:
        assert 0 <= span.start < span.end <= len(text)
        assert splitter.count_tokens(text[span.start : span.end]) <= 24
        for i in range(span.start, span.end):
            covered[i] = True
    lost = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not lost, f"characters not in any chunk: {[text[i] for i in lost][:20]}"
