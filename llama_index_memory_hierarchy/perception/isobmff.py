"""A small pure-Python ISO-BMFF (MP4, MOV, M4V, 3GP) box reader: video metadata without PyAV."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any, BinaryIO


def _boxes(f: BinaryIO, start: int, end: int) -> Iterator[tuple[str, int, int]]:
    """Yield ``(type, payload_start, box_end)`` of the boxes between ``start`` and ``end``."""
    pos = start
    while pos + 8 <= end:
        f.seek(pos)
        header = f.read(8)
        if len(header) < 8:
            return
        size = int.from_bytes(header[:4], "big")
        kind = header[4:8].decode("latin-1")
        payload = pos + 8
        if size == 1:
            large = f.read(8)
            if len(large) < 8:
                return
            size = int.from_bytes(large, "big")
            payload = pos + 16
        elif size == 0:
            size = end - pos
        if size < payload - pos or pos + size > end:
            raise ValueError(f"box {kind!r} at {pos} has a bad size {size}")
        yield kind, payload, pos + size
        pos += size


def _child(f: BinaryIO, start: int, end: int, kind: str) -> tuple[int, int] | None:
    for k, s, e in _boxes(f, start, end):
        if k == kind:
            return s, e
    return None


def _read_at(f: BinaryIO, pos: int, n: int) -> bytes:
    f.seek(pos)
    data = f.read(n)
    if len(data) < n:
        raise ValueError("box truncated")
    return data


def _full_box_times(f: BinaryIO, start: int) -> tuple[int, int]:
    """(timescale, duration) of an ``mvhd``/``mdhd`` full box (versions 0 and 1)."""
    version = _read_at(f, start, 1)[0]
    if version == 1:
        data = _read_at(f, start + 4 + 16, 12)
        return int.from_bytes(data[:4], "big"), int.from_bytes(data[4:12], "big")
    data = _read_at(f, start + 4 + 8, 8)
    return int.from_bytes(data[:4], "big"), int.from_bytes(data[4:8], "big")


def parse_isobmff(path: Path) -> dict[str, Any]:
    """Pure-Python MP4/MOV metadata: duration, width, height, frames, fps, codec, has_audio.

    Reads only box headers and the few small boxes needed (``mvhd``, ``tkhd``, ``mdhd``,
    ``hdlr``, ``stsd``, ``stsz``), seeking over media data, so large files cost nothing.
    A malformed file raises ``ValueError`` (an unreadable one ``OSError``).
    """
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        moov = _child(f, 0, size, "moov")
        if moov is None:
            raise ValueError("no 'moov' box")
        meta: dict[str, Any] = {"container": "iso-bmff", "reader": "iso-bmff (pure Python)", "has_audio": False}
        mvhd = _child(f, *moov, "mvhd")
        if mvhd:
            scale, duration = _full_box_times(f, mvhd[0])
            if scale:
                meta["duration_s"] = round(duration / scale, 6)
        for kind, s, e in _boxes(f, *moov):
            if kind != "trak":
                continue
            mdia = _child(f, s, e, "mdia")
            if mdia is None:
                continue
            hdlr = _child(f, *mdia, "hdlr")
            handler = _read_at(f, hdlr[0] + 8, 4).decode("latin-1") if hdlr else ""
            if handler == "soun":
                meta["has_audio"] = True
                continue
            if handler != "vide" or "width" in meta:
                continue
            tkhd = _child(f, s, e, "tkhd")
            if tkhd:
                version = _read_at(f, tkhd[0], 1)[0]
                dims = _read_at(f, tkhd[0] + (88 if version == 1 else 76), 8)
                meta["width"] = int.from_bytes(dims[:4], "big") >> 16
                meta["height"] = int.from_bytes(dims[4:], "big") >> 16
            mdhd = _child(f, *mdia, "mdhd")
            track_seconds = None
            if mdhd:
                scale, duration = _full_box_times(f, mdhd[0])
                track_seconds = duration / scale if scale else None
            minf = _child(f, *mdia, "minf")
            stbl = _child(f, *minf, "stbl") if minf else None
            if stbl:
                stsd = _child(f, *stbl, "stsd")
                if stsd:
                    meta["codec"] = _read_at(f, stsd[0] + 12, 4).decode("latin-1").strip()
                stsz = _child(f, *stbl, "stsz")
                if stsz:
                    meta["frames"] = int.from_bytes(_read_at(f, stsz[0] + 8, 4), "big")
            if meta.get("frames") and track_seconds:
                meta["fps"] = round(float(Fraction(meta["frames"]) / Fraction(track_seconds)), 6)
        return meta


__all__ = ["parse_isobmff"]
