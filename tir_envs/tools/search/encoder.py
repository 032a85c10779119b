"""The sentence encoder of dense retrieval: a Hugging Face model from a local folder only.

Never the hub: a dense index must be reproducible from files the user holds.  Pooled (``mean``
or ``cls``; a sentence-transformers folder's ``1_Pooling/config.json`` decides) and
L2-normalised, so inner product is cosine similarity.  Search-R1's and FlashRAG's e5 retriever
corresponds to ``pooling="mean"``, queries prefixed ``"query: "``, passages ``"passage: "``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

POOLINGS = ("mean", "cls")


class Encoder:
    """Sentence embeddings from the local Hugging Face encoder folder ``model``."""

    def __init__(self, model: str | Path, pooling: str | None = None, max_length: int = 256,
                 batch_size: int = 64, device: str = "cpu"):
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.path = Path(model)
        if not self.path.is_dir():
            raise FileNotFoundError(f"embedding model folder {self.path} does not exist; dense "
                                    "retrieval loads local models only (download it first)")
        self.pooling = pooling or _folder_pooling(self.path)
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(self.path), local_files_only=True)
        self.model.to(device).eval()
        self.device, self.max_length, self.batch_size = device, max_length, batch_size

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32, unit-norm rows."""
        out = [self._batch(list(texts[i:i + self.batch_size]))
               for i in range(0, len(texts), self.batch_size)]
        return np.concatenate(out) if out else np.zeros((0, self.dim), np.float32)

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def _batch(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt").to(self.device)
        with torch.inference_mode():
            hidden = self.model(**enc).last_hidden_state
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        pooled = torch.nn.functional.normalize(pooled.float(), dim=-1)
        return pooled.cpu().numpy().astype(np.float32)


def _folder_pooling(path: Path) -> str:
    """``cls`` or ``mean`` from a sentence-transformers pooling config; ``mean`` otherwise."""
    config = path / "1_Pooling" / "config.json"
    if config.is_file():
        if json.loads(config.read_text()).get("pooling_mode_cls_token"):
            return "cls"
    return "mean"


def model_dim(model: str | Path) -> int | None:
    """The embedding size a local model folder declares (``hidden_size`` in its config.json),
    read without loading the model; ``None`` if it declares none."""
    config = Path(model) / "config.json"
    if not config.is_file():
        return None
    value = json.loads(config.read_text()).get("hidden_size")
    return int(value) if isinstance(value, int) else None
