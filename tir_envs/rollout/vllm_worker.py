"""A vLLM worker extension: load weights sent by a trainer into the running model.

vLLM mixes this class into each worker (``worker_extension_cls``), so ``collective_rpc(
"tir_load_weights", args=(packed,))`` runs it next to the model.  The model's own loader maps
Hugging Face parameter names onto vLLM's fused layers (qkv, gate/up).
"""

from __future__ import annotations

from typing import Any, Iterable


def pack(name: str, tensor: Any) -> tuple[str, str, list[int], bytes]:
    """A tensor as plain data (name, dtype, shape, raw bytes): vLLM's RPC serializer turns
    bare tensors inside argument lists into nested lists, so they travel as bytes."""
    import torch

    t = tensor.detach().to("cpu").contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
    return name, str(t.dtype).removeprefix("torch."), list(t.shape), raw


def unpack(packed: Iterable[Any]) -> tuple[str, Any]:
    import torch

    name, dtype, shape, raw = packed
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    return name, flat.view(getattr(torch, dtype)).reshape(shape)


class WeightLoader:
    def tir_load_weights(self, packed: Iterable[Any]) -> int:
        """Load packed ``(name, dtype, shape, bytes)`` weights in checkpoint (Hugging Face)
        format; returns how many tensors were given.

        Uses the worker's ``reload_weights`` where vLLM has it: it restores each layer's
        loaders, loads, and re-runs the post-load processing (the CPU backend repacks linear
        weights after loading, so a plain ``model.load_weights`` no longer fits them).
        """
        pairs = [unpack(p) for p in packed]
        reload = getattr(self, "reload_weights", None)
        if reload is not None:
            reload(weights_iterator=iter(pairs), is_checkpoint_format=True)
        else:
            model = self.model_runner.get_model()  # type: ignore[attr-defined]
            device = next(model.parameters()).device
            model.load_weights((name, t.to(device)) for name, t in pairs)
        return len(pairs)
