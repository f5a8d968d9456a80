"""Search's Python side, a layer just above the registry: the embedding model behind semantic
search (`embedders.py`: the `Embedder` seam, the bundled `LocalWordLlama`, an
`OpenAICompatible` API, `embedder_from_settings`) and storing the registry's pending
embeddings (`sync.py`: `embed_pending`, and `embed_published` after a publish). The ranking
itself is SQL (public.search_tools); `query.py` and `local.py` read queries and search the
local spaces.

Importing this package loads neither numpy nor a model: the bundled model loads on its first
`embed`, once per process.
"""

from .embedders import (
    DIMENSIONS,
    Embedder,
    EmbeddingError,
    LocalWordLlama,
    OpenAICompatible,
    embedder_from_settings,
)
from .sync import ProgressBar, embed_pending, embed_published

__all__ = [
    "DIMENSIONS",
    "Embedder",
    "EmbeddingError",
    "LocalWordLlama",
    "OpenAICompatible",
    "ProgressBar",
    "embed_pending",
    "embed_published",
    "embedder_from_settings",
]
