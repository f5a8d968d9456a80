"""One version's paths are one name each once Unicode is normalised (NFC) and case ignored.

`café` precomposed beside `café` decomposed, or `Readme` beside `README`, were published as
two files; a filesystem that normalises names or ignores case keeps only one. Publish now
refuses the second, naming both paths and the first one's position.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

import pytest

from tests.security.publishing import Publisher, publishing, script


@pytest.fixture
def publisher(database_url: str) -> Iterator[Publisher]:
    with publishing(database_url) as p:
        yield p


NFC = unicodedata.normalize("NFC", "café.txt")
NFD = unicodedata.normalize("NFD", "café.txt")


@pytest.mark.parametrize(("first", "second"), [(NFC, NFD), ("Readme", "README"), ("docs/Guide.md", "DOCS/guide.md")])
def test_two_paths_one_name_are_refused_naming_both(publisher: Publisher, first: str, second: str) -> None:
    assert first != second
    files = [script("run.sh"), script(first, "a"), script(second, "b")]
    message = publisher.refusal(publisher.manifest(entrypoint="run.sh"), files)
    assert f'files[3].path: "{second}" and "{first}" (files[2]) are one name once Unicode is normalised' in message


def test_a_file_beside_a_directory_of_another_case_is_refused(publisher: Publisher) -> None:
    files = [script("run.sh"), script("x", "a"), script("X/y", "b")]
    message = publisher.refusal(publisher.manifest(entrypoint="run.sh"), files)
    assert 'files[2].path: "x" is a file, but "X/y" needs it to be a directory' in message


def test_distinct_names_are_published(publisher: Publisher) -> None:
    files = [script("run.sh"), script(NFC, "a"), script("cafe.txt", "b"), script("Readme.md"), script("readme.txt")]
    assert publisher.publish(publisher.manifest(entrypoint="run.sh"), files)["created"] is True
