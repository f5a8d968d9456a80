"""The embedding seam: the bundled model for real, and OpenAICompatible against a FAKE
OpenAI-compatible server on localhost (tests/search/fake_embeddings.py)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner import (
    ConfigError,
    EmbeddingError,
    LocalWordLlama,
    OpenAICompatible,
    Settings,
    UsageError,
    embedder_from_settings,
)
from runner.search import DIMENSIONS
from tests.conftest import ROOT
from tests.search.fake_embeddings import fake_embeddings_server


def norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# -- the bundled model ------------------------------------------------------------------------


def test_local_vectors_are_256_numbers_of_length_one() -> None:
    vectors = LocalWordLlama().embed(["create a pull request", "send a slack message", "x"])
    assert [len(v) for v in vectors] == [DIMENSIONS] * 3
    assert all(abs(norm(v) - 1) < 1e-5 for v in vectors)
    assert all(isinstance(x, float) for x in vectors[0])


def test_local_vectors_are_the_same_for_the_same_text_alone_or_in_a_batch() -> None:
    model = LocalWordLlama()
    alone = model.embed(["query a postgres database"])[0]
    batched = model.embed(["a much longer text, so the batch is padded differently", "query a postgres database"])[1]
    assert alone == batched == LocalWordLlama().embed(["query a postgres database"])[0]


def test_similar_sentences_are_closer_than_unrelated_ones() -> None:
    q, near, far = LocalWordLlama().embed(
        ["send a message to a slack channel", "post a chat message to a channel", "compute the square root of a number"]
    )
    assert cosine(q, near) > cosine(q, far) + 0.2


@pytest.mark.slow
def test_local_model_agrees_with_wordllamas_own_embed() -> None:
    """Read from the wheel's files directly, the vectors are those wordllama itself computes."""
    from importlib.resources import files

    from safetensors import safe_open
    from tokenizers import Tokenizer
    from wordllama.inference import WordLlamaInference

    root = files("wordllama")
    tok = Tokenizer.from_file(str(root / "tokenizers/l2_supercat_tokenizer_config.json"))
    with safe_open(str(root / "weights/l2_supercat_256.safetensors"), framework="np", device="cpu") as f:
        theirs = WordLlamaInference(f.get_tensor("embedding.weight"), tok).embed(
            ["count words in text", "forecast the weather for a city"], norm=True
        )
    ours = LocalWordLlama().embed(["count words in text", "forecast the weather for a city"])
    pairs = zip(ours, theirs.tolist(), strict=True)
    assert max(abs(a - b) for mine, its in pairs for a, b in zip(mine, its, strict=True)) < 1e-5


def test_nothing_to_embed_and_a_text_of_no_words() -> None:
    model = LocalWordLlama()
    assert model.embed([]) == []
    assert model.embed([""]) == [[0.0] * DIMENSIONS]  # no tokens, no direction (never NaN)


def test_a_query_embeds_in_well_under_five_milliseconds() -> None:
    model = LocalWordLlama()
    model.embed(["warm up"])
    started = time.perf_counter()
    for _ in range(50):
        model.embed(["find the tool that lists open pull requests on github"])
    assert (time.perf_counter() - started) / 50 < 0.005


@pytest.mark.slow
def test_importing_runner_search_loads_no_model_and_embedding_leaves_logging_alone() -> None:
    """The CLI's start-up: numpy, the tokenizer, wordllama and httpx load only when used; and
    wordllama's package (which configures the root logger at import) is never imported."""
    code = (
        "import sys, json, logging\n"
        "import runner.search\n"
        "heavy = ('numpy', 'tokenizers', 'safetensors', 'wordllama', 'httpx')\n"
        "before = [m for m in heavy if m in sys.modules]\n"
        "runner.search.LocalWordLlama().embed(['hello'])\n"
        "print(json.dumps({'before': before, 'wordllama': 'wordllama' in sys.modules,\n"
        "                  'root_handlers': len(logging.getLogger().handlers)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == {"before": [], "wordllama": False, "root_handlers": 0}


# -- choosing the model -----------------------------------------------------------------------


def settings(**env: str) -> Settings:
    return Settings.load({"HOME": "/nonexistent", **env}, Path("/nonexistent/config.toml"))


def test_the_default_is_the_local_model_and_off_is_none() -> None:
    assert isinstance(embedder_from_settings(settings()), LocalWordLlama)
    assert embedder_from_settings(settings(KIWI_EMBEDDINGS="off")) is None


def test_openai_reads_its_key_from_the_variable_named_once_and_never_shows_it() -> None:
    s = settings(KIWI_EMBEDDINGS="openai", KIWI_EMBEDDINGS_KEY="${MY_EMBED_KEY}")
    assert "MY_EMBED_KEY" not in repr(s) and "sk-" not in repr(s)
    embedder = embedder_from_settings(s, {"MY_EMBED_KEY": "sk-secret-123"})
    assert isinstance(embedder, OpenAICompatible)
    assert (embedder.url, embedder.api_model, embedder.model) == (
        "https://api.openai.com/v1",
        "text-embedding-3-small",
        "openai/text-embedding-3-small",
    )
    assert "sk-secret-123" not in repr(embedder)


def test_an_unset_key_variable_is_an_error_naming_it() -> None:
    s = settings(KIWI_EMBEDDINGS="openai", KIWI_EMBEDDINGS_KEY="${NOT_SET_ANYWHERE}")
    with pytest.raises(ConfigError, match="NOT_SET_ANYWHERE is not set"):
        embedder_from_settings(s, {})


def test_a_key_written_as_itself_is_refused_naming_the_variable_form() -> None:
    """Secrets only as ${VAR}: a literal key in a setting would end up in files and logs."""
    s = settings(KIWI_EMBEDDINGS="openai", KIWI_EMBEDDINGS_KEY="sk-literal-key")
    with pytest.raises(EmbeddingError, match="holds a key itself") as caught:
        embedder_from_settings(s, {})
    assert "sk-literal-key" not in str(caught.value) + (caught.value.hint or "")


def test_config_toml_chooses_the_provider_and_environment_wins(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[embeddings]\nprovider = "openai"\nmodel = "m-1"\nurl = "http://127.0.0.1:9/v1"\nkey = "${K}"\n')
    from_file = Settings.load({"HOME": str(tmp_path)}, config)
    assert (from_file.embeddings, from_file.embeddings_model, from_file.embeddings_key) == ("openai", "m-1", "${K}")
    assert Settings.load({"HOME": str(tmp_path), "KIWI_EMBEDDINGS": "off"}, config).embeddings == "off"


def test_an_unknown_model_kind_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown KIWI_EMBEDDINGS 'bert'"):
        settings(KIWI_EMBEDDINGS="bert")


# -- OpenAICompatible against the fake server -------------------------------------------------


@pytest.mark.slow
def test_openai_compatible_sends_the_request_the_api_expects_and_normalises_the_answer() -> None:
    with fake_embeddings_server() as fake:
        s = settings(
            KIWI_EMBEDDINGS="openai",
            KIWI_EMBEDDINGS_URL=fake.url + "/",
            KIWI_EMBEDDINGS_MODEL="text-embedding-3-large",
            KIWI_EMBEDDINGS_KEY="${FAKE_KEY}",
        )
        embedder = embedder_from_settings(s, {"FAKE_KEY": "sk-fake-key"})
        assert embedder is not None
        vectors = embedder.embed(["alpha", "beta", "gamma"])
    (request,) = fake.requests
    assert request["path"] == "/v1/embeddings"
    assert request["headers"]["Authorization"] == "Bearer sk-fake-key"
    body = {"model": "text-embedding-3-large", "input": ["alpha", "beta", "gamma"], "dimensions": 256}
    assert request["body"] == body
    # answered in reversed index order and not normalised: put back in order, scaled to length 1
    for text, vector in zip(["alpha", "beta", "gamma"], vectors, strict=True):
        raw = fake.vector(text, DIMENSIONS)
        assert abs(norm(vector) - 1) < 1e-9
        assert max(abs(a - b / norm(raw)) for a, b in zip(vector, raw, strict=True)) < 1e-12


@pytest.mark.slow
def test_without_a_key_no_authorization_is_sent() -> None:
    with fake_embeddings_server() as fake:
        OpenAICompatible(fake.url, "m").embed(["x"])
    assert "Authorization" not in fake.requests[0]["headers"]


@pytest.mark.slow
def test_vectors_of_another_size_are_a_clear_error() -> None:
    with fake_embeddings_server(dimensions=384) as fake, pytest.raises(EmbeddingError) as caught:
        OpenAICompatible(fake.url, "all-minilm").embed(["x"])
    assert "384 dimensions, not 256" in caught.value.message
    assert "dimensions=256" in (caught.value.hint or "")


@pytest.mark.slow
def test_an_http_error_says_the_status_and_the_apis_message_but_never_the_key() -> None:
    with (
        fake_embeddings_server(status=401, error_message="Incorrect API key provided: sk-leaky-key") as fake,
        pytest.raises(EmbeddingError) as caught,
    ):
        OpenAICompatible(fake.url, "m", "sk-leaky-key").embed(["x"])
    error = str(caught.value)
    assert "HTTP 401" in error and "Incorrect API key provided" in error
    assert "sk-leaky-key" not in error
    assert "KIWI_EMBEDDINGS_KEY" in (caught.value.hint or "")


@pytest.mark.slow
def test_a_server_error_and_a_slow_server_and_no_server_are_clear_errors() -> None:
    with fake_embeddings_server(status=503, error_message="overloaded") as fake, pytest.raises(EmbeddingError) as e1:
        OpenAICompatible(fake.url, "m").embed(["x"])
    assert "HTTP 503: overloaded" in e1.value.message
    with fake_embeddings_server(delay_s=2) as fake, pytest.raises(EmbeddingError) as e2:
        OpenAICompatible(fake.url, "m", timeout=0.3).embed(["x"])
    assert "did not answer within 0.3 s" in e2.value.message
    with fake_embeddings_server() as fake:
        gone = fake.url
    with pytest.raises(EmbeddingError) as e3:
        OpenAICompatible(gone, "m").embed(["x"])
    assert "cannot reach the embeddings API" in e3.value.message


@pytest.mark.slow
def test_an_answer_that_is_not_embeddings_is_a_clear_error() -> None:
    with (
        fake_embeddings_server(other_answer={"status": "ok"}) as fake,
        pytest.raises(EmbeddingError, match="did not answer with embeddings"),
    ):
        OpenAICompatible(fake.url, "m").embed(["x"])
    with fake_embeddings_server() as fake, pytest.raises(EmbeddingError, match="HTTP 404: no such path"):
        OpenAICompatible(fake.url + "/embeddings", "m").embed(["x"])  # a wrong base URL


async def test_a_loaded_local_model_embeds_the_query_on_the_event_loop_and_a_hosted_one_off_it() -> None:
    """A worker-thread hop cost about 0.5 ms per MCP search against 0.03 ms of embedding: once the
    local model is loaded the query is embedded inline; a model still to load, or one behind an
    HTTP API, still goes to a thread so the server's other requests are not held."""
    import threading

    from runner.search.combined import embed_query

    seen: list[int] = []

    class Watched(LocalWordLlama):
        def embed(self, texts: list[str]) -> list[list[float]]:  # type: ignore[override]
            seen.append(threading.get_ident())
            return super().embed(texts)

    local = Watched()
    local.embed(["load the model"])
    assert local.inline
    seen.clear()
    assert (await embed_query(local, "convert a csv file")).vector
    assert seen == [threading.get_ident()], "the loaded local model was sent to a thread"

    class Hosted(Watched):
        inline = False  # as OpenAICompatible, which has no such attribute

    assert not getattr(OpenAICompatible("http://127.0.0.1:9/v1", "m"), "inline", False)
    seen.clear()
    assert (await embed_query(Hosted(), "convert a csv file")).vector
    assert seen and seen != [threading.get_ident()], "a hosted model's request ran on the event loop"
