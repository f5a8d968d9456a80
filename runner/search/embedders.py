"""The embedding model behind semantic search, behind one small seam (`Embedder`).

An embedder turns texts into 256-dimension, L2-normalised vectors, and names itself (`model`):
that id is stored beside each vector, so vectors of different models never meet. Two models:

* `LocalWordLlama`: the 256-dimension English model the `wordllama` wheel ships (its token
  embeddings, averaged over a text's tokens). Nothing is downloaded: `WordLlama.load()` would
  fetch the tokenizer from Hugging Face, so the wheel's two files are read here directly.
  Loaded on the first `embed`, once per process; importing this module loads neither numpy
  nor the model (the CLI's start-up time), and wordllama's own package is never imported
  (it configures the root logger at import, and costs a quarter of a second more).
* `OpenAICompatible`: `POST {url}/embeddings {"model", "input", "dimensions": 256}`, the API
  OpenAI and many servers speak; its key is written as `${VAR}` and read from the environment
  once, when the embedder is made, and never shown (not in errors, not in repr).

`embedder_from_settings` picks one from KIWI_EMBEDDINGS (runner/config.py): local (the
default), openai, or off (None: search by words only).
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Mapping, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..config import Settings
from ..core.expand import expand_vars
from ..errors import KiwiError

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Tokenizer

__all__ = [
    "DIMENSIONS",
    "Embedder",
    "EmbeddingError",
    "LocalWordLlama",
    "OpenAICompatible",
    "embedder_from_settings",
]

DIMENSIONS = 256  # the column is extensions.vector(256)
OPENAI_BATCH = 2048  # the most inputs OpenAI's embeddings API takes in one request


class EmbeddingError(KiwiError):
    """The embedding model could not embed: it would not load, its API refused or did not answer,
    or it answered with vectors of the wrong shape."""

    kind = "embedding"


class Embedder(Protocol):
    """What embeds texts for search: one vector per text, L2-normalised, `dimensions` long."""

    model: str  # the id stored beside each vector, e.g. "wordllama/l2_supercat_256"
    dimensions: int  # always DIMENSIONS

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def normalised(vector: Sequence[float]) -> list[float]:
    """`vector` scaled to length 1; a zero vector (a text with no tokens) stays zero."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [float(x) / norm for x in vector] if norm > 0 else [0.0] * len(vector)


# -- the bundled model ------------------------------------------------------------------------

_WEIGHTS = "weights/l2_supercat_256.safetensors"
_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
_lock = threading.Lock()
_loaded: tuple[np.ndarray, Tokenizer] | None = None


def _wheel_dir() -> Path:
    """The installed wordllama package's folder, found without importing it."""
    spec = find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            "the local embedding model is missing: the wordllama package is not installed",
            hint="install the project's dependencies (uv sync), or set KIWI_EMBEDDINGS=off to search by words only",
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _wordllama() -> tuple[np.ndarray, Tokenizer]:
    """The model's token embeddings (float32, one row per token) and its tokenizer, loaded once."""
    global _loaded
    with _lock:
        if _loaded is None:
            root = _wheel_dir()
            try:
                from safetensors import safe_open
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(root / _TOKENIZER))
                tokenizer.no_padding()
                tokenizer.no_truncation()
                with safe_open(str(root / _WEIGHTS), framework="np", device="cpu") as f:
                    table = f.get_tensor("embedding.weight").astype("float32")
            except (OSError, ValueError, ImportError, KeyError, RuntimeError) as exc:  # a broken or partial wheel
                raise EmbeddingError(
                    f"the local embedding model could not be loaded from {root}: {exc}",
                    hint="reinstall the project's dependencies (uv sync), or set KIWI_EMBEDDINGS=off",
                ) from exc
            if table.ndim != 2 or table.shape[1] != DIMENSIONS:
                raise EmbeddingError(f"the local embedding model has shape {table.shape}, not (*, {DIMENSIONS})")
            _loaded = (table, tokenizer)
        return _loaded


class LocalWordLlama:
    """The wordllama wheel's 256-dimension model: a text's vector is the mean of its tokens'
    embeddings (as wordllama's own `embed` computes it), L2-normalised. CPU, no download."""

    model = "wordllama/l2_supercat_256"
    dimensions = DIMENSIONS

    def __repr__(self) -> str:
        return f"LocalWordLlama({self.model})"

    @property
    def inline(self) -> bool:
        """True once the model is loaded: embedding a query is then a few microseconds of
        CPU, cheaper on the caller's event loop than a hop to a worker thread."""
        return _loaded is not None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        import numpy as np

        table, tokenizer = _wordllama()
        last = table.shape[0] - 1
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, encoding in enumerate(tokenizer.encode_batch(list(texts), add_special_tokens=False)):
            if encoding.ids:
                ids = np.clip(np.asarray(encoding.ids, dtype=np.int64), 0, last)
                out[row] = table[ids].sum(axis=0, dtype=np.float32) / np.float32(len(ids))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out.tolist()


# -- a hosted model ---------------------------------------------------------------------------


class OpenAICompatible:
    """An OpenAI-compatible embeddings API (OpenAI itself, or any server speaking it), asked for
    256 dimensions. `key` is the key itself (already read from its variable); None sends none."""

    dimensions = DIMENSIONS

    def __init__(self, url: str, model: str, key: str | None = None, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.api_model = model
        self.model = f"openai/{model}"
        self.timeout = timeout
        self._key = key

    def __repr__(self) -> str:
        return f"OpenAICompatible({self.url}, {self.api_model})"  # never the key

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), OPENAI_BATCH):
            vectors += self._request(texts[start : start + OPENAI_BATCH])
        return vectors

    def _request(self, texts: list[str]) -> list[list[float]]:
        import httpx  # only for this model: the CLI's start-up does not pay for it

        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        body = {"model": self.api_model, "input": texts, "dimensions": DIMENSIONS}
        where = f"{self.url}/embeddings"
        try:
            response = httpx.post(where, json=body, headers=headers, timeout=self.timeout)
        except httpx.TimeoutException:
            raise EmbeddingError(
                f"the embeddings API at {where} did not answer within {self.timeout:g} s",
                hint="check KIWI_EMBEDDINGS_URL and the service; KIWI_EMBEDDINGS=local embeds here instead",
            ) from None
        except httpx.HTTPError as exc:
            raise EmbeddingError(
                f"cannot reach the embeddings API at {where}: {self._hide(str(exc)) or type(exc).__name__}",
                hint="check KIWI_EMBEDDINGS_URL and your network; KIWI_EMBEDDINGS=local embeds here instead",
            ) from None
        if response.status_code >= 400:
            raise self._refusal(response.status_code, response.text, where)
        return self._vectors(response, len(texts), where)

    def _refusal(self, status: int, text: str, where: str) -> EmbeddingError:
        """An HTTP error as a sentence: the status and the API's own message (key hidden)."""
        said = text.strip()
        try:
            error = json.loads(said).get("error")
            said = str(error.get("message") if isinstance(error, dict) else error or said)
        except (ValueError, AttributeError):
            pass
        said = self._hide(" ".join(said.split()))[:300]
        hint = (
            "check the key: KIWI_EMBEDDINGS_KEY names its variable, e.g. ${OPENAI_API_KEY}"
            if status in (401, 403)
            else f"check KIWI_EMBEDDINGS_MODEL ({self.api_model}) and KIWI_EMBEDDINGS_URL"
        )
        said = said or "no message"
        return EmbeddingError(f"the embeddings API at {where} answered HTTP {status}: {said}", hint=hint)

    def _vectors(self, response: Any, count: int, where: str) -> list[list[float]]:
        """The answer's vectors in input order, checked: one per text, DIMENSIONS numbers each."""
        try:
            rows = sorted(response.json()["data"], key=lambda row: row.get("index", 0))
            vectors = [row["embedding"] for row in rows]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EmbeddingError(
                f"the embeddings API at {where} did not answer with embeddings (no data[].embedding)",
                hint="KIWI_EMBEDDINGS_URL must be an OpenAI-compatible API's base URL, e.g. https://api.openai.com/v1",
            ) from None
        if len(vectors) != count:
            raise EmbeddingError(f"the embeddings API at {where} answered {len(vectors)} vectors for {count} texts")
        for vector in vectors:
            if not isinstance(vector, list) or len(vector) != DIMENSIONS:
                size = len(vector) if isinstance(vector, list) else type(vector).__name__
                raise EmbeddingError(
                    f"the embeddings API at {where} answered vectors of {size} dimensions, not {DIMENSIONS}",
                    hint=f"choose a model that takes dimensions={DIMENSIONS} (text-embedding-3-small or -large), "
                    "or KIWI_EMBEDDINGS=local",
                )
            if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in vector):
                raise EmbeddingError(f"the embeddings API at {where} answered a vector that is not all numbers")
        return [normalised(v) for v in vectors]

    def _hide(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text


def embedder_from_settings(
    settings: Settings, environ: Mapping[str, str] | None = None, *, timeout: float = 30.0
) -> Embedder | None:
    """The embedder KIWI_EMBEDDINGS names (None for off); an openai key's ${VAR} is read from
    `environ` (default: this process's environment) now, once."""
    if settings.embeddings == "off":
        return None
    if settings.embeddings == "openai":
        written = settings.embeddings_key
        if written and "${" not in written:  # secrets only as ${VAR}: never the key itself in a setting
            raise EmbeddingError(
                "KIWI_EMBEDDINGS_KEY (or [embeddings] key) holds a key itself",
                hint="write the variable that holds it instead, e.g. KIWI_EMBEDDINGS_KEY='${OPENAI_API_KEY}'",
            )
        key = expand_vars(written, os.environ if environ is None else environ) if written else None
        return OpenAICompatible(settings.embeddings_url, settings.embeddings_model, key or None, timeout=timeout)
    return LocalWordLlama()
