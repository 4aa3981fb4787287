"""Encoders that put perceptions into vector spaces, one space per encoder.

* :class:`ImageTextEncoder` adapts any LlamaIndex ``MultiModalEmbedding`` (CLIP, SigLIP...):
  images (and video keyframes) and text land in one space, id ``<model>-<dim>``, so a text
  query finds images and an image finds similar images. Signal name ``clip``.
* :class:`AudioEncoder` is the protocol for audio models (CLAP-like: audio, and text when
  cross-modal); :class:`AudioEncoderAdapter` gives one a space and validation. The offline
  default :class:`SpectralAudioEncoder` embeds log-mel spectrum statistics: real signal
  processing that finds the same recording re-encoded or re-sampled, not meaning.
* :class:`PHashEncoder`: a 64-bit perceptual hash as a ±1 vector (space ``phash-64``),
  where cosine similarity is a monotone function of Hamming distance.
* The caption/transcript text of every perception is embedded by the shared text
  ``EmbeddingService`` (signal ``caption_text``); :func:`acaption_with_llm` writes that
  caption with a multi-modal LLM when one is configured.

Every vector is float32, L2-normalised and checked against its space's dimension: two
encoders never share a space, and a model whose dimension changes is refused.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from llama_index_memory_hierarchy.errors import EmbeddingDimensionError, MemoryValidationError
from llama_index_memory_hierarchy.perception.media import PHASH_BITS, Modality, phash_to_vector

logger = logging.getLogger(__name__)

SIGNAL_CAPTION = "caption_text"
SIGNAL_PHASH = "phash"
SIGNAL_CLIP = "clip"
SIGNAL_AUDIO = "audio"

#: Seconds of audio an audio encoder reads (from the start) by default.
DEFAULT_AUDIO_SECONDS = 60.0


def _normalise(raw: Any, dim: int | None, what: str) -> np.ndarray:
    """float32 unit vector; raises on NaN, zero or a dimension other than ``dim``."""
    vector = np.asarray(raw, dtype=np.float32).reshape(-1)
    if dim is not None and vector.shape[0] != dim:
        raise EmbeddingDimensionError(f"{what}: got a {vector.shape[0]}-d vector, the space holds {dim}-d vectors")
    if not np.isfinite(vector).all():
        raise MemoryValidationError("embedding", f"{what} contains NaN or infinite values")
    norm = float(np.linalg.norm(vector))
    if norm <= 1e-12:
        raise MemoryValidationError("embedding", f"{what} is an all-zero vector")
    return vector / norm


class PerceptionEncoder(ABC):
    """Embeds perceptions of some modalities (and optionally text queries) into one vector space."""

    #: Name recorded as ``match_signal`` when this encoder's space produced a match.
    signal: str
    #: Modalities whose files this encoder embeds.
    modalities: frozenset[Modality]
    #: Whether :meth:`aembed_text` works (cross-modal text queries).
    supports_text: bool = False

    @property
    @abstractmethod
    def space(self) -> str:
        """Vector space id (``<model label>-<dim>``); valid after :meth:`aprobe`."""

    @property
    @abstractmethod
    def dim(self) -> int | None:
        """Vector dimension, None until known."""

    async def aprobe(self) -> None:
        """Learn the dimension (may load the model); idempotent."""
        return None

    @abstractmethod
    async def aembed_file(self, path: Path, modality: Modality) -> np.ndarray:
        """Unit vector of the file at ``path`` (a perception of ``modality``)."""

    async def aembed_text(self, text: str) -> np.ndarray:
        """Unit vector of a text query in this space."""
        raise MemoryValidationError("query_modality", f"encoder {self.signal!r} cannot embed text")

    def handles(self, modality: Modality) -> bool:
        """Whether files of ``modality`` get a vector from this encoder."""
        return modality in self.modalities


# ----------------------------------------------------------------------------- phash
class PHashEncoder(PerceptionEncoder):
    """Perceptual hashes as ±1 vectors: nearest neighbours are the smallest Hamming distances."""

    signal = SIGNAL_PHASH
    modalities = frozenset({Modality.IMAGE, Modality.VIDEO})

    @property
    def space(self) -> str:
        return f"phash-{PHASH_BITS}"

    @property
    def dim(self) -> int:
        return PHASH_BITS

    def vector(self, phash: str) -> np.ndarray:
        """Unit vector of a hex hash."""
        return _normalise(phash_to_vector(phash), PHASH_BITS, "phash")

    async def aembed_file(self, path: Path, modality: Modality) -> np.ndarray:
        from llama_index_memory_hierarchy.perception.media import inspect_media

        info = await asyncio.to_thread(inspect_media, path, modality, path.suffix.lstrip("."), path.name)
        if info.phash is None:
            raise MemoryValidationError("data_or_path", f"no perceptual hash for {path.name!r}")
        return self.vector(info.phash)


# ----------------------------------------------------------------------------- image-text
class ImageTextEncoder(PerceptionEncoder):
    """Any LlamaIndex ``MultiModalEmbedding`` as a perception encoder (images, video keyframes, text).

    ``space`` defaults to ``<class>-<model_name>-<dim>`` (sanitised). Model calls run in a
    worker thread, serialised (most model objects are not thread-safe).
    """

    supports_text = True

    def __init__(self, model: Any, *, signal: str = SIGNAL_CLIP, label: str | None = None) -> None:
        from llama_index.core.embeddings import MultiModalEmbedding

        if not isinstance(model, MultiModalEmbedding):
            raise MemoryValidationError(
                "model", f"expected a llama_index MultiModalEmbedding, got {type(model).__name__}"
            )
        self.model = model
        self.signal = signal
        self.modalities = frozenset({Modality.IMAGE, Modality.VIDEO})
        if label is None:
            from llama_index_memory_hierarchy.embeddings import model_label

            label = model_label(model)  # a local folder: its name plus a digest of its config
        self._label = label
        self._dim: int | None = None
        self._lock = asyncio.Lock()

    @property
    def space(self) -> str:
        from llama_index_memory_hierarchy.embeddings import make_space

        if self._dim is None:
            raise RuntimeError("ImageTextEncoder.space is known after aprobe()")
        return make_space(self._label, self._dim)

    @property
    def dim(self) -> int | None:
        return self._dim

    async def aprobe(self) -> None:
        if self._dim is None:
            await self.aembed_text("probe")

    def _check(self, raw: Any, what: str) -> np.ndarray:
        vector = _normalise(raw, self._dim, what)
        if self._dim is None:
            self._dim = int(vector.shape[0])
        return vector

    async def _call(self, func: Any, arg: Any) -> Any:
        async with self._lock:
            return await asyncio.to_thread(func, arg)

    async def aembed_file(self, path: Path, modality: Modality) -> np.ndarray:
        if modality is Modality.VIDEO:
            from llama_index_memory_hierarchy.perception.media import video_keyframe_png

            frame = await asyncio.to_thread(video_keyframe_png, path)
            if frame is None:
                raise MemoryValidationError("data_or_path", f"no decodable frame in video {path.name!r}")
            raw = await self._call(self.model.get_image_embedding, frame)
        else:
            raw = await self._call(self.model.get_image_embedding, str(path))
        return self._check(raw, f"{self.signal} embedding of {path.name!r}")

    async def aembed_image(self, image: str | Path | bytes) -> np.ndarray:
        """Embed an image given as a path or encoded bytes (a query image)."""
        import io

        arg: Any = io.BytesIO(image) if isinstance(image, (bytes, bytearray)) else str(image)
        return self._check(await self._call(self.model.get_image_embedding, arg), f"{self.signal} image query")

    async def aembed_text(self, text: str) -> np.ndarray:
        return self._check(await self._call(self.model.get_query_embedding, text), f"{self.signal} text query")


# ----------------------------------------------------------------------------- audio
@runtime_checkable
class AudioEncoder(Protocol):
    """An audio model: ``embed_audio(waveform, sample_rate)``; ``embed_text`` too when cross-modal (CLAP).

    ``waveform`` is mono float32 in [-1, 1]. Set ``supports_text = True`` and implement
    ``embed_text`` for text-to-audio search.
    """

    model_name: str

    def embed_audio(self, waveform: np.ndarray, sample_rate: int) -> Sequence[float]: ...


def read_mono(path: Path, max_seconds: float = DEFAULT_AUDIO_SECONDS) -> tuple[np.ndarray, int]:
    """The first ``max_seconds`` of an audio file as mono float32 (soundfile, else PyAV: the ``media`` extra)."""
    try:
        import soundfile as sf

        with sf.SoundFile(str(path)) as snd:
            rate = int(snd.samplerate)
            data = snd.read(int(max_seconds * rate), dtype="float32", always_2d=True)
        return data.mean(axis=1), rate
    except Exception as sf_exc:
        try:
            import av
        except ImportError:
            if isinstance(sf_exc, ImportError):
                raise MemoryValidationError(
                    "data_or_path",
                    f"decoding audio {path.name!r} needs the 'media' extra: "
                    "pip install 'llama-index-memory-hierarchy[media]'",
                ) from sf_exc
            raise MemoryValidationError("data_or_path", f"cannot decode audio {path.name!r}: {sf_exc}") from sf_exc
        chunks: list[np.ndarray] = []
        rate = 0
        try:
            with av.open(str(path)) as container:
                stream = container.streams.audio[0]
                resampler = av.AudioResampler(format="flt", layout="mono")
                for frame in container.decode(stream):
                    for out in resampler.resample(frame):
                        rate = out.sample_rate
                        chunks.append(out.to_ndarray().reshape(-1))
                    if rate and sum(len(c) for c in chunks) >= max_seconds * rate:
                        break
        except Exception as exc:
            raise MemoryValidationError("data_or_path", f"cannot decode audio {path.name!r}: {exc}") from exc
        if not chunks:
            raise MemoryValidationError("data_or_path", f"audio {path.name!r} has no samples") from sf_exc
        return np.concatenate(chunks)[: int(max_seconds * rate)], rate


class AudioEncoderAdapter(PerceptionEncoder):
    """Gives an :class:`AudioEncoder` a vector space, file decoding and validation."""

    def __init__(
        self, model: AudioEncoder, *, signal: str = SIGNAL_AUDIO, max_seconds: float = DEFAULT_AUDIO_SECONDS
    ) -> None:
        if not callable(getattr(model, "embed_audio", None)):
            raise MemoryValidationError("model", f"{type(model).__name__} has no embed_audio(waveform, sample_rate)")
        self.model = model
        self.signal = signal
        self.modalities = frozenset({Modality.AUDIO})
        self.supports_text = bool(getattr(model, "supports_text", False)) and callable(
            getattr(model, "embed_text", None)
        )
        self.max_seconds = max_seconds
        self._label = str(getattr(model, "model_name", None) or type(model).__name__)
        self._dim: int | None = getattr(model, "dim", None)
        self._lock = asyncio.Lock()

    @property
    def space(self) -> str:
        from llama_index_memory_hierarchy.embeddings import make_space

        if self._dim is None:
            raise RuntimeError("AudioEncoderAdapter.space is known after aprobe()")
        return make_space(self._label, self._dim)

    @property
    def dim(self) -> int | None:
        return self._dim

    async def aprobe(self) -> None:
        if self._dim is None:
            rate = 16000
            tone = (0.1 * np.sin(2 * np.pi * 440 * np.arange(rate) / rate)).astype(np.float32)
            await self.aembed_waveform(tone, rate)

    def _check(self, raw: Any, what: str) -> np.ndarray:
        vector = _normalise(raw, self._dim, what)
        if self._dim is None:
            self._dim = int(vector.shape[0])
        return vector

    async def aembed_waveform(self, waveform: np.ndarray, sample_rate: int) -> np.ndarray:
        """Embed decoded mono samples."""
        async with self._lock:
            raw = await asyncio.to_thread(self.model.embed_audio, waveform, sample_rate)
        return self._check(raw, f"{self.signal} embedding")

    async def aembed_file(self, path: Path, modality: Modality) -> np.ndarray:
        waveform, rate = await asyncio.to_thread(read_mono, path, self.max_seconds)
        if waveform.size == 0:
            raise MemoryValidationError("data_or_path", f"audio {path.name!r} has no samples")
        return await self.aembed_waveform(waveform, rate)

    async def aembed_text(self, text: str) -> np.ndarray:
        if not self.supports_text:
            return await super().aembed_text(text)
        async with self._lock:
            raw = await asyncio.to_thread(self.model.embed_text, text)  # type: ignore[attr-defined]
        return self._check(raw, f"{self.signal} text query")


class SpectralAudioEncoder:
    """Offline audio embedding: per-band mean and spread of a log-mel spectrogram.

    Real DSP with numpy, no weights: robust to re-encoding, resampling and volume (the
    spectrum is level-normalised), so it finds the same or a very similar recording. It
    does not understand content; plug a CLAP-like :class:`AudioEncoder` for that.
    """

    model_name = "log-mel-stats-v1"
    supports_text = False

    def __init__(self, n_mels: int = 40, n_fft: int = 1024, hop: int = 512, fmax: float = 8000.0) -> None:
        self.n_mels, self.n_fft, self.hop, self.fmax = n_mels, n_fft, hop, fmax
        self.dim = 2 * n_mels

    def _filterbank(self, rate: int) -> np.ndarray:
        def mel(f: np.ndarray) -> np.ndarray:
            return 2595.0 * np.log10(1.0 + f / 700.0)

        def hz(m: np.ndarray) -> np.ndarray:
            return 700.0 * (10 ** (m / 2595.0) - 1.0)

        fmax = min(self.fmax, rate / 2)
        points = hz(np.linspace(mel(np.array(30.0)), mel(np.array(fmax)), self.n_mels + 2))
        freqs = np.fft.rfftfreq(self.n_fft, 1.0 / rate)
        bank = np.zeros((self.n_mels, freqs.size), dtype=np.float32)
        for i in range(self.n_mels):
            lo, mid, hi = points[i], points[i + 1], points[i + 2]
            rising = (freqs - lo) / max(mid - lo, 1e-9)
            falling = (hi - freqs) / max(hi - mid, 1e-9)
            bank[i] = np.clip(np.minimum(rising, falling), 0.0, None)
        return bank

    def embed_audio(self, waveform: np.ndarray, sample_rate: int) -> list[float]:
        signal = np.asarray(waveform, dtype=np.float32).reshape(-1)
        if signal.size < self.n_fft:
            signal = np.pad(signal, (0, self.n_fft - signal.size))
        frames = 1 + (signal.size - self.n_fft) // self.hop
        index = np.arange(self.n_fft)[None, :] + self.hop * np.arange(frames)[:, None]
        spectrum = np.abs(np.fft.rfft(signal[index] * np.hanning(self.n_fft).astype(np.float32), axis=1)) ** 2
        energy = spectrum @ self._filterbank(int(sample_rate)).T
        energy /= max(float(energy.sum(axis=1).mean()), 1e-12)  # level-independent
        log_mel = np.log(energy + 1e-8)
        mean = log_mel.mean(axis=0)
        spread = log_mel.std(axis=0)
        return np.concatenate([mean - mean.mean(), spread - spread.mean()]).astype(np.float32).tolist()


# ----------------------------------------------------------------------------- captions
def llm_accepts_images(llm: Any, declared: bool | None = None) -> bool:
    """Whether to send images to ``llm``: as declared, else True for a legacy ``MultiModalLLM``.

    LlamaIndex's ``LLMMetadata`` does not say whether a chat model reads images, so for a
    plain ``LLM`` the caller declares it (``llm_accepts_images=True`` for GPT-4o, Claude...).
    """
    if declared is not None:
        return declared
    try:
        from llama_index.core.multi_modal_llms import MultiModalLLM
    except ImportError:  # pragma: no cover - very old or very new llama-index
        return False
    return isinstance(llm, MultiModalLLM)


async def aask_llm(llm: Any, prompt: str, images: Sequence[tuple[Path, str]] = ()) -> str:
    """Ask ``llm`` a question with optional images ``(path, mime)``; return its text answer.

    A legacy ``MultiModalLLM`` gets ``acomplete(prompt, image_documents=...)``; any other
    LlamaIndex LLM gets one user ``ChatMessage`` of a ``TextBlock`` plus ``ImageBlock``s.
    """
    from llama_index.core.base.llms.types import ChatMessage, ImageBlock, MessageRole, TextBlock

    try:
        from llama_index.core.multi_modal_llms import MultiModalLLM
    except ImportError:  # pragma: no cover
        MultiModalLLM = ()  # type: ignore[assignment,misc]
    if isinstance(llm, MultiModalLLM):
        from llama_index.core.schema import ImageDocument

        documents = [ImageDocument(image_path=str(path), image_mimetype=mime) for path, mime in images]
        response = await llm.acomplete(prompt, image_documents=documents)
        return str(getattr(response, "text", response) or "").strip()
    blocks: list[Any] = [ImageBlock(path=path, image_mimetype=mime) for path, mime in images]
    blocks.append(TextBlock(text=prompt))
    response = await llm.achat([ChatMessage(role=MessageRole.USER, blocks=blocks)])
    return str(response.message.content or "").strip()


DEFAULT_CAPTION_PROMPT = (
    "Describe this image for a searchable memory in one or two sentences: the main subjects, "
    "any text it shows, and the setting. Answer with the description only."
)


async def acaption_with_llm(llm: Any, path: Path, mime: str, prompt: str = DEFAULT_CAPTION_PROMPT) -> str | None:
    """A caption of an image by a multi-modal LLM, or None when it answers nothing."""
    caption = await aask_llm(llm, prompt, [(path, mime)])
    return caption or None
