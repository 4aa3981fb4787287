"""Markdown-heading-aware chunking: :class:`MarkdownHeadingSplitter`, a LlamaIndex ``NodeParser``.

Why our own splitter: LlamaIndex's ``MarkdownNodeParser`` cuts at headings but never
bounds a section's size, and ``SentenceSplitter`` bounds size but forgets headings. Here a
document is cut at headings first (the heading path goes into metadata, for citations and
for the embedding text), then each section is packed into chunks of at most
``chunk_size`` tokens (counted with a real tokenizer), splitting an oversize paragraph at
lines, then sentences, then words, then characters, with ``chunk_overlap`` tokens of the
previous chunk repeated at the start of the next one (within a section only).

Every chunk is an exact slice ``text[start:end]`` of its document, so adjacent chunks can
be merged back without duplicating the overlap.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, TextNode
from llama_index.core.utils import get_tqdm_iterable

#: Separator used in the flat ``heading_path`` metadata string.
HEADING_SEPARATOR = " > "

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
# Sentence ends: Latin punctuation followed by space, or CJK full stops (no space needed).
_SENTENCE_END = re.compile(r"(?<=[.!?;:])[\"')\]]*\s+|(?<=[。！？；])")
_WHITESPACE = re.compile(r"\s+")


@dataclass
class ChunkSpan:
    """One chunk: ``text[start:end]`` of the source, its heading path and token count."""

    start: int
    end: int
    headings: list[str] = field(default_factory=list)
    tokens: int = 0


@dataclass
class _Section:
    start: int
    end: int
    headings: list[str]
    body_start: int  # first character after the heading line (== start when no heading)


def parse_sections(text: str) -> list[_Section]:
    """Cut Markdown at ATX (``#``) and setext (``===``/``---``) headings, ignoring fenced code."""
    lines = text.splitlines(keepends=True)
    offsets: list[int] = []
    pos = 0
    for line in lines:
        offsets.append(pos)
        pos += len(line)

    # (line_index_of_section_start, level, title, body_start)
    marks: list[tuple[int, int, str, int]] = []
    fence: str | None = None
    for i, raw in enumerate(lines):
        line = raw.rstrip("\r\n")
        match = _FENCE.match(line)
        if fence is not None:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        atx = _ATX.match(line)
        if atx:
            marks.append((i, len(atx.group(1)), (atx.group(2) or "").strip(), offsets[i] + len(raw)))
            continue
        setext = _SETEXT.match(line)
        if setext and i > 0 and not marks_has_line(marks, i - 1):
            prev = lines[i - 1].strip()
            prev_prev_blank = i < 2 or not lines[i - 2].strip()
            if prev and prev_prev_blank and not _FENCE.match(prev) and not prev.startswith(("-", "*", ">", "|")):
                level = 1 if setext.group(1)[0] == "=" else 2
                marks.append((i - 1, level, prev.strip(), offsets[i] + len(raw)))

    sections: list[_Section] = []
    first = offsets[marks[0][0]] if marks else len(text)
    if first > 0:
        sections.append(_Section(0, first, [], 0))
    stack: list[tuple[int, str]] = []
    for n, (line_i, level, title, body_start) in enumerate(marks):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        start = offsets[line_i]
        end = offsets[marks[n + 1][0]] if n + 1 < len(marks) else len(text)
        sections.append(_Section(start, end, [t for _, t in stack if t], min(body_start, end)))
    return sections


def marks_has_line(marks: list[tuple[int, int, str, int]], line_index: int) -> bool:
    """Whether a heading was already recognised on this line (a setext underline cannot follow it)."""
    return bool(marks) and marks[-1][0] == line_index


class MarkdownHeadingSplitter(NodeParser):
    """Split documents at Markdown headings, then into chunks of at most ``chunk_size`` tokens.

    Each node gets ``headings`` (list) and ``heading_path`` ("A > B") metadata plus
    ``chunk_index`` within its document; ``start_char_idx``/``end_char_idx`` locate it.
    Plain text (PDF pages, DOCX without heading styles) simply has an empty heading path.
    """

    chunk_size: int = Field(default=200, gt=0, description="Most tokens in one chunk (overlap included).")
    chunk_overlap: int = Field(default=30, ge=0, description="Tokens of the previous chunk repeated at the start.")
    _tokenizer: Callable[[str], Sequence[Any]] = PrivateAttr()

    def __init__(self, tokenizer: Callable[[str], Sequence[Any]] | None = None, **kwargs: Any) -> None:
        size, overlap = kwargs.get("chunk_size", 200), kwargs.get("chunk_overlap", 30)
        if isinstance(size, int) and isinstance(overlap, int) and overlap >= size:
            from llama_index_memory_hierarchy.errors import MemoryValidationError

            raise MemoryValidationError("chunk_overlap", f"must be smaller than chunk_size ({overlap} >= {size})")
        super().__init__(**kwargs)
        if tokenizer is None:
            from llama_index.core.utils import get_tokenizer

            tokenizer = get_tokenizer()
        self._tokenizer = tokenizer

    @classmethod
    def class_name(cls) -> str:
        return "MarkdownHeadingSplitter"

    @property
    def fingerprint(self) -> str:
        """Identifies the chunking settings (part of a document's content hash)."""
        return f"mdh-v1:{self.chunk_size}:{self.chunk_overlap}"

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` with this splitter's tokenizer."""
        return len(self._tokenizer(text)) if text else 0

    # ------------------------------------------------------------------ NodeParser
    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        out: list[BaseNode] = []
        for node in get_tqdm_iterable(nodes, show_progress, "Chunking"):
            text = node.get_content(metadata_mode=MetadataMode.NONE)
            relationships = {NodeRelationship.SOURCE: node.as_related_node_info()}
            for i, span in enumerate(self.split_spans(text)):
                out.append(
                    TextNode(
                        id_=self.id_func(i, node),
                        text=text[span.start : span.end],
                        start_char_idx=span.start,
                        end_char_idx=span.end,
                        metadata={
                            "headings": list(span.headings),
                            "heading_path": HEADING_SEPARATOR.join(span.headings),
                            "chunk_index": i,
                        },
                        excluded_embed_metadata_keys=[*node.excluded_embed_metadata_keys, "chunk_index", "headings"],
                        excluded_llm_metadata_keys=[*node.excluded_llm_metadata_keys, "chunk_index", "headings"],
                        relationships=relationships,
                    )
                )
        return out

    def _postprocess_parsed_nodes(self, nodes: list[BaseNode], parent_doc_map: dict[str, Any]) -> list[BaseNode]:
        # The base class re-locates each chunk with ``str.find``, which picks the wrong place when
        # text repeats; our offsets are exact, so keep them.
        offsets = [(getattr(n, "start_char_idx", None), getattr(n, "end_char_idx", None)) for n in nodes]
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for node, (start, end) in zip(nodes, offsets, strict=True):
            if isinstance(node, TextNode) and start is not None:
                node.start_char_idx, node.end_char_idx = start, end
        return nodes

    def split_text(self, text: str) -> list[str]:
        """The chunk texts of ``text`` (like LlamaIndex's ``TextSplitter.split_text``)."""
        return [text[s.start : s.end] for s in self.split_spans(text)]

    # ------------------------------------------------------------------ the algorithm
    def split_spans(self, text: str) -> list[ChunkSpan]:
        """Chunks of ``text`` as spans with heading paths, each within ``chunk_size`` tokens."""
        if not text.strip():
            return []
        sections = parse_sections(text)
        # A heading with no body of its own is carried into the next section when that one is
        # nested under it ("# Guide" then "## Install"); otherwise it stays a (small) chunk, so
        # that no text of the document is ever dropped.
        spans: list[ChunkSpan] = []
        carry: int | None = None
        for n, sec in enumerate(sections):
            start = sec.start if carry is None else carry
            carry = None
            nxt = sections[n + 1] if n + 1 < len(sections) else None
            body_empty = not text[sec.body_start : sec.end].strip()
            nested_next = (
                nxt is not None
                and len(nxt.headings) > len(sec.headings)
                and nxt.headings[: len(sec.headings)] == sec.headings
            )
            if body_empty and sec.headings and nested_next:
                carry = start
                continue
            spans.extend(self._split_section(text, start, sec.end, sec.headings))
        return spans

    def _split_section(self, text: str, start: int, end: int, headings: list[str]) -> list[ChunkSpan]:
        unit_limit = self.chunk_size - self.chunk_overlap
        units: list[tuple[int, int, int]] = []  # (start, end, tokens)
        for s, e in _blocks(text, start, end):
            units.extend(self._bounded_units(text, s, e, unit_limit, level=0))
        if not units:
            return []

        chunks: list[ChunkSpan] = []
        i = 0
        overlap_start: int | None = None
        while i < len(units):
            chunk_start = units[i][0] if overlap_start is None else overlap_start
            overlap_tokens = self.count_tokens(text[chunk_start : units[i][0]]) if overlap_start is not None else 0
            budget = self.chunk_size - overlap_tokens
            j = i
            used = 0
            while j < len(units) and (j == i or used + units[j][2] + 1 <= budget):
                used += units[j][2] + (1 if j > i else 0)
                j += 1
            # Verify with a real count (token counts are not exactly additive); shrink if needed.
            while True:
                tokens = self.count_tokens(text[chunk_start : units[j - 1][1]])
                if tokens <= self.chunk_size:
                    break
                if j - 1 > i:
                    j -= 1
                elif chunk_start < units[i][0]:
                    chunk_start = self._next_word_start(text, chunk_start, units[i][0])
                else:  # a single unit is always within the limit by construction
                    break
            chunks.append(ChunkSpan(chunk_start, units[j - 1][1], list(headings), tokens))
            i = j
            overlap_start = self._overlap_start(text, chunk_start, units[j - 1][1]) if i < len(units) else None
            if overlap_start is not None and overlap_start >= units[i][0]:
                overlap_start = None
        return chunks

    def _bounded_units(self, text: str, start: int, end: int, limit: int, level: int) -> list[tuple[int, int, int]]:
        """Split ``text[start:end]`` into pieces of at most ``limit`` tokens, coarse separators first."""
        tokens = self.count_tokens(text[start:end])
        if tokens <= limit:
            return [(start, end, tokens)]
        if level >= 3:
            return self._char_windows(text, start, end, limit)
        pieces = _split_at(text, start, end, level)
        if len(pieces) <= 1:
            return self._bounded_units(text, start, end, limit, level + 1)
        # Pack consecutive small pieces together, recurse into oversize ones.
        out: list[tuple[int, int, int]] = []
        cur: tuple[int, int] | None = None
        for ps, pe in pieces:
            if cur is not None:
                merged = self.count_tokens(text[cur[0] : pe])
                if merged <= limit:
                    cur = (cur[0], pe)
                    continue
                out.append((cur[0], cur[1], self.count_tokens(text[cur[0] : cur[1]])))
                cur = None
            if self.count_tokens(text[ps:pe]) <= limit:
                cur = (ps, pe)
            else:
                out.extend(self._bounded_units(text, ps, pe, limit, level + 1))
        if cur is not None:
            out.append((cur[0], cur[1], self.count_tokens(text[cur[0] : cur[1]])))
        return out

    def _char_windows(self, text: str, start: int, end: int, limit: int) -> list[tuple[int, int, int]]:
        """Last resort for a run with no separators (a long URL, CJK without punctuation)."""
        out: list[tuple[int, int, int]] = []
        s = start
        while s < end:
            lo, hi = s + 1, end
            while lo < hi:  # largest e with tokens(text[s:e]) <= limit
                mid = (lo + hi + 1) // 2
                if self.count_tokens(text[s:mid]) <= limit:
                    lo = mid
                else:
                    hi = mid - 1
            out.append((s, lo, self.count_tokens(text[s:lo])))
            s = lo
        return out

    def _overlap_start(self, text: str, chunk_start: int, chunk_end: int) -> int | None:
        """Start of the longest word-aligned tail of the chunk within ``chunk_overlap`` tokens."""
        if self.chunk_overlap == 0:
            return None
        words = [m.end() for m in _WHITESPACE.finditer(text, chunk_start, chunk_end) if m.end() < chunk_end]
        for candidates in (words, range(chunk_start + 1, chunk_end)):  # word starts, else characters (CJK)
            # tokens(text[c:chunk_end]) decreases as c grows: find the first candidate within budget.
            lo, hi = 0, len(candidates)
            while lo < hi:
                mid = (lo + hi) // 2
                if self.count_tokens(text[candidates[mid] : chunk_end]) <= self.chunk_overlap:
                    hi = mid
                else:
                    lo = mid + 1
            if lo < len(candidates) and candidates[lo] < chunk_end and not text[candidates[lo]].isspace():
                return candidates[lo]
        return None

    @staticmethod
    def _next_word_start(text: str, pos: int, limit: int) -> int:
        match = _WHITESPACE.search(text, pos, limit)
        return match.end() if match and match.end() < limit else limit


def _blocks(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Paragraph blocks (separated by blank lines) of ``text[start:end]``; fenced code stays whole."""
    out: list[tuple[int, int]] = []
    pos = start
    in_fence = False
    block_start: int | None = None
    for match in re.finditer(r"[^\n]*(?:\n|$)", text[start:end]):
        if not match.group(0):
            break
        ls, le = start + match.start(), start + match.end()
        line = text[ls:le]
        fence = _FENCE.match(line)
        if fence:
            in_fence = not in_fence
        if not line.strip() and not in_fence:
            if block_start is not None:
                out.append(_trim(text, block_start, ls))
                block_start = None
        elif block_start is None:
            block_start = ls
        pos = le
    if block_start is not None:
        out.append(_trim(text, block_start, pos))
    return [(s, e) for s, e in out if e > s]


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _split_at(text: str, start: int, end: int, level: int) -> list[tuple[int, int]]:
    """Pieces of ``text[start:end]`` cut at lines (0), sentences (1) or words (2), whitespace trimmed."""
    pattern = (re.compile(r"\n"), _SENTENCE_END, _WHITESPACE)[level]
    cuts = [start]
    for match in pattern.finditer(text, start, end):
        if start < match.end() < end:
            cuts.append(match.end())
    cuts.append(end)
    pieces = [_trim(text, a, b) for a, b in itertools.pairwise(cuts)]
    return [(a, b) for a, b in pieces if b > a]


def merge_spans(pieces: Sequence[tuple[int, int, str]]) -> str:
    """Join chunk texts of one document given ``(start, end, text)`` sorted by start, without repeating overlap."""
    out = ""
    last_end: int | None = None
    for start, end, chunk in pieces:
        if last_end is None:
            out = chunk
        elif start < last_end:
            out += chunk[last_end - start :] if end > last_end else ""
        else:
            out += "\n\n" + chunk
        last_end = end if last_end is None else max(last_end, end)
    return out


__all__ = ["HEADING_SEPARATOR", "ChunkSpan", "MarkdownHeadingSplitter", "merge_spans", "parse_sections"]
