"""Shared data and helpers of the knowledge-base tests (imported by conftest and test modules)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

MARKDOWN = """# Aurora Station Handbook

Aurora Station is a research base on the Antarctic plateau.

## Power

The station runs on three wind turbines and a backup diesel generator.

### Battery maintenance

Inspect the lithium battery bank every 14 days and log the cell voltages in the blue binder.

## Water

Drinking water comes from melted snow, filtered twice through ceramic cartridges.

## Emergency procedures

In a whiteout, stay inside and radio the duty officer on channel 7.
"""

TEXT = """Kitchen rota.

The cook on duty bakes sourdough bread every Sunday morning.

Leftovers go into the walk-in freezer labelled with the date.
"""

HTML = """<html><head><title>Field notes</title><script>var tracking = 1;</script></head>
<body><nav>Home | About</nav>
<h1>Penguin survey</h1>
<p>The emperor penguin colony is counted each October by drone.</p>
<h2>Survey equipment</h2>
<p>The survey drone carries a thermal camera with a 640 pixel sensor.</p>
</body></html>
"""

CSV = "instrument,location,calibration\nanemometer,mast A,every March\nseismometer,vault 2,every September\n"

JSON_DOC = {
    "station": "Aurora",
    "vehicles": [
        {"name": "Sno-Cat 1", "fuel": "diesel", "range_km": 350},
        {"name": "Skidoo 4", "fuel": "petrol", "range_km": 120},
    ],
    "contacts": {"doctor": "Dr. Ingrid Solberg", "radio_channel": 7},
}

PDF_PAGES = [
    "Glaciology report. The ice core drill reached a depth of 812 metres in January.",
    "Appendix. Ice core samples are stored at minus 30 degrees in the cold lab.",
]


def write_pdf(path: Path, pages: list[str]) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    pdf.output(str(path))


def write_docx(path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Medical Guide", 0)
    document.add_heading("Frostbite", 1)
    document.add_paragraph("Rewarm frostbitten fingers in water at 38 degrees, never by rubbing.")
    document.add_heading("Altitude sickness", 1)
    document.add_paragraph("Acetazolamide is kept in the red cabinet of the clinic.")
    document.save(str(path))


def write_doc_set(folder: Path) -> Path:
    """One document of each supported kind, one unsupported and one corrupt file, in ``folder``."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "handbook.md").write_text(MARKDOWN, encoding="utf-8")
    (folder / "kitchen.txt").write_text(TEXT, encoding="utf-8")
    (folder / "survey.html").write_text(HTML, encoding="utf-8")
    (folder / "instruments.csv").write_text(CSV, encoding="utf-8")
    (folder / "station.json").write_text(json.dumps(JSON_DOC), encoding="utf-8")
    write_pdf(folder / "glaciology.pdf", PDF_PAGES)
    write_docx(folder / "medical.docx")
    (folder / "diagram.xyz").write_bytes(b"\x89XYZ not a document")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this file was truncated")
    return folder


SUPPORTED_FILES = (
    "handbook.md",
    "kitchen.txt",
    "survey.html",
    "instruments.csv",
    "station.json",
    "glaciology.pdf",
    "medical.docx",
)


class CountingEmbedding(BaseEmbedding):
    """The real embedding model, counting and recording every text and query it embeds."""

    model_name: str = "counting-minilm"
    _inner: Any = PrivateAttr()
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _texts: list[str] = PrivateAttr(default_factory=list)
    _queries: list[str] = PrivateAttr(default_factory=list)

    def __init__(self, inner: BaseEmbedding, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inner = inner

    @classmethod
    def class_name(cls) -> str:
        return "CountingEmbedding"

    @property
    def texts(self) -> list[str]:
        with self._lock:
            return list(self._texts)

    @property
    def documents(self) -> list[str]:
        """Texts embedded as documents, without the service's one-off dimension probe."""
        return [t for t in self.texts if t != "dimension probe"]

    @property
    def queries(self) -> list[str]:
        with self._lock:
            return list(self._queries)

    def reset(self) -> None:
        with self._lock:
            self._texts.clear()
            self._queries.clear()

    def _get_query_embedding(self, query: str) -> list[float]:
        with self._lock:
            self._queries.append(query)
        return self._inner.get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self._texts.extend(texts)
        return self._inner.get_text_embedding_batch(texts)


_MODEL: BaseEmbedding | None = None


def real_model() -> BaseEmbedding:
    """The bundled all-MiniLM-L6-v2, loaded once per test process."""
    global _MODEL
    if _MODEL is None:
        from llama_index_memory_hierarchy.embeddings import load_default_model

        _MODEL = load_default_model()
    return _MODEL
