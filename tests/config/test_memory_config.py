"""[memory.embeddings] (issue 39): documented defaults, a provider lending its key, the
environment's key, and refusals naming the key and the fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernel.config import EmbeddingsConfig, load_config
from kernel.config.secrets import secrets_of
from kernel.core.errors import ConfigError
from tests.config.test_config import BASE_ENV, REPO


def load(tmp_path: Path, text: str, **env: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, env={**BASE_ENV, **env})


def documented() -> str:
    """The example's commented [memory.embeddings] block, switched on."""
    example = (REPO / "config.example.toml").read_text(encoding="utf-8")
    block = example.split("# [memory.embeddings]\n", 1)[1].split("\n\n", 1)[0]
    keys = [re.sub(r"\s+#.*$", "", line[2:]) for line in block.splitlines()]
    return "[memory.embeddings]\n" + "\n".join(keys) + "\n"


def test_the_documented_keys_are_the_defaults_and_without_it_nothing(tmp_path: Path) -> None:
    assert load(tmp_path, "").memory.embeddings is None
    text = documented()
    assert text.count("=") == 11, text
    config = load(tmp_path, text, KERNEL_EMBEDDINGS_API_KEY="sk-emb-0123456789")
    expected = EmbeddingsConfig(base_url="https://api.openai.com/v1", api_key="sk-emb-0123456789")
    assert config.memory.embeddings == expected
    assert "sk-emb-0123456789" in secrets_of(config)  # kept out of logs
    assert not [w for w in config.warnings if "memory" in w]


def test_a_provider_lends_its_key_and_address(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        '[general]\ndefault_provider = "lender"\n[providers.lender]\napi_base = "https://api.openai.com/v1/"\n'
        'api_key = "sk-openai-0123456789"\ndefault_model = "gpt"\n'
        '[memory.embeddings]\nprovider = "lender"\ndimensions = 512\n',
    )
    cfg = config.memory.embeddings
    assert (cfg.base_url, cfg.api_key, cfg.dimensions) == (
        "https://api.openai.com/v1",
        "sk-openai-0123456789",
        512,
    )
    local = load(tmp_path, '[memory.embeddings]\nbase_url = "http://127.0.0.1:11434/v1/"\n')
    assert (local.memory.embeddings.base_url, local.memory.embeddings.api_key) == (
        "http://127.0.0.1:11434/v1",
        "",
    )


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ('[memory.embeddings]\nprovider = "nope"\n', "memory.embeddings.provider", "nope"),
        ('[memory.embeddings]\nbase_url = ""\n', "memory.embeddings.base_url", "11434"),
        ("[memory.embeddings]\nmin_similarity = 2\n", "memory.embeddings.min_similarity", "2"),
        ("[memory.embeddings]\nbatch_size = 0\n", "memory.embeddings.batch_size", "1-2048"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(
    tmp_path: Path, text: str, key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text.replace('base_url = ""', 'base_url = ""\nmodel = "m"'))
    assert caught.value.key == key and key in str(caught.value) and words in str(caught.value)
