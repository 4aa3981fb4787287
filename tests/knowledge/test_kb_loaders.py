"""File loaders: every supported format yields readable text with its structure; bad files are named."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from kb_fixtures import SUPPORTED_FILES

from llama_index_memory_hierarchy.knowledge.loaders import DocumentLoadError, discover, load_file


def _text(path: Path) -> str:
    return "\n".join(d.text for d in load_file(path))


def test_discover_lists_files_and_names_missing_paths(doc_dir: Path, tmp_path: Path) -> None:
    (doc_dir / ".hidden.md").write_text("# secret\n")
    files, errors = discover([doc_dir, tmp_path / "nope.md", doc_dir / "handbook.md"])
    names = sorted(p.name for p in files)
    assert names == sorted([*SUPPORTED_FILES, "diagram.xyz", "broken.pdf"])  # hidden skipped, no duplicates
    assert len(errors) == 1 and "nope.md" in str(errors[0]) and "no such file" in str(errors[0])


def test_markdown_and_text_are_verbatim(doc_dir: Path) -> None:
    assert _text(doc_dir / "handbook.md").startswith("# Aurora Station Handbook")
    assert "sourdough bread" in _text(doc_dir / "kitchen.txt")


def test_pdf_one_document_per_page_with_labels(doc_dir: Path) -> None:
    docs = load_file(doc_dir / "glaciology.pdf")
    assert [d.metadata["page_label"] for d in docs] == ["1", "2"]
    assert "812 metres" in docs[0].text and "minus 30 degrees" in docs[1].text
    assert docs[0].metadata["file_name"] == "glaciology.pdf"


def test_docx_headings_become_markdown(doc_dir: Path) -> None:
    text = _text(doc_dir / "medical.docx")
    assert "# Medical Guide" in text and "## Frostbite" in text and "## Altitude sickness" in text
    assert "Rewarm frostbitten fingers" in text


@pytest.mark.parametrize(("name", "missing"), [("glaciology.pdf", "pypdf"), ("medical.docx", "docx")])
def test_pdf_and_docx_without_the_docs_extra_name_it(
    doc_dir: Path, monkeypatch: pytest.MonkeyPatch, name: str, missing: str
) -> None:
    """The core install has no document readers: such a file's error says which extra to install."""
    for module in (missing, "llama_index.readers.file"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed: importing it raises ImportError
    with pytest.raises(DocumentLoadError) as caught:
        load_file(doc_dir / name)
    assert name in str(caught.value) and "pip install 'llama-index-memory-hierarchy[docs]'" in str(caught.value)


def test_a_text_file_without_the_docs_extra_loads_without_a_warning(
    doc_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """LlamaIndex warns on every load that llama-index-readers-file is missing; every format read here has its own
    reader, so the core install's loads stay quiet."""
    monkeypatch.setitem(sys.modules, "llama_index.readers.file", None)
    with caplog.at_level("WARNING"):
        assert "sourdough bread" in _text(doc_dir / "kitchen.txt")
    assert not [r for r in caplog.records if "readers-file" in r.getMessage()]


def test_html_keeps_headings_drops_scripts_and_navigation(doc_dir: Path) -> None:
    text = _text(doc_dir / "survey.html")
    assert "# Penguin survey" in text and "## Survey equipment" in text and "thermal camera" in text
    assert "tracking" not in text and "Home | About" not in text


def test_csv_rows_keep_their_headers(doc_dir: Path) -> None:
    text = _text(doc_dir / "instruments.csv")
    assert "instrument: seismometer; location: vault 2; calibration: every September" in text


def test_json_keys_become_headings_and_paths(doc_dir: Path) -> None:
    text = _text(doc_dir / "station.json")
    assert "station: Aurora" in text and "## vehicles" in text and "name: Sno-Cat 1" in text
    assert "## contacts" in text and "doctor: Dr. Ingrid Solberg" in text


def test_unsupported_corrupt_binary_and_invalid_files_are_named(doc_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(DocumentLoadError, match=r"diagram\.xyz.*unsupported file type '\.xyz'"):
        load_file(doc_dir / "diagram.xyz")
    with pytest.raises(DocumentLoadError, match=r"broken\.pdf.*cannot read \.pdf"):
        load_file(doc_dir / "broken.pdf")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\x00\x01\x02 binary")
    with pytest.raises(DocumentLoadError, match="binary"):
        load_file(binary)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json", encoding="utf-8")
    with pytest.raises(DocumentLoadError, match="invalid JSON"):
        load_file(bad_json)
    empty = tmp_path / "empty.md"
    empty.write_text("   \n", encoding="utf-8")
    with pytest.raises(DocumentLoadError, match="no text"):
        load_file(empty)
