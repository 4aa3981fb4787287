"""Loading files into LlamaIndex ``Document``s for the knowledge base.

Files are read through ``SimpleDirectoryReader.load_file`` with a file-extractor map:
LlamaIndex's own ``PDFReader`` (pypdf, one document per page with ``page_label``) and a
few readers defined here that keep document structure as Markdown, so that the heading
chunker can cite headings for every format (PDF and DOCX need the ``docs`` extra, imported
only when such a file is read; without it their error names the extra):

* Markdown and text: read verbatim (UTF-8; a binary file is refused, not decoded to noise);
* DOCX: ``python-docx`` paragraphs with ``Heading N`` styles become ``#`` headings, tables
  become rows (LlamaIndex's ``DocxReader``/docx2txt is the fallback);
* HTML: ``<h1>``-``<h6>`` become headings, scripts, styles and navigation are dropped;
* CSV/TSV: one ``column: value`` paragraph per row (header kept with every value);
* JSON/JSONL: top-level keys become headings, nested values ``a.b: value`` lines.

Each file is loaded on its own, so one unreadable file raises a :class:`DocumentLoadError`
naming it while the caller ingests the rest of the batch.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from llama_index.core.readers.base import BaseReader
from llama_index.core.schema import Document

from llama_index_memory_hierarchy.errors import MemoryHierarchyError

logger = logging.getLogger(__name__)

#: Most bytes read from one file (hostile-input bound; larger files are refused).
MAX_FILE_BYTES = 200 * 1024 * 1024


class DocumentLoadError(MemoryHierarchyError):
    """A file could not be loaded; ``path`` names it and the message says why."""

    def __init__(self, path: str | Path, message: str) -> None:
        self.path = str(path)
        self.reason = message
        super().__init__(f"{path}: {message}")


def _read_bytes(path: Path) -> bytes:
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise DocumentLoadError(path, f"file is {size} bytes, more than the {MAX_FILE_BYTES} byte limit")
    return path.read_bytes()


def decode_text(data: bytes, path: str | Path = "<text>") -> str:
    """Decode a text file: UTF-8 (BOM allowed), UTF-16 with BOM, else cp1252; binary is refused."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    if b"\x00" in data[:8192]:
        raise DocumentLoadError(path, "looks like a binary file (NUL bytes), not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        logger.warning("%s is not valid UTF-8; decoding it as cp1252", path)
        return data.decode("cp1252", errors="replace")


def _doc(text: str, extra_info: dict[str, Any] | None, **metadata: Any) -> Document:
    return Document(text=text, metadata={**(extra_info or {}), **metadata})


def _needs_docs_extra(path: str | Path, kind: str, exc: ImportError) -> DocumentLoadError:
    """The error for a PDF or DOCX file when the ``docs`` extra is not installed (names the missing package)."""
    return DocumentLoadError(
        path,
        f"reading {kind} files needs the 'docs' extra ({exc.name or exc} is missing): "
        "pip install 'llama-index-memory-hierarchy[docs]'",
    )


class TextFileReader(BaseReader):
    """Markdown or plain text, verbatim (headings stay for the chunker)."""

    def load_data(self, file: Path, extra_info: dict[str, Any] | None = None, **_: Any) -> list[Document]:
        return [_doc(decode_text(_read_bytes(Path(file)), file), extra_info)]


class HTMLToMarkdownReader(BaseReader):
    """HTML with headings kept as Markdown ``#`` lines; scripts, styles and navigation dropped."""

    def load_data(self, file: Path, extra_info: dict[str, Any] | None = None, **_: Any) -> list[Document]:
        return [_doc(html_to_markdown(decode_text(_read_bytes(Path(file)), file)), extra_info)]


def html_to_markdown(html: str) -> str:
    """Readable Markdown-ish text of an HTML page (headings, paragraphs, list items, table rows)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    if soup.head is not None:
        soup.head.decompose()
    for tag in soup(["script", "style", "noscript", "nav", "template", "svg", "title"]):
        tag.decompose()
    if title and soup.find("h1") is None:
        soup.insert(0, soup.new_string(f"# {title}\n\n"))
    blocks = {"p", "div", "section", "article", "main", "header", "footer", "aside", "blockquote", "pre", "ul", "ol"}
    for tag in soup.find_all(["h1", "h2", "h3", "h4", "h5", "h6"]):
        level = int(tag.name[1])
        tag.replace_with(soup.new_string(f"\n\n{'#' * level} {tag.get_text(' ', strip=True)}\n\n"))
    for tag in soup.find_all("li"):
        tag.insert_before(soup.new_string("\n- "))
    for tag in soup.find_all("tr"):
        cells = [c.get_text(" ", strip=True) for c in tag.find_all(["td", "th"])]
        tag.replace_with(soup.new_string("\n" + " | ".join(cells) + "\n"))
    for tag in soup.find_all("br"):
        tag.replace_with(soup.new_string("\n"))
    for tag in soup.find_all(blocks):
        tag.insert_before(soup.new_string("\n\n"))
        tag.insert_after(soup.new_string("\n\n"))
    text = soup.get_text()
    lines = [" ".join(line.split()) for line in text.splitlines()]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip() + "\n"


class DocxStructuredReader(BaseReader):
    """DOCX via python-docx with ``Heading N``/``Title`` styles as Markdown headings and tables as rows."""

    def load_data(self, file: Path, extra_info: dict[str, Any] | None = None, **_: Any) -> list[Document]:
        try:
            import docx  # python-docx
        except ImportError:  # fall back to LlamaIndex's reader (docx2txt, no headings)
            try:
                from llama_index.readers.file import DocxReader
            except ImportError as exc:
                raise _needs_docs_extra(file, "DOCX", exc) from exc
            return DocxReader().load_data(Path(file), extra_info=extra_info)
        document = docx.Document(str(file))
        parts: list[tuple[int, str]] = []  # (heading level or 0, text); -1 marks the document title
        for child in document.element.body.iterchildren():
            tag = child.tag.rsplit("}", 1)[-1]
            if tag == "p":
                paragraph = docx.text.paragraph.Paragraph(child, document)
                text = paragraph.text.strip()
                if text:
                    style = (paragraph.style.name if paragraph.style is not None else "") or ""
                    parts.append((_docx_heading_level(style), text))
            elif tag == "tbl":
                table = docx.table.Table(child, document)
                rows = [" | ".join(cell.text.strip() for cell in row.cells) for row in table.rows]
                parts.append((0, "\n".join(rows)))
        # A "Title" paragraph is the top heading; "Heading 1" then sits one level below it.
        shift = 1 if any(level == -1 for level, _ in parts) else 0
        lines = []
        for level, text in parts:
            if level == -1:
                lines.append(f"# {text}")
            elif level:
                lines.append(f"{'#' * min(6, level + shift)} {text}")
            else:
                lines.append(text)
        return [_doc("\n\n".join(lines) + "\n", extra_info)]


def _docx_heading_level(style: str) -> int:
    """-1 for the Title style, N for ``Heading N``, 0 for body text."""
    if style == "Title":
        return -1
    if style.startswith("Heading "):
        try:
            return max(1, min(6, int(style.split()[1])))
        except (IndexError, ValueError):
            return 0
    return 0


class CSVRowsReader(BaseReader):
    """CSV/TSV: one paragraph per row, ``column: value`` pairs, so every chunk keeps its headers."""

    def __init__(self, delimiter: str | None = None) -> None:
        self.delimiter = delimiter

    def load_data(self, file: Path, extra_info: dict[str, Any] | None = None, **_: Any) -> list[Document]:
        text = decode_text(_read_bytes(Path(file)), file)
        delimiter = self.delimiter
        if delimiter is None:
            try:
                delimiter = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|").delimiter
            except csv.Error:
                delimiter = ","
        rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
        rows = [r for r in rows if any(cell.strip() for cell in r)]
        if not rows:
            return [_doc("", extra_info)]
        header, body = rows[0], rows[1:]
        paragraphs = []
        for row in body:
            pairs = [
                f"{(header[i] if i < len(header) else f'column {i + 1}').strip()}: {v.strip()}"
                for i, v in enumerate(row)
                if v.strip()
            ]
            paragraphs.append("; ".join(pairs))
        if not body:  # a header-only file still says something
            paragraphs.append(", ".join(header))
        return [_doc("\n\n".join(paragraphs) + "\n", extra_info)]


class JSONReader(BaseReader):
    """JSON or JSON Lines as Markdown: top-level keys are headings, nested values ``a.b: value``."""

    def load_data(self, file: Path, extra_info: dict[str, Any] | None = None, **_: Any) -> list[Document]:
        path = Path(file)
        text = decode_text(_read_bytes(path), file)
        try:
            if path.suffix.lower() == ".jsonl":
                data: Any = [json.loads(line) for line in text.splitlines() if line.strip()]
            else:
                data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DocumentLoadError(file, f"invalid JSON: {exc}") from exc
        return [_doc(json_to_markdown(data), extra_info)]


def json_to_markdown(data: Any) -> str:
    """Readable text of a JSON value (see :class:`JSONReader`)."""
    if isinstance(data, dict):
        parts = []
        for key, value in data.items():
            if isinstance(value, (dict, list)):
                parts.append(f"## {key}\n\n{_json_block(value)}")
            else:
                parts.append(f"{key}: {_scalar(value)}")
        return "\n\n".join(parts) + "\n"
    return _json_block(data) + "\n"


def _json_block(value: Any) -> str:
    if isinstance(value, list):
        return "\n\n".join(_json_block(v) if isinstance(v, list) else "\n".join(_flatten(v)) for v in value)
    return "\n".join(_flatten(value))


def _flatten(value: Any, prefix: str = "") -> Iterable[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _flatten(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        for i, item in enumerate(value):
            yield from _flatten(item, f"{prefix}[{i}]")
    elif isinstance(value, list):
        yield f"{prefix}: {', '.join(_scalar(v) for v in value)}" if prefix else ", ".join(_scalar(v) for v in value)
    else:
        yield f"{prefix}: {_scalar(value)}" if prefix else _scalar(value)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class PDFTextReader(BaseReader):
    """LlamaIndex's ``PDFReader`` (pypdf, a document per page), refusing PDFs with no text layer."""

    def load_data(self, file: Path, extra_info: dict[str, Any] | None = None, **_: Any) -> list[Document]:
        try:
            import pypdf  # noqa: F401  (PDFReader imports it only when reading)
            from llama_index.readers.file import PDFReader
        except ImportError as exc:
            raise _needs_docs_extra(file, "PDF", exc) from exc

        _read_bytes(Path(file))  # size bound
        docs = PDFReader(return_full_document=False).load_data(Path(file), extra_info=extra_info)
        if not any(d.text.strip() for d in docs):
            raise DocumentLoadError(file, "the PDF has no extractable text (scanned? OCR is not supported)")
        return [d for d in docs if d.text.strip()]


def default_file_extractor() -> dict[str, BaseReader]:
    """Extension -> reader map used by :func:`load_file` (pass your own to add formats)."""
    text = TextFileReader()
    csv_reader = CSVRowsReader()
    json_reader = JSONReader()
    html = HTMLToMarkdownReader()
    return {
        ".md": text,
        ".markdown": text,
        ".mdx": text,
        ".txt": text,
        ".text": text,
        ".rst": text,
        ".log": text,
        ".pdf": PDFTextReader(),
        ".docx": DocxStructuredReader(),
        ".html": html,
        ".htm": html,
        ".xhtml": html,
        ".csv": csv_reader,
        ".tsv": CSVRowsReader(delimiter="\t"),
        ".json": json_reader,
        ".jsonl": json_reader,
    }


#: Extensions readable by default.
SUPPORTED_EXTENSIONS: tuple[str, ...] = tuple(sorted(default_file_extractor()))


def discover(
    paths_or_dir: str | Path | Sequence[str | Path], *, recursive: bool = True
) -> tuple[list[Path], list[DocumentLoadError]]:
    """Files named by ``paths_or_dir`` (folders expanded, hidden files skipped) and errors for missing paths."""
    if isinstance(paths_or_dir, (str, Path)):
        paths_or_dir = [paths_or_dir]
    files: list[Path] = []
    errors: list[DocumentLoadError] = []
    seen: set[Path] = set()
    for entry in paths_or_dir:
        path = Path(entry).expanduser()
        found: list[Path]
        try:
            path.stat()
        except FileNotFoundError:
            pass  # reported below, as missing
        except OSError as exc:  # a name too long for the file system, a loop of links, no permission
            errors.append(DocumentLoadError(path, exc.strerror or type(exc).__name__))
            continue
        if path.is_dir():
            found = sorted(
                p
                for p in (path.rglob("*") if recursive else path.glob("*"))
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        elif path.is_file():
            found = [path]
        else:
            errors.append(DocumentLoadError(path, "no such file or folder"))
            continue
        for file in found:
            resolved = file.resolve()
            if resolved not in seen:
                seen.add(resolved)
                files.append(resolved)
    return files, errors


class _NoReadersFileWarning(logging.Filter):
    """Drops LlamaIndex's warning that ``llama-index-readers-file`` is missing, logged on every file load.

    Every suffix read here has its reader in ``file_extractor``; a PDF or DOCX without the ``docs`` extra gets an
    error that names the extra instead.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "llama-index-readers-file` package not found" not in record.getMessage()


_QUIET = _NoReadersFileWarning()


def load_file(path: str | Path, file_extractor: dict[str, BaseReader] | None = None) -> list[Document]:
    """Documents of one file (several for a paged PDF), with LlamaIndex's file metadata.

    Raises :class:`DocumentLoadError` naming the file for an unsupported type, an unreadable
    or corrupt file, or one with no text.
    """
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.readers.file.base import default_file_metadata_func

    path = Path(path)
    extractor = file_extractor if file_extractor is not None else default_file_extractor()
    suffix = path.suffix.lower()
    if suffix not in extractor:
        supported = ", ".join(sorted(extractor))
        raise DocumentLoadError(path, f"unsupported file type {suffix or '(no extension)'!r}; supported: {supported}")
    quiet = logging.getLogger("llama_index.core.readers.file.base")
    quiet.addFilter(_QUIET)  # once: a logger keeps one copy of a filter
    try:
        docs = SimpleDirectoryReader.load_file(
            path, file_metadata=default_file_metadata_func, file_extractor=extractor, raise_on_error=True
        )
    except DocumentLoadError:
        raise
    except Exception as exc:  # readers raise anything; report the root cause
        cause: BaseException = exc
        while cause.__cause__ is not None and not isinstance(cause, DocumentLoadError):
            cause = cause.__cause__
        if isinstance(cause, DocumentLoadError):
            raise cause from None
        raise DocumentLoadError(path, f"cannot read {suffix} file: {type(cause).__name__}: {cause}") from exc
    if not any(d.text.strip() for d in docs):
        raise DocumentLoadError(path, "no text found in the file")
    return [d for d in docs if d.text.strip()]


__all__ = [
    "SUPPORTED_EXTENSIONS",
    "CSVRowsReader",
    "DocumentLoadError",
    "DocxStructuredReader",
    "HTMLToMarkdownReader",
    "JSONReader",
    "PDFTextReader",
    "TextFileReader",
    "decode_text",
    "default_file_extractor",
    "discover",
    "html_to_markdown",
    "json_to_markdown",
    "load_file",
]
