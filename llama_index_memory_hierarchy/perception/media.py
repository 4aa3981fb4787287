"""Modality detection, real media metadata and perceptual hashes.

Why here and not in the tier: reading a file is blocking, library-specific work that must
turn every malformed input into a :class:`MemoryValidationError` naming the file, never a
crash. The tier calls :func:`inspect_media` off the event loop and stores the result.

Readers: images with Pillow, audio with ``soundfile`` (libsndfile), video with PyAV (both the
``media`` extra). Without PyAV, MP4/MOV/M4V/3GP metadata is read by a small pure-Python
ISO-BMFF box parser (:func:`read_isobmff_metadata`); other video containers then keep only
their size and format.
"""

from __future__ import annotations

import codecs
import io
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from enum import Enum
from pathlib import Path
from typing import Any

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.perception.isobmff import parse_isobmff

logger = logging.getLogger(__name__)

#: Bytes of a file's head used for magic-byte detection.
HEAD_BYTES = 64
#: Largest image (in pixels) decoded for a perceptual hash; larger ones are refused as likely bombs.
MAX_IMAGE_PIXELS = 64_000_000
#: Bits of a perceptual hash (:func:`image_phash`, ``imagehash.phash`` with ``hash_size=8``).
PHASH_BITS = 64


class Modality(str, Enum):
    """The kinds of perception the perceptual tier stores (``str()`` is the value, as a 3.11 ``StrEnum``'s)."""

    TEXT = "text"
    IMAGE = "image"
    AUDIO = "audio"
    VIDEO = "video"

    def __str__(self) -> str:
        return self.value


def as_modality(value: Modality | str | None, field_name: str = "modality") -> Modality | None:
    """Coerce ``'image'``/``Modality.IMAGE``; None stays None; anything else is a validation error."""
    if value is None or isinstance(value, Modality):
        return value
    if isinstance(value, str):
        try:
            return Modality(value.strip().lower())
        except ValueError:
            pass
    allowed = ", ".join(m.value for m in Modality)
    raise MemoryValidationError(field_name, f"unknown modality {value!r}; choose one of {allowed}")


# ----------------------------------------------------------------------------- detection
#: Extension -> modality (lower-case, without the dot).
EXTENSION_MODALITY: dict[str, Modality] = {
    **dict.fromkeys(
        ("png", "jpg", "jpeg", "jpe", "gif", "bmp", "tif", "tiff", "webp", "ico", "heic", "heif", "avif"),
        Modality.IMAGE,
    ),
    **dict.fromkeys(
        ("wav", "wave", "flac", "ogg", "oga", "opus", "mp3", "m4a", "aac", "aif", "aiff", "aifc", "wma", "amr", "au"),
        Modality.AUDIO,
    ),
    **dict.fromkeys(
        ("mp4", "m4v", "mov", "qt", "avi", "mkv", "webm", "flv", "wmv", "mpg", "mpeg", "ts", "3gp", "3g2", "ogv"),
        Modality.VIDEO,
    ),
    **dict.fromkeys(
        ("txt", "text", "md", "markdown", "rst", "json", "jsonl", "csv", "tsv", "log", "yaml", "yml", "xml", "html"),
        Modality.TEXT,
    ),
}

_MIME: dict[str, str] = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "gif": "image/gif",
    "bmp": "image/bmp",
    "tiff": "image/tiff",
    "webp": "image/webp",
    "ico": "image/x-icon",
    "heic": "image/heic",
    "avif": "image/avif",
    "wav": "audio/wav",
    "flac": "audio/flac",
    "ogg": "audio/ogg",
    "mp3": "audio/mpeg",
    "m4a": "audio/mp4",
    "aac": "audio/aac",
    "aiff": "audio/aiff",
    "amr": "audio/amr",
    "mp4": "video/mp4",
    "mov": "video/quicktime",
    "avi": "video/x-msvideo",
    "webm": "video/webm",
    "mkv": "video/x-matroska",
    "flv": "video/x-flv",
    "wmv": "video/x-ms-wmv",
    "mpg": "video/mpeg",
    "3gp": "video/3gpp",
    "ogv": "video/ogg",
    "txt": "text/plain",
    "md": "text/markdown",
    "json": "application/json",
    "csv": "text/csv",
    "html": "text/html",
    "xml": "application/xml",
}

_EXT_ALIASES = {"jpeg": "jpg", "jpe": "jpg", "tif": "tiff", "wave": "wav", "aif": "aiff", "aifc": "aiff", "qt": "mov"}
_EXT_PATTERN = re.compile(r"^[a-z0-9]{1,8}$")
_VIDEO_BRANDS = ("isom", "iso2", "iso4", "iso5", "iso6", "mp41", "mp42", "avc1", "qt  ", "m4v ", "mp4v", "3gp", "3g2")
_AUDIO_BRANDS = ("m4a ", "m4b ", "m4p ", "f4a ")
_IMAGE_BRANDS = ("heic", "heix", "hevc", "mif1", "msf1", "avif", "avis")


def normalise_extension(name_or_ext: str | None) -> str | None:
    """``'Photo.JPEG'`` or ``'.jpeg'`` -> ``'jpg'``; None when there is no safe extension."""
    if not name_or_ext:
        return None
    ext = name_or_ext.rsplit(".", 1)[-1].lower() if "." in name_or_ext else name_or_ext.lower()
    ext = _EXT_ALIASES.get(ext, ext)
    return ext if _EXT_PATTERN.fullmatch(ext) else None


def sniff(head: bytes) -> tuple[Modality, str] | None:
    """Modality and canonical extension from a file's first bytes, or None when unrecognised."""
    h = head
    if h.startswith(b"\x89PNG\r\n\x1a\n"):
        return Modality.IMAGE, "png"
    if h.startswith(b"\xff\xd8\xff"):
        return Modality.IMAGE, "jpg"
    if h[:6] in (b"GIF87a", b"GIF89a"):
        return Modality.IMAGE, "gif"
    if h[:4] in (b"II*\x00", b"MM\x00*"):
        return Modality.IMAGE, "tiff"
    if h.startswith(b"RIFF") and len(h) >= 12:
        kind = h[8:12]
        if kind == b"WEBP":
            return Modality.IMAGE, "webp"
        if kind == b"WAVE":
            return Modality.AUDIO, "wav"
        if kind == b"AVI ":
            return Modality.VIDEO, "avi"
    if h.startswith(b"RF64") and h[8:12] == b"WAVE":
        return Modality.AUDIO, "wav"
    if len(h) >= 12 and h[4:8] == b"ftyp":
        brand = h[8:12].decode("latin-1").lower()
        if brand.startswith(_IMAGE_BRANDS):
            return Modality.IMAGE, "avif" if brand.startswith("avi") else "heic"
        if brand.startswith(_AUDIO_BRANDS):
            return Modality.AUDIO, "m4a"
        if brand.startswith("qt"):
            return Modality.VIDEO, "mov"
        if brand.startswith(("3gp", "3g2")):
            return Modality.VIDEO, "3gp"
        return Modality.VIDEO, "mp4"
    if h.startswith(b"fLaC"):
        return Modality.AUDIO, "flac"
    if h.startswith(b"OggS"):
        return (Modality.VIDEO, "ogv") if b"\x80theora" in h else (Modality.AUDIO, "ogg")
    if h.startswith(b"FORM") and h[8:12] in (b"AIFF", b"AIFC"):
        return Modality.AUDIO, "aiff"
    if h.startswith(b"#!AMR"):
        return Modality.AUDIO, "amr"
    if h.startswith(b"ID3"):
        return Modality.AUDIO, "mp3"
    if len(h) >= 2 and h[0] == 0xFF and (h[1] & 0xE0) == 0xE0:
        # MPEG audio frame sync (11 bits set); layer bits 00 mean an ADTS AAC stream.
        return (Modality.AUDIO, "aac") if (h[1] >> 1) & 0x3 == 0 else (Modality.AUDIO, "mp3")
    if h.startswith(b".snd"):
        return Modality.AUDIO, "au"
    if h.startswith(b"\x1a\x45\xdf\xa3"):
        return Modality.VIDEO, "webm" if b"webm" in h else "mkv"
    if h.startswith(b"FLV\x01"):
        return Modality.VIDEO, "flv"
    if h.startswith(b"0&\xb2u\x8ef\xcf\x11"):
        return Modality.VIDEO, "wmv"
    if h.startswith((b"\x00\x00\x01\xba", b"\x00\x00\x01\xb3")):
        return Modality.VIDEO, "mpg"
    if h.startswith(b"BM") and len(h) >= 14:
        return Modality.IMAGE, "bmp"
    return None


def looks_like_text(head: bytes) -> bool:
    """True when the head decodes as UTF-8 (a character cut at the end is fine) with no NUL."""
    if b"\x00" in head:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def detect_modality(
    head: bytes, filename: str | None = None, override: Modality | str | None = None
) -> tuple[Modality, str]:
    """Modality and storage extension of a file.

    Order: an explicit ``override`` wins; then magic bytes; then the file extension; then
    UTF-8 text. When magic bytes and extension disagree the content wins (an extension
    is only a claim). Raises :class:`MemoryValidationError` when nothing matches.
    """
    forced = as_modality(override)
    sniffed = sniff(head)
    ext = normalise_extension(filename)
    if forced is not None:
        if sniffed and sniffed[0] is forced:
            return forced, sniffed[1]
        if sniffed:
            logger.warning("modality %s forced for %s that looks like %s", forced.value, filename, sniffed[0].value)
        if ext and EXTENSION_MODALITY.get(ext) is forced:
            return forced, ext
        return forced, {Modality.TEXT: "txt"}.get(forced, ext or "bin")
    if sniffed:
        if ext and EXTENSION_MODALITY.get(ext) not in (None, sniffed[0]):
            logger.info("%s: content is %s, extension says %s; using the content", filename, sniffed[0].value, ext)
        return sniffed
    if ext and ext in EXTENSION_MODALITY and EXTENSION_MODALITY[ext] is not Modality.TEXT:
        return EXTENSION_MODALITY[ext], ext
    if head and looks_like_text(head):
        return Modality.TEXT, ext if ext and EXTENSION_MODALITY.get(ext) is Modality.TEXT else "txt"
    raise MemoryValidationError(
        "modality",
        f"cannot tell the modality of {filename or 'the data'} from its content or extension; "
        "pass modality='text'|'image'|'audio'|'video'",
    )


def mime_type(ext: str | None, modality: Modality) -> str:
    """Best-effort MIME type for a storage extension."""
    if ext and ext in _MIME:
        return _MIME[ext]
    return {Modality.TEXT: "text/plain"}.get(modality, f"{modality.value}/octet-stream")


# ----------------------------------------------------------------------------- metadata
@dataclass
class MediaInfo:
    """What reading a media file found: JSON-safe ``metadata``, a perceptual hash, a capture time, text."""

    modality: Modality
    ext: str
    mime_type: str
    metadata: dict[str, Any] = field(default_factory=dict)
    phash: str | None = None  # 16 hex digits (64 bits)
    captured_at: datetime | None = None  # from EXIF when present
    text: str | None = None  # decoded content of a text perception


def _malformed(name: str, kind: str, exc: BaseException) -> MemoryValidationError:
    reason = str(exc).strip() or type(exc).__name__
    return MemoryValidationError("data_or_path", f"cannot read {kind} file {name!r}: {reason[:300]}")


def _exif_time(image: Any) -> datetime | None:
    """Capture time from EXIF ``DateTimeOriginal`` (or ``DateTime``), with its offset when given."""
    try:
        exif = image.getexif()
    except Exception:  # broken EXIF must not fail an otherwise valid image
        return None
    if not exif:
        return None
    try:
        sub = exif.get_ifd(0x8769)
    except Exception:
        sub = {}
    raw = sub.get(36867) or sub.get(36868) or exif.get(306)
    offset = sub.get(36881) or sub.get(36880)
    if not isinstance(raw, str):
        return None
    try:
        when = datetime.strptime(raw.strip().rstrip("\x00"), "%Y:%m:%d %H:%M:%S")
    except ValueError:
        return None
    tz = timezone.utc
    if isinstance(offset, str):
        match = re.match(r"^([+-])(\d{2}):(\d{2})", offset.strip())
        if match:
            delta = timedelta(hours=int(match.group(2)), minutes=int(match.group(3)))
            tz = timezone(delta if match.group(1) == "+" else -delta)
    return when.replace(tzinfo=tz).astimezone(timezone.utc)


def _dct_matrix(size: int) -> Any:
    """The unnormalised DCT-II as a matrix (``scipy.fftpack.dct``'s default: ``2 * sum x[n] cos(...)``)."""
    import numpy as np

    k, n = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    return 2.0 * np.cos(np.pi * k * (2 * n + 1) / (2 * size))


def image_phash(image: Any) -> str:
    """64-bit DCT perceptual hash as 16 hex digits.

    ``imagehash.phash(image, hash_size=8)``'s algorithm, computed with numpy so the core install needs no SciPy:
    the 32x32 grey thumbnail's 2-D DCT, its 8x8 lowest frequencies against their median, bits in row order.
    """
    import numpy as np
    from PIL import Image

    side = 8 * 4
    pixels = np.asarray(image.convert("L").resize((side, side), Image.Resampling.LANCZOS), dtype=np.float64)
    dct = _dct_matrix(side)
    low = np.round((dct @ pixels @ dct.T)[:8, :8], 6)  # rounding noise of a flat image is 0, as in SciPy's FFT
    bits = (low > np.median(low)).flatten()
    return f"{int(''.join('1' if b else '0' for b in bits), 2):016x}"


def hamming_distance(a: str, b: str) -> int:
    """Bits that differ between two hex perceptual hashes of equal length."""
    if len(a) != len(b):
        raise MemoryValidationError("phash", f"hashes of different lengths: {len(a)} and {len(b)} hex digits")
    return (int(a, 16) ^ int(b, 16)).bit_count()


def phash_to_vector(phash: str) -> list[float]:
    """A hash as a ±1 vector: cosine similarity of two is ``1 - 2 * hamming / bits``.

    That makes Hamming near-duplicate search an ordinary nearest-neighbour search in a
    vector space of its own (``phash:64``), scoped and scaled by the vector index.
    """
    bits = len(phash) * 4
    value = int(phash, 16)
    return [1.0 if (value >> (bits - 1 - i)) & 1 else -1.0 for i in range(bits)]


def similarity_to_hamming(similarity: float, bits: int = PHASH_BITS) -> int:
    """Inverse of the cosine relation in :func:`phash_to_vector`."""
    return max(0, round((1.0 - similarity) * bits / 2))


def read_image_metadata(path: Path, name: str) -> MediaInfo:
    """Size, mode, format, frame count, EXIF time and phash of an image (fully decoded once)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            fmt = (image.format or "").upper()
            width, height = image.size
            if width * height > MAX_IMAGE_PIXELS:
                raise MemoryValidationError(
                    "data_or_path", f"image {name!r} is {width}x{height} pixels, more than {MAX_IMAGE_PIXELS}"
                )
            frames = int(getattr(image, "n_frames", 1) or 1)
            captured = _exif_time(image)
            image.load()  # decode now: a truncated or corrupt file fails here, not later
            info = MediaInfo(
                modality=Modality.IMAGE,
                ext=normalise_extension(fmt.lower()) or "bin",
                mime_type=Image.MIME.get(fmt, "image/octet-stream"),
                metadata={"format": fmt, "width": width, "height": height, "mode": image.mode, "frames": frames},
                captured_at=captured,
            )
            info.phash = image_phash(image)
    except MemoryValidationError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise _malformed(name, "image", exc) from exc
    except Exception as exc:  # decoders raise odd types on hostile input
        raise _malformed(name, "image", exc) from exc
    if captured is not None:
        info.metadata["exif_time"] = captured.isoformat()
    return info


def read_audio_metadata(path: Path, name: str, ext: str) -> MediaInfo:
    """Duration, sample rate, channels and frames of an audio file (libsndfile, else PyAV; the ``media`` extra).

    With neither installed (the core install) only its size and format are kept, as for a video without PyAV.
    """
    try:
        import soundfile as sf
    except ImportError:
        try:
            import av
        except ImportError:
            logger.info("soundfile not installed: keeping only size and format of %s (pip install '...[media]')", name)
            return MediaInfo(Modality.AUDIO, ext, mime_type(ext, Modality.AUDIO), {"reader": "none"})
        return _read_av(path, name, Modality.AUDIO, ext)
    try:
        with sf.SoundFile(str(path)) as snd:
            frames, rate, channels = int(snd.frames), int(snd.samplerate), int(snd.channels)
            snd.read(min(frames, 4096), dtype="float32")  # decode a first block: header-only files fail here
            meta = {
                "format": snd.format,
                "subtype": snd.subtype,
                "duration_s": round(frames / rate, 6) if rate else 0.0,
                "sample_rate": rate,
                "channels": channels,
                "frames": frames,
                "reader": "soundfile",
            }
        return MediaInfo(Modality.AUDIO, ext, mime_type(ext, Modality.AUDIO), meta)
    except Exception as sf_exc:  # libsndfile errors are RuntimeError/LibsndfileError/others
        try:
            import av  # noqa: F401
        except ImportError:
            raise _malformed(name, "audio", sf_exc) from sf_exc
        logger.debug("soundfile could not read %s (%s); trying PyAV", name, sf_exc)
        info = _read_av(path, name, Modality.AUDIO, ext)
        return info


def read_text_metadata(path: Path, name: str, ext: str) -> MediaInfo:
    """Decoded UTF-8 text with its character and line counts."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemoryValidationError("data_or_path", f"text file {name!r} is not UTF-8: {exc.reason}") from exc
    if "\x00" in text:
        raise MemoryValidationError("data_or_path", f"text file {name!r} contains NUL characters")
    meta = {"chars": len(text), "lines": text.count("\n") + (1 if text and not text.endswith("\n") else 0)}
    return MediaInfo(Modality.TEXT, ext, mime_type(ext, Modality.TEXT), {**meta, "encoding": "utf-8"}, text=text)


def _read_av(path: Path, name: str, modality: Modality, ext: str) -> MediaInfo:
    """Container metadata (and a first-frame phash for video) with PyAV (FFmpeg)."""
    import av

    kind = modality.value
    try:
        with av.open(str(path), mode="r") as container:
            meta: dict[str, Any] = {"container": container.format.name, "reader": "av"}
            if container.duration is not None:
                meta["duration_s"] = round(container.duration / av.time_base, 6)
            phash = None
            videos = list(container.streams.video)
            audios = list(container.streams.audio)
            if modality is Modality.VIDEO and not videos:
                raise MemoryValidationError("data_or_path", f"video file {name!r} has no video stream")
            if modality is Modality.AUDIO and not audios:
                raise MemoryValidationError("data_or_path", f"audio file {name!r} has no audio stream")
            if videos:
                stream = videos[0]
                rate = stream.average_rate or stream.guessed_rate
                meta.update(
                    width=stream.codec_context.width,
                    height=stream.codec_context.height,
                    codec=stream.codec_context.name,
                    fps=round(float(rate), 6) if rate else None,
                )
                if "duration_s" not in meta and stream.duration is not None and stream.time_base:
                    meta["duration_s"] = round(float(stream.duration * stream.time_base), 6)
                frames = int(stream.frames or 0)
                if not frames and rate and meta.get("duration_s"):
                    frames = round(float(rate) * meta["duration_s"])
                meta["frames"] = frames
                if modality is Modality.VIDEO:
                    phash = _video_phash(container, stream, meta.get("duration_s"))
                    meta["phash_source"] = "middle_keyframe"
            if audios:
                audio = audios[0].codec_context
                meta.update(has_audio=True, audio_sample_rate=audio.sample_rate, audio_channels=audio.channels)
                if modality is Modality.AUDIO:
                    meta.update(sample_rate=audio.sample_rate, channels=audio.channels, codec=audio.name)
                    duration = meta.get("duration_s")
                    meta["frames"] = round(duration * audio.sample_rate) if duration and audio.sample_rate else 0
            else:
                meta["has_audio"] = False
    except MemoryValidationError:
        raise
    except Exception as exc:  # FFmpeg errors (InvalidDataError, ...) must not escape raw
        raise _malformed(name, kind, exc) from exc
    return MediaInfo(modality, ext, mime_type(ext, modality), meta, phash=phash)


def _middle_keyframe(container: Any, stream: Any, duration_s: float | None) -> Any:
    """The keyframe nearest before the middle as a PIL image (first frames are often black fades)."""
    import av

    if duration_s:
        try:
            container.seek(int(duration_s / 2 * av.time_base), backward=True, any_frame=False)
        except Exception:  # unseekable stream: decode from where we are (the start)
            logger.debug("cannot seek in video; using its first frame")
    for frame in container.decode(stream):
        return frame.to_image()
    return None


def _video_phash(container: Any, stream: Any, duration_s: float | None) -> str | None:
    """phash of the middle keyframe."""
    image = _middle_keyframe(container, stream, duration_s)
    return None if image is None else image_phash(image)


def video_keyframe(path: Path) -> Any:
    """The middle keyframe of a video as a PIL image; None without PyAV or frames."""
    try:
        import av
    except ImportError:
        return None
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                return None
            duration = container.duration / av.time_base if container.duration else None
            return _middle_keyframe(container, container.streams.video[0], duration)
    except Exception as exc:
        raise _malformed(Path(path).name, "video", exc) from exc


def video_keyframe_png(path: Path) -> io.BytesIO | None:
    """The middle keyframe encoded as PNG (for image encoders and multi-modal LLMs)."""
    image = video_keyframe(path)
    if image is None:
        return None
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    buffer.seek(0)
    return buffer


def read_video_metadata(path: Path, name: str, ext: str) -> MediaInfo:
    """Duration, size, fps, frames, codec of a video: PyAV when installed, else ISO-BMFF parsing."""
    try:
        import av  # noqa: F401
    except ImportError:
        meta = read_isobmff_metadata(path, name) if ext in ("mp4", "mov", "m4v", "3gp") else None
        if meta is None:
            logger.info("PyAV not installed: keeping only size and format of %s (pip install '...[media]')", name)
            meta = {"reader": "none"}
        return MediaInfo(Modality.VIDEO, ext, mime_type(ext, Modality.VIDEO), meta)
    return _read_av(path, name, Modality.VIDEO, ext)


def inspect_media(path: Path, modality: Modality, ext: str, name: str) -> MediaInfo:
    """Read the metadata of ``path`` as ``modality``; malformed files raise :class:`MemoryValidationError`."""
    path = Path(path)
    if modality is Modality.IMAGE:
        info = read_image_metadata(path, name)
        info.ext = ext if ext in ("png", "jpg", "gif", "bmp", "tiff", "webp", "ico", "heic", "avif") else info.ext
    elif modality is Modality.AUDIO:
        info = read_audio_metadata(path, name, ext)
    elif modality is Modality.VIDEO:
        info = read_video_metadata(path, name, ext)
    else:
        info = read_text_metadata(path, name, ext)
    info.metadata["bytes"] = path.stat().st_size
    info.metadata["mime_type"] = info.mime_type
    return info


def read_isobmff_metadata(path: Path, name: str) -> dict[str, Any]:
    """MP4/MOV metadata by the pure-Python box reader; a malformed file is an error naming it."""
    try:
        return parse_isobmff(path)
    except (OSError, ValueError) as exc:
        raise _malformed(name, "video", exc) from exc
