import pytest

from tests.fixtures.tiny import qwen_tokenizer, tiny_tokenizer


@pytest.fixture(scope="session")
def qwen_tok():
    """The real Qwen2.5 tokenizer (bundled vocab + merges, 22 added tokens, ChatML)."""
    return qwen_tokenizer()


@pytest.fixture(scope="session")
def tiny_tok():
    return tiny_tokenizer()
