"""Modality detection, real media metadata, perceptual hashes and the content-addressed file store."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pytest
from media_samples import draw_scene, image_bytes, recompressed_copy, write_tone, write_video
from PIL import Image

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.perception.files import FileRef, FileStore, user_dir_name
from llama_index_memory_hierarchy.perception.media import (
    Modality,
    detect_modality,
    hamming_distance,
    inspect_media,
    phash_to_vector,
    read_isobmff_metadata,
    similarity_to_hamming,
    sniff,
)

# ----------------------------------------------------------------------------- detection


def test_sniff_recognises_real_files(tmp_path: Path) -> None:
    assert sniff(image_bytes("sunset", "PNG")[:64]) == (Modality.IMAGE, "png")
    assert sniff(image_bytes("sunset", "JPEG")[:64]) == (Modality.IMAGE, "jpg")
    assert sniff(image_bytes("sunset", "GIF")[:64]) == (Modality.IMAGE, "gif")
    assert sniff(image_bytes("sunset", "WEBP")[:64]) == (Modality.IMAGE, "webp")
    assert sniff(write_tone(tmp_path / "t.wav").read_bytes()[:64]) == (Modality.AUDIO, "wav")
    assert sniff(write_tone(tmp_path / "t.flac").read_bytes()[:64]) == (Modality.AUDIO, "flac")
    assert sniff(write_tone(tmp_path / "t.ogg").read_bytes()[:64]) == (Modality.AUDIO, "ogg")
    pytest.importorskip("av")
    assert sniff(write_video(tmp_path / "v.mp4").read_bytes()[:64]) == (Modality.VIDEO, "mp4")


def test_content_beats_extension_and_override_beats_content() -> None:
    png = image_bytes("checker")[:64]
    assert detect_modality(png, "photo.wav") == (Modality.IMAGE, "png")  # a misleading extension
    assert detect_modality(png, None, override="audio")[0] is Modality.AUDIO
    assert detect_modality(b"hello world\n", "notes.md") == (Modality.TEXT, "md")
    assert detect_modality("héllo".encode(), None) == (Modality.TEXT, "txt")
    assert detect_modality(b"\x00\x01garbage", "clip.mkv") == (Modality.VIDEO, "mkv")  # extension as fallback


def test_unknown_content_and_bad_override_are_validation_errors() -> None:
    with pytest.raises(MemoryValidationError, match="pass modality="):
        detect_modality(b"\x00\x01\x02\x03binary", "blob.xyz")
    with pytest.raises(MemoryValidationError, match="unknown modality 'smell'"):
        detect_modality(b"abc", None, override="smell")


# ----------------------------------------------------------------------------- metadata


def test_image_metadata_with_exif_time_and_phash(tmp_path: Path) -> None:
    exif = Image.Exif()
    exif[306] = "2024:05:06 07:08:09"
    path = tmp_path / "photo.jpg"
    draw_scene("whiteboard").save(path, format="JPEG", exif=exif)
    info = inspect_media(path, Modality.IMAGE, "jpg", "photo.jpg")
    assert info.metadata | {"format": "JPEG", "width": 160, "height": 120, "mode": "RGB"} == info.metadata
    assert info.metadata["exif_time"] == "2024-05-06T07:08:09+00:00"
    assert info.captured_at is not None and info.captured_at.year == 2024
    assert info.phash is not None and len(info.phash) == 16
    assert info.mime_type == "image/jpeg"


def test_audio_metadata_read_with_soundfile(tmp_path: Path) -> None:
    path = write_tone(tmp_path / "tone.wav", seconds=0.75, rate=22050, channels=2)
    info = inspect_media(path, Modality.AUDIO, "wav", "tone.wav")
    meta = info.metadata
    assert (meta["sample_rate"], meta["channels"], meta["frames"]) == (22050, 2, int(0.75 * 22050))
    assert meta["duration_s"] == pytest.approx(0.75, abs=1e-3)
    assert meta["reader"] == "soundfile" and meta["format"] == "WAV"


def test_video_metadata_with_pyav_and_pure_python_parser_agree(tmp_path: Path) -> None:
    pytest.importorskip("av")
    path = write_video(tmp_path / "clip.mp4", frames=15, fps=10)
    info = inspect_media(path, Modality.VIDEO, "mp4", "clip.mp4")
    meta = info.metadata
    assert (meta["width"], meta["height"], meta["frames"], meta["fps"]) == (64, 48, 15, 10.0)
    assert meta["duration_s"] == pytest.approx(1.5)
    assert meta["reader"] == "av" and meta["has_audio"] is False
    assert info.phash is not None
    parsed = read_isobmff_metadata(path, "clip.mp4")
    assert (parsed["width"], parsed["height"], parsed["frames"], parsed["fps"]) == (64, 48, 15, 10.0)
    assert parsed["duration_s"] == pytest.approx(1.5)


@pytest.mark.parametrize(
    ("modality", "name", "data"),
    [
        (Modality.IMAGE, "broken.png", image_bytes("sunset", "PNG")[:80]),
        (Modality.IMAGE, "noise.jpg", b"\xff\xd8\xff\xe0" + os.urandom(300)),
        (Modality.AUDIO, "broken.wav", b"RIFF\x24\x00\x00\x00WAVEfmt " + os.urandom(40)),
        (Modality.VIDEO, "broken.mp4", b"\x00\x00\x00\x18ftypisom" + os.urandom(200)),
        (Modality.TEXT, "latin.txt", "café".encode("latin-1")),
    ],
)
def test_malformed_files_raise_validation_error_naming_the_file(
    tmp_path: Path, modality: Modality, name: str, data: bytes
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(MemoryValidationError) as caught:
        inspect_media(path, modality, name.rsplit(".", 1)[1], name)
    assert name in str(caught.value)


def test_audio_without_the_media_extra_keeps_size_and_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The core install has neither soundfile nor PyAV: an audio file is still taken, with what can be known."""
    import sys

    from llama_index_memory_hierarchy.perception.encoders import read_mono

    path = write_tone(tmp_path / "t.wav")
    for module in ("soundfile", "av"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed: importing it raises ImportError
    info = inspect_media(path, Modality.AUDIO, "wav", "t.wav")
    assert (info.modality, info.ext, info.metadata["reader"]) == (Modality.AUDIO, "wav", "none")
    assert info.metadata["bytes"] == path.stat().st_size
    with pytest.raises(MemoryValidationError, match=r"llama-index-memory-hierarchy\[media\]"):
        read_mono(path)


def test_phash_finds_resized_recompressed_copy() -> None:
    def phash(data: bytes) -> str:
        from llama_index_memory_hierarchy.perception.media import image_phash

        with Image.open(io.BytesIO(data)) as image:
            return image_phash(image)

    original = image_bytes("whiteboard")
    copy = recompressed_copy(original, scale=0.6, quality=35)
    assert hashlib.sha256(copy).digest() != hashlib.sha256(original).digest()
    near = hamming_distance(phash(original), phash(copy))
    far = min(hamming_distance(phash(original), phash(image_bytes(k))) for k in ("sunset", "checker", "diagonal"))
    assert near <= 6 < far


def test_phash_is_the_one_imagehash_gave() -> None:
    """``image_phash`` dropped imagehash and SciPy (the core install's size) and keeps its hashes: these are
    ``imagehash.phash(image, hash_size=8)``'s, so stored hashes stay comparable."""
    import numpy as np

    from llama_index_memory_hierarchy.perception.media import image_phash

    gradient = Image.fromarray((np.add.outer(np.arange(64), np.arange(48)) * 3 % 256).astype(np.uint8))
    with Image.open(io.BytesIO(image_bytes("sunset", size=(640, 480)))) as sunset:
        assert image_phash(sunset) == "99666698d9656659"
    assert image_phash(gradient) == "8c334a972d5b34ab"
    assert image_phash(Image.new("RGB", (40, 30), (200, 120, 40))) == "8000000000000000"  # flat: only the mean


def test_phash_vector_cosine_matches_hamming() -> None:
    import numpy as np

    a, b = "f0f0f0f0f0f0f0f0", "f0f0f0f0f0f0f0ff"
    va, vb = np.array(phash_to_vector(a)), np.array(phash_to_vector(b))
    cosine = float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))
    assert similarity_to_hamming(cosine) == hamming_distance(a, b) == 4


# ----------------------------------------------------------------------------- file store


def test_store_is_content_addressed_streamed_and_deduplicated(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "persist", chunk_bytes=1000)
    data = image_bytes("sunset")
    sha = hashlib.sha256(data).hexdigest()
    first = store.commit(store.stage(data, filename="a.png"), "alice", "png")
    source = tmp_path / "same.png"
    source.write_bytes(data)
    second = store.commit(store.stage(source), "alice", "png")
    assert first.ref == second.ref == f"alice/{sha[:2]}/{sha}.png"
    assert store.resolve(first, "alice") == (tmp_path / "persist" / "files" / first.ref).resolve()
    assert store.resolve(first, "alice").read_bytes() == data
    assert len(store.stored_files("alice")) == 1
    assert not list((tmp_path / "persist" / "files" / ".staging").iterdir())
    with open(source, "rb") as stream:  # a binary file object streams too
        assert store.commit(store.stage(stream), "alice", "png").sha256 == sha


def test_size_limit_names_size_and_limit(tmp_path: Path) -> None:
    store = FileStore(tmp_path, max_bytes=1000)
    big = tmp_path / "big.wav"
    write_tone(big, seconds=0.2)
    with pytest.raises(MemoryValidationError, match=r"is [\d,]+ bytes, over the limit of 1,000 bytes"):
        store.stage(big)
    with pytest.raises(MemoryValidationError, match="more than 1,000 bytes"):
        store.stage(io.BytesIO(big.read_bytes()))  # a stream of unknown size stops at the limit
    with pytest.raises(MemoryValidationError, match="empty"):
        store.stage(b"")
    assert not list((tmp_path / "files" / ".staging").iterdir())


def test_reference_mode_hashes_without_copying_and_never_deletes_original(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "persist")
    original = tmp_path / "photo.png"
    original.write_bytes(image_bytes("checker"))
    ref = store.commit(store.stage(original, copy=False), "bob", "png")
    assert ref.mode == "reference" and ref.path == str(original.resolve())
    assert store.stored_files("bob") == []
    assert store.resolve(ref, "bob") == original.resolve()
    assert store.delete(ref, "bob") is False and original.exists()


def test_paths_outside_allowed_roots_and_tampered_refs_are_rejected(tmp_path: Path) -> None:
    inside = tmp_path / "inbox"
    inside.mkdir()
    (tmp_path / "secret.txt").write_text("do not read")
    store = FileStore(tmp_path / "persist", allowed_roots=[inside])
    with pytest.raises(MemoryValidationError, match="outside the allowed folders"):
        store.stage(inside / ".." / "secret.txt", copy=False)
    with pytest.raises(MemoryValidationError, match="outside the allowed folders"):
        store.stage(str((tmp_path / "secret.txt").resolve()))
    with pytest.raises(MemoryValidationError, match="no readable file"):
        store.stage(inside / "missing.png")
    good = store.commit(store.stage(b"hello"), "alice", "txt").to_metadata()
    sha = good["sha256"]
    for bad_ref in (f"../{sha[:2]}/{sha}.txt", f"/etc/{sha}.txt", f"alice/{sha[:2]}/../../../{sha}.txt", "alice/xx"):
        with pytest.raises(MemoryValidationError):
            store.delete({**good, "ref": bad_ref}, "alice")
    with pytest.raises(MemoryValidationError, match="another user"):
        store.delete(good, "mallory")
    with pytest.raises(MemoryValidationError):
        FileRef.from_metadata({**good, "mode": "reference", "path": "relative/path"})
    assert store.delete(good, "alice") is True


def test_user_folders_never_collide(tmp_path: Path) -> None:
    names = {user_dir_name(u) for u in ("bob", "Bob", "BOB", "bob:1", "bob_1")}
    assert len(names) == 5
    assert user_dir_name("bob") == "bob"
    with pytest.raises(MemoryValidationError):
        user_dir_name("../etc")


def test_delete_user_removes_only_that_users_files(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.commit(store.stage(b"one"), "alice", "txt")
    store.commit(store.stage(b"two"), "alice", "txt")
    kept = store.commit(store.stage(b"one"), "bob", "txt")
    assert store.delete_user("alice") == 2 and store.stored_files("alice") == []
    assert store.resolve(kept, "bob").read_bytes() == b"one"
