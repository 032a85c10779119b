"""The faiss side of dense retrieval: make, train, fill, save and open an inner-product index.

An index is named by a faiss factory string (faiss's own vocabulary, so its documentation
applies as is): ``Flat`` (exact; FlashRAG's and Search-R1's e5 index), ``IVF4096,Flat``
(inverted lists: ``nprobe`` of them searched per query), ``HNSW32`` (a graph: ``efSearch``
candidates), ``PQ64`` (product quantisation: 64 bytes a passage), ``IVF4096,PQ64``.  The
metric is always inner product over unit vectors (cosine).  Search settings (``nprobe``,
``efSearch``) are applied when the index is opened, so one build serves several trade-offs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

#: the search-time settings a user may give, by faiss's ParameterSpace names
SEARCH_PARAMS = ("nprobe", "efSearch")
#: what an index type is, for the manifest and errors
_FAMILIES = (("IVF", "ivf"), ("HNSW", "hnsw"), ("PQ", "pq"), ("Flat", "flat"))


def faiss_module():
    try:
        import faiss
    except ImportError:
        raise ImportError("dense retrieval needs faiss: pip install 'tir-envs[dense]'") from None
    return faiss


def make_index(dim: int, spec: str):
    """A new inner-product index of ``dim`` dimensions described by the factory ``spec``."""
    faiss = faiss_module()
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("the faiss index type must be a factory string such as 'Flat', "
                         "'IVF4096,Flat', 'HNSW32', 'PQ64' or 'IVF4096,PQ64'")
    try:
        return faiss.index_factory(int(dim), spec.strip(), faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        why = _why(exc)
        raise ValueError(f"faiss cannot make the index {spec!r} (dimension {dim}): {why}; use "
                         "a faiss factory string such as 'Flat', 'IVF4096,Flat', 'HNSW32', "
                         "'PQ64' or 'IVF4096,PQ64' (for PQm, m must divide the dimension)") \
            from None


def family(spec: str) -> str:
    """``ivf``, ``hnsw``, ``pq`` or ``flat``: the kind of search ``spec`` makes."""
    for token, name in _FAMILIES:
        if token in spec:
            return name
    return "other"


def min_training_vectors(index: Any) -> int:
    """How many vectors ``index`` needs to train (0 if none): faiss refuses fewer than the
    number of centroids it fits (IVF lists, 2^bits PQ codes per sub-quantiser)."""
    if index.is_trained:
        return 0
    faiss = faiss_module()
    ivf = faiss.try_extract_index_ivf(index)
    need = int(ivf.nlist) if ivf is not None else 1
    for holder in (index, ivf):  # IndexPQ, IndexIVFPQ: 2^nbits codes per sub-quantiser
        pq = getattr(faiss.downcast_index(holder), "pq", None) if holder is not None else None
        if pq is not None:
            need = max(need, 1 << int(pq.nbits))
    return need


def train(index: Any, vectors: np.ndarray, spec: str) -> None:
    """Train ``index`` on ``vectors`` (a sample of the corpus), or say how many it needs."""
    need = min_training_vectors(index)
    if len(vectors) < need:
        raise ValueError(f"the faiss index {spec!r} needs at least {need:,} training vectors "
                         f"but the corpus gave {len(vectors):,}; choose a smaller one (fewer "
                         "IVF lists, e.g. IVF{n} with n about sqrt(documents), or fewer PQ "
                         "bits) or 'Flat' for a small corpus")
    try:
        index.train(np.ascontiguousarray(vectors, dtype=np.float32))
    except RuntimeError as exc:
        raise ValueError(f"faiss could not train the index {spec!r} on {len(vectors):,} "
                         f"vectors: {_why(exc)}") from None


def set_search_params(index: Any, params: Mapping[str, Any]) -> dict[str, int]:
    """Apply ``nprobe`` / ``efSearch`` where the index has them; returns those applied."""
    faiss = faiss_module()
    unknown = set(params) - set(SEARCH_PARAMS)
    if unknown:
        raise ValueError(f"unknown faiss search setting(s) {sorted(unknown)}; known: "
                         f"{', '.join(SEARCH_PARAMS)}")
    applied = {}
    space = faiss.ParameterSpace()
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if name == "nprobe" and faiss.try_extract_index_ivf(index) is None:
            continue
        if name == "efSearch" and not hasattr(faiss.downcast_index(index), "hnsw"):
            continue
        space.set_index_parameter(index, name, value)
        applied[name] = value
    return applied


def write_index(index: Any, path: Path) -> None:
    faiss_module().write_index(index, str(path))


def read_index(path: str | Path, mmap: bool = False):
    """Open a faiss index file; ``mmap``: map its vectors (many processes share one copy in
    the page cache, and an index larger than memory is read as searched)."""
    faiss = faiss_module()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"faiss index file {path} does not exist")
    flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if mmap else 0
    try:
        return faiss.read_index(str(path), flags)
    except RuntimeError as exc:
        raise ValueError(f"{path} is not a faiss index faiss can read: "
                         f"{_why(exc)}") from None


def describe_index(index: Any) -> dict[str, Any]:
    """Type, size and metric of an open index, for the manifest and ``/health``."""
    faiss = faiss_module()
    inner = faiss.downcast_index(index)
    metric = "inner_product" if index.metric_type == faiss.METRIC_INNER_PRODUCT else \
        ("l2" if index.metric_type == faiss.METRIC_L2 else str(index.metric_type))
    return {"faiss_class": type(inner).__name__, "dim": int(index.d),
            "ntotal": int(index.ntotal), "metric": metric}



def _why(exc: Exception) -> str:
    """The reason in a faiss C++ error, without its source location."""
    text = " ".join(str(exc).split())
    for marker in ("failed: ", "Error: ", "): "):
        if marker in text:
            text = text.rsplit(marker, 1)[-1]
            break
    return text[:240]
