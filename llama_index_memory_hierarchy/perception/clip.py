"""``LocalCLIPEmbedding``: a LlamaIndex ``MultiModalEmbedding`` over a local ``transformers`` CLIP folder.

Why: LlamaIndex's CLIP integration downloads weights through the ``clip`` package; this
adapter loads any CLIP-architecture folder (``CLIPModel`` + tokenizer + image processor,
as written by ``save_pretrained``) with ``local_files_only=True`` and never touches the
network. Wrap it in :class:`~.encoders.ImageTextEncoder` to give perceptions a CLIP space.
"""

from __future__ import annotations

import io
import os
import threading
from typing import Any

from llama_index.core.embeddings import MultiModalEmbedding
from llama_index.core.schema import ImageType
from pydantic import Field, PrivateAttr


class LocalCLIPEmbedding(MultiModalEmbedding):
    """Image and text embeddings of a local CLIP model (projected, L2-normalised)."""

    model_name: str = Field(description="Local folder of a transformers CLIP model.")
    device: str = Field(default="cpu", description="torch device.")

    _model: Any = PrivateAttr(default=None)
    _tokenizer: Any = PrivateAttr(default=None)
    _processor: Any = PrivateAttr(default=None)
    _load_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def class_name(cls) -> str:
        return "LocalCLIPEmbedding"

    def _load(self) -> tuple[Any, Any, Any]:
        if self._model is None:
            with self._load_lock:
                if self._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

                    self._tokenizer = AutoTokenizer.from_pretrained(self.model_name, local_files_only=True)
                    self._processor = AutoImageProcessor.from_pretrained(self.model_name, local_files_only=True)
                    self._model = CLIPModel.from_pretrained(self.model_name, local_files_only=True).to(self.device)
                    self._model.eval()
        return self._model, self._tokenizer, self._processor

    @staticmethod
    def _features(output: Any) -> Any:
        """Projected features: a tensor (transformers 4) or ``pooler_output`` of a model output (5)."""
        tensor = getattr(output, "pooler_output", output)
        return tensor / tensor.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def _embed_texts(self, texts: list[str]) -> list[list[float]]:
        import torch

        model, tokenizer, _ = self._load()
        inputs = tokenizer(texts, return_tensors="pt", padding=True, truncation=True).to(self.device)
        inputs.pop("token_type_ids", None)
        with torch.no_grad():
            return self._features(model.get_text_features(**inputs)).cpu().tolist()

    def _embed_images(self, images: list[ImageType]) -> list[list[float]]:
        import torch
        from PIL import Image

        model, _, processor = self._load()
        pictures = []
        for source in images:
            data = source if isinstance(source, io.IOBase) else open(source, "rb")  # noqa: SIM115
            try:
                with Image.open(data) as image:
                    pictures.append(image.convert("RGB"))
            finally:
                if data is not source:
                    data.close()
        inputs = processor(images=pictures, return_tensors="pt").to(self.device)
        with torch.no_grad():
            return self._features(model.get_image_features(**inputs)).cpu().tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embed_texts([query])[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embed_texts([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embed_texts(list(texts))

    def _get_image_embedding(self, img_file_path: ImageType) -> list[float]:
        return self._embed_images([img_file_path])[0]

    async def _aget_image_embedding(self, img_file_path: ImageType) -> list[float]:
        return self._get_image_embedding(img_file_path)

    def _get_image_embeddings(self, img_file_paths: list[ImageType]) -> list[list[float]]:
        return self._embed_images(list(img_file_paths))
