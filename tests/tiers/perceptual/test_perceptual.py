"""Perceptual memory on the embedded stores, with real files made here (Pillow, numpy + soundfile, PyAV).

Captions are embedded by the bundled MiniLM; the pluggable encoder path runs a real
``transformers`` CLIPModel built from a tiny config (random weights, no download).
"""

from __future__ import annotations

import json
import string
import sys
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, ImageBlock, MessageRole
from llama_index.core.llms import MockLLM
from PIL import Image
from pydantic import Field

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from media_samples import draw_scene, image_bytes, recompressed_copy, write_tone, write_video

from llama_index_memory_hierarchy.errors import LLMRequiredError, MemoryValidationError
from llama_index_memory_hierarchy.perception.clip import LocalCLIPEmbedding
from llama_index_memory_hierarchy.tiers.perceptual import (
    VECTOR_NAMESPACE,
    PerceptionSettings,
    PerceptualMemory,
)
from llama_index_memory_hierarchy.types import MemoryType

CAPTIONS = {
    "whiteboard": "whiteboard with the third-quarter product roadmap drawn in blue marker",
    "sunset": "orange sunset over the sea at the beach in Lisbon",
    "checker": "black and white chessboard pattern on the living room floor",
}


def tier(memory: Any, **kwargs: Any) -> PerceptualMemory:
    """A perceptual tier over a memory's shared stores, with custom settings/encoders/LLM."""
    return PerceptualMemory(user_id=memory.user_id, session_id=memory.session_id, context=memory.context, **kwargs)


def stored_files(memory: Any) -> list[Path]:
    return sorted(p for p in (Path(memory.context.persist_dir) / "files").rglob("*") if p.is_file())


def add_scenes(perceptual: PerceptualMemory) -> dict[str, str]:
    return {
        kind: perceptual.add_perception(image_bytes(kind), filename=f"{kind}.png", caption=caption)
        for kind, caption in CAPTIONS.items()
    }


# ----------------------------------------------------------------------------- add, dedupe, search


def test_add_dedupes_by_content_and_records_real_metadata(make_memory, tmp_path: Path) -> None:
    memory = make_memory()
    perceptual = memory.perceptual
    data = image_bytes("whiteboard")
    first = perceptual.add_perception(data, filename="board.png", caption=CAPTIONS["whiteboard"])
    source = tmp_path / "copy-of-board.png"
    source.write_bytes(data)
    assert perceptual.add_perception(source) == first  # same bytes, other name: one perception
    assert perceptual.add_perception(str(source), caption="another caption") == first
    item = perceptual.get(first)
    meta = item.metadata
    # the same bytes with a new caption take it (issue 17: the old behaviour dropped it silently)
    assert item.memory_type is MemoryType.PERCEPTUAL and item.content == "another caption"
    assert meta["modality"] == "image" and meta["caption_source"] == "given" and meta["filename"] == "board.png"
    assert meta["media"] | {"width": 160, "height": 120, "format": "PNG"} == meta["media"]
    assert len(meta["phash"]) == 16 and len(meta["sha256"]) == 64
    assert meta["file"]["ref"] == f"alice/{meta['sha256'][:2]}/{meta['sha256']}.png"
    assert set(meta["encoders"]) == {"caption_text", "phash"}
    assert meta["encoders"]["caption_text"] == memory.context.embeddings.space
    assert [p.name for p in stored_files(memory)] == [f"{meta['sha256']}.png"]
    assert perceptual.get_stats()["count"] == 1
    assert memory.episodic.get_stats()["count"] == 0


def test_search_by_caption_text_uses_real_embeddings(make_memory) -> None:
    perceptual = make_memory().perceptual
    ids = add_scenes(perceptual)
    results = perceptual.cross_modal_search("what did we plan for the product this quarter?", limit=3)
    assert results[0].id == ids["whiteboard"]
    assert results[0].metadata["match_signal"] == "caption_text" and results[0].score == 1.0
    assert perceptual.retrieve("holiday by the ocean", limit=1)[0].id == ids["sunset"]


def test_near_duplicate_image_found_first_by_phash(make_memory) -> None:
    perceptual = make_memory().perceptual
    ids = add_scenes(perceptual)
    perceptual.add_perception(image_bytes("diagonal"), filename="stripes.png")  # no caption
    query = recompressed_copy(image_bytes("whiteboard"), scale=0.55, quality=35)
    results = perceptual.cross_modal_search(query, query_modality="image", limit=3)
    assert results[0].id == ids["whiteboard"]
    assert results[0].metadata["match_signal"] == "phash" and results[0].metadata["match_distance"] <= 6
    jpeg = perceptual.add_perception(query, filename="resent.jpg")  # different bytes: a new perception
    assert jpeg != ids["whiteboard"]


def test_modality_filters_and_text_files(make_memory, tmp_path: Path) -> None:
    perceptual = make_memory().perceptual
    add_scenes(perceptual)
    tone = perceptual.add_perception(write_tone(tmp_path / "memo.wav"), transcript="voice memo about the roadmap")
    notes = tmp_path / "notes.md"
    notes.write_text("# Roadmap\nShip the memory tier in the third quarter.\n")
    text_id = perceptual.add_perception(notes)
    typed = perceptual.add_perception("the song playing in the cafe was Clair de Lune", modality="text")
    assert [i.metadata["modality"] for i in perceptual.get_by_modality("audio")] == ["audio"]
    assert {i.id for i in perceptual.get_by_modality("text")} == {text_id, typed}
    assert len(perceptual.get_by_modality("image", limit=2)) == 2
    only_audio = perceptual.cross_modal_search("roadmap", target_modality="audio")
    assert [i.id for i in only_audio] == [tone]
    assert {i.metadata["modality"] for i in perceptual.cross_modal_search("roadmap", target_modality="image")} == {
        "image"
    }
    assert perceptual.get(text_id).content.startswith("# Roadmap")
    with pytest.raises(MemoryValidationError, match="unknown modality"):
        perceptual.get_by_modality("smell")
    with pytest.raises(MemoryValidationError, match="modality='text'"):
        perceptual.add_perception("just some words")


def test_audio_metadata_transcript_and_audio_fingerprint_search(make_memory, tmp_path: Path) -> None:
    perceptual = make_memory().perceptual
    low = perceptual.add_perception(write_tone(tmp_path / "low.wav", freq=220, seconds=1.0), caption="low hum")
    perceptual.add_perception(write_tone(tmp_path / "high.wav", freq=1760, seconds=1.0), caption="high beep")
    meta = perceptual.get(low).metadata
    assert (meta["media"]["sample_rate"], meta["media"]["frames"], meta["media"]["channels"]) == (16000, 16000, 1)
    assert set(meta["encoders"]) == {"caption_text", "audio"}
    query = write_tone(tmp_path / "low-again.flac", freq=220, seconds=0.8, rate=22050)  # re-encoded, resampled
    results = perceptual.cross_modal_search(query, query_modality="audio", limit=2)
    assert results[0].id == low and results[0].metadata["match_signal"] == "audio"


def test_video_metadata_and_keyframe_hash(make_memory, tmp_path: Path) -> None:
    pytest.importorskip("av")
    perceptual = make_memory().perceptual
    clip = perceptual.add_perception(write_video(tmp_path / "clip.mp4", frames=20, fps=10))
    item = perceptual.get(clip)
    media = item.metadata["media"]
    assert (media["frames"], media["fps"], media["width"], media["height"]) == (20, 10.0, 64, 48)
    assert media["duration_s"] == pytest.approx(2.0) and item.metadata["phash"]
    assert item.metadata["caption_source"] == "metadata" and "2.0 seconds" in item.content
    assert perceptual.get_by_modality("video")[0].id == clip


# ----------------------------------------------------------------------------- users, removal, limits


def test_per_user_isolation(make_memory) -> None:
    alice, bob = make_memory("alice"), make_memory("bob")
    data = image_bytes("sunset")
    mine = alice.perceptual.add_perception(data, caption=CAPTIONS["sunset"])
    theirs = bob.perceptual.add_perception(data, caption="bob's copy of the sunset")
    assert mine != theirs
    assert bob.perceptual.get(mine) is None and bob.perceptual.remove(mine) is False
    assert [i.id for i in bob.perceptual.cross_modal_search("sunset at the beach")] == [theirs]
    assert [i.id for i in bob.perceptual.cross_modal_search(data, "image")] == [theirs]
    assert len(stored_files(alice)) == 2  # one per user: content addressing never crosses users
    assert bob.perceptual.remove(theirs) is True
    assert alice.perceptual.path_of(mine).is_file()


def test_remove_deletes_file_and_vectors_and_clear(make_memory) -> None:
    memory = make_memory()
    perceptual = memory.perceptual
    ids = add_scenes(perceptual)
    context = memory.context
    count = context.records.count
    assert context.runtime.run(count("alice", namespace=VECTOR_NAMESPACE)) == 3  # one phash vector each
    path = perceptual.path_of(ids["sunset"])
    assert perceptual.remove(ids["sunset"]) is True and not path.exists()
    assert perceptual.remove(ids["sunset"]) is False
    assert context.runtime.run(count("alice", namespace=VECTOR_NAMESPACE)) == 2
    assert perceptual.cross_modal_search(image_bytes("sunset"), "image", signals=["phash"]) == []
    assert perceptual.clear() == 2 and stored_files(memory) == []
    assert context.runtime.run(count("alice", namespace=VECTOR_NAMESPACE)) == 0
    assert perceptual.garbage_collect() == {"vectors": 0, "files": 0}


def test_reference_mode_keeps_original_where_it_is(make_memory, tmp_path: Path) -> None:
    memory = make_memory()
    perceptual = tier(memory, settings=PerceptionSettings(store_files=False))
    original = tmp_path / "holiday.jpg"
    draw_scene("sunset").save(original, format="JPEG")
    pid = perceptual.add_perception(original, caption="holiday photo")
    assert perceptual.get(pid).metadata["file"] == {
        "mode": "reference",
        "sha256": perceptual.get(pid).metadata["sha256"],
        "size": original.stat().st_size,
        "ext": "jpg",
        "path": str(original.resolve()),
        "filename": "holiday.jpg",
    }
    assert stored_files(memory) == [] and perceptual.path_of(pid) == original.resolve()
    assert perceptual.remove(pid) and original.exists()


def test_size_limit_malformed_file_and_path_confinement(make_memory, tmp_path: Path) -> None:
    memory = make_memory()
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    perceptual = tier(memory, settings=PerceptionSettings(max_file_bytes=4096, allowed_roots=[inbox]))
    big = write_tone(inbox / "long.wav", seconds=1.0)
    with pytest.raises(MemoryValidationError, match=r"long\.wav' is 32,044 bytes, over the limit of 4,096 bytes"):
        perceptual.add_perception(big)
    broken = inbox / "broken.png"
    broken.write_bytes(image_bytes("checker")[:60])
    with pytest.raises(MemoryValidationError, match=r"cannot read image file 'broken\.png'"):
        perceptual.add_perception(broken)
    secret = tmp_path / "secret.png"
    secret.write_bytes(image_bytes("checker"))
    with pytest.raises(MemoryValidationError, match="outside the allowed folders"):
        perceptual.add_perception(inbox / ".." / "secret.png")
    with pytest.raises(MemoryValidationError, match="outside the allowed folders"):
        perceptual.add_perception(str(secret))
    assert perceptual.get_stats()["count"] == 0 and stored_files(memory) == []
    pid = perceptual.add_perception(image_bytes("checker"), caption="fine")
    with pytest.raises(MemoryValidationError, match="set by the perceptual tier"):
        perceptual.update(pid, metadata={"file": {"mode": "stored", "ref": "../../etc/passwd"}})
    with pytest.raises(MemoryValidationError, match="set by the perceptual tier"):
        perceptual.add_perception(image_bytes("sunset"), metadata={"sha256": "0" * 64})
    assert perceptual.update(pid, content="a checkerboard", metadata={"room": "hall"})
    # a tier built alone retrieves nothing (no search): the memory's own tier reads the same stores
    assert memory.perceptual.retrieve("checkerboard", limit=1)[0].metadata["room"] == "hall"


def test_exif_capture_time_becomes_event_time(make_memory) -> None:
    perceptual = make_memory().perceptual
    exif = Image.Exif()
    exif[306] = "2023:07:14 18:30:00"
    import io

    buffer = io.BytesIO()
    draw_scene("sunset").save(buffer, format="JPEG", exif=exif)
    pid = perceptual.add_perception(buffer.getvalue(), caption="summer evening")
    assert perceptual.get(pid).timestamp.isoformat() == "2023-07-14T18:30:00+00:00"


# ----------------------------------------------------------------------------- LLM captions, context


class VisionLLM(MockLLM):
    """A stand-in for a hosted vision LLM: answers from what it was sent and records the messages."""

    calls: list[list[ChatMessage]] = Field(default_factory=list)

    async def achat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        self.calls.append(list(messages))
        images = [b for m in messages for b in m.blocks if isinstance(b, ImageBlock)]
        sizes = []
        for block in images:
            with Image.open(block.path) as image:
                sizes.append(f"{image.width}x{image.height}")
        answer = f"a hand-drawn diagram ({', '.join(sizes) or 'no image'})"
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=answer))


def test_llm_captions_images_and_generate_content_attaches_them(make_memory) -> None:
    memory = make_memory()
    llm = VisionLLM()
    perceptual = tier(memory, llm=llm, settings=PerceptionSettings(llm_accepts_images=True))
    pid = perceptual.add_perception(image_bytes("whiteboard"), filename="board.png")
    item = perceptual.get(pid)
    assert item.content == "a hand-drawn diagram (160x120)" and item.metadata["caption_source"] == "llm"
    answer = perceptual.generate_content("What is on the board?", [pid])
    assert answer == "a hand-drawn diagram (160x120)"
    prompt = llm.calls[-1][0]
    assert f"perception:{pid}" in prompt.blocks[-1].text and "What is on the board?" in prompt.blocks[-1].text
    blocks = perceptual.describe_for_context([item], include_images=True)
    assert isinstance(blocks[0], str) and f"ref perception:{pid}" in blocks[0]
    assert isinstance(blocks[1], ImageBlock) and Path(blocks[1].path) == perceptual.path_of(pid)
    assert perceptual.describe_for_context([item]) == blocks[:1]  # text only unless images are accepted
    with pytest.raises(LLMRequiredError):
        memory.perceptual.generate_content("What is on the board?", [pid])
    with pytest.raises(MemoryValidationError, match="no perception"):
        perceptual.generate_content("?", ["00000000-0000-4000-8000-000000000000"])


# ----------------------------------------------------------------------------- pluggable CLIP encoder


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real CLIPModel from a tiny config (random weights), a character tokenizer and an image processor."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import CLIPConfig, CLIPImageProcessorPil, CLIPModel, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-clip")
    vocab = {"<pad>": 0, "<unk>": 1, "<bos>": 2, "<eos>": 3}
    for char in string.ascii_lowercase + string.digits + string.punctuation:
        vocab[char] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Whitespace(), pre_tokenizers.Split("", behavior="isolated")]
    )
    backend.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>", special_tokens=[("<bos>", 2), ("<eos>", 3)]
    )
    PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    ).save_pretrained(folder)
    config = CLIPConfig(
        text_config={
            "vocab_size": len(vocab),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "max_position_embeddings": 64,
            "bos_token_id": 2,
            "eos_token_id": 3,
            "pad_token_id": 0,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
        },
        projection_dim=16,
    )
    torch.manual_seed(0)
    CLIPModel(config).save_pretrained(folder)
    CLIPImageProcessorPil(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    assert json.loads((folder / "config.json").read_text())["projection_dim"] == 16
    return folder


def test_clip_encoder_gets_its_own_space_and_finds_image_by_its_embedding(make_memory, tiny_clip: Path) -> None:
    memory = make_memory()
    clip_model = LocalCLIPEmbedding(model_name=str(tiny_clip))
    perceptual = tier(memory, encoders=[clip_model])
    encoder = perceptual.encoders[0]
    ids = add_scenes(perceptual)
    context = memory.context
    clip_space, text_space = encoder.space, context.embeddings.space
    assert clip_space.endswith("-16") and text_space.endswith("-384") and clip_space != text_space
    assert tiny_clip.name.lower().split("-")[0] in clip_space  # named after the model folder
    meta = perceptual.get(ids["sunset"]).metadata
    assert meta["encoders"] == {"caption_text": text_space, "phash": "phash-64", "clip": clip_space}
    clip_index = context.runtime.run(context.avector_index(clip_space, 16))
    text_index = context.runtime.run(context.avector_index(text_space, 384))
    assert context.runtime.run(clip_index.count("alice")) == 3  # image vectors in the CLIP space only
    assert context.runtime.run(text_index.count("alice")) == 3  # the captions, in the MiniLM space
    assert clip_index.dim == 16 and text_index.dim == 384

    path = perceptual.path_of(ids["checker"])
    own = clip_model.get_image_embedding(str(path))
    by_vector = perceptual.cross_modal_search(own, "embedding", limit=3)
    assert by_vector[0].id == ids["checker"] and by_vector[0].metadata["match_signal"] == "clip"
    assert by_vector[0].metadata["match_signals"]["clip"] == pytest.approx(1.0, abs=1e-4)
    by_image = perceptual.cross_modal_search(path, "image", signals=["clip"], limit=3)
    assert by_image[0].id == ids["checker"] and by_image[0].metadata["match_signal"] == "clip"

    by_text = perceptual.cross_modal_search("a chessboard", signals=["clip"], limit=3)  # text -> CLIP text tower
    assert {i.metadata["match_signal"] for i in by_text} == {"clip"} and len(by_text) == 3
    fused = perceptual.cross_modal_search("chessboard on the floor", limit=3)
    assert fused[0].id == ids["checker"] and set(fused[0].metadata["match_signals"]) == {"caption_text", "clip"}

    assert perceptual.remove(ids["checker"])
    assert context.runtime.run(clip_index.count("alice")) == 2
    with pytest.raises(MemoryValidationError, match="space"):
        perceptual.cross_modal_search([1.0, 0.0, 0.5], "embedding")


async def test_concurrent_adds_of_one_file_make_one_perception(make_memory) -> None:
    import asyncio

    memory = make_memory()
    data = image_bytes("diagonal")
    ids = await asyncio.gather(*(memory.perceptual.aadd_perception(data, caption="stripes") for _ in range(4)))
    assert len(set(ids)) == 1 and len(stored_files(memory)) == 1
    assert await memory.perceptual.aclear() == 1 and stored_files(memory) == []
