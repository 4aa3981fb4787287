"""Real small media files made by the tests (Pillow drawings, numpy-synthesised audio, PyAV video)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw


def draw_scene(kind: str, size: tuple[int, int] = (160, 120)) -> Image.Image:
    """A distinct, structured picture per ``kind`` (so perceptual hashes differ between kinds)."""
    width, height = size
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    if kind == "sunset":
        for y in range(height):
            draw.line((0, y, width, y), fill=(255, int(200 * y / height), 40))
        draw.ellipse((width * 0.35, height * 0.45, width * 0.65, height * 0.85), fill=(255, 240, 0))
    elif kind == "whiteboard":
        draw.rectangle((8, 8, width - 8, height - 8), outline="black", width=3)
        for i in range(5):
            draw.line((20, 25 + i * 18, width - 30 - i * 10, 25 + i * 18), fill=(0, 0, 200), width=2)
    elif kind == "checker":
        cell = max(4, width // 8)
        for x in range(0, width, cell):
            for y in range(0, height, cell):
                if (x // cell + y // cell) % 2:
                    draw.rectangle((x, y, x + cell - 1, y + cell - 1), fill="black")
    elif kind == "diagonal":
        for i in range(-height, width, 12):
            draw.line((i, 0, i + height, height), fill=(30, 120, 30), width=5)
    else:
        raise ValueError(kind)
    return image


def image_bytes(kind: str, fmt: str = "PNG", size: tuple[int, int] = (160, 120), **save: object) -> bytes:
    """The scene encoded as PNG/JPEG/... bytes."""
    buffer = io.BytesIO()
    draw_scene(kind, size).save(buffer, format=fmt, **save)
    return buffer.getvalue()


def recompressed_copy(data: bytes, *, scale: float = 0.5, quality: int = 40) -> bytes:
    """A resized, lossy JPEG re-encode of an image: a near duplicate with different bytes."""
    with Image.open(io.BytesIO(data)) as image:
        small = image.convert("RGB").resize((int(image.width * scale), int(image.height * scale)))
    buffer = io.BytesIO()
    small.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def write_tone(path: Path, *, freq: float = 440.0, seconds: float = 0.5, rate: int = 16000, channels: int = 1) -> Path:
    """A sine tone written as WAV (or FLAC by suffix) with soundfile."""
    import soundfile as sf

    t = np.arange(int(seconds * rate)) / rate
    wave = 0.3 * np.sin(2 * np.pi * freq * t)
    data = np.stack([wave] * channels, axis=1) if channels > 1 else wave
    sf.write(path, data, rate)
    return path


def write_video(path: Path, *, frames: int = 12, fps: int = 10, size: tuple[int, int] = (64, 48)) -> Path:
    """A tiny MPEG-4 video of moving shapes written with PyAV."""
    import av

    width, height = size
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i in range(frames):
            image = draw_scene("checker" if i % 2 else "diagonal", size)
            ImageDraw.Draw(image).ellipse((i * 3, 10, i * 3 + 16, 26), fill="red")
            for packet in stream.encode(av.VideoFrame.from_image(image)):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
