"""Search tokens from text with jieba, loaded lazily; FTS5 queries built from them.

jieba takes a fraction of a second to import, more to load its dictionary, and tens of
MiB, so nothing imports it until a memory operation needs tokens. It then loads once
per process, in a worker thread, with its dictionary cache under the data directory
(jieba writes it to the system temp folder by default) and its log lines sent to
Kernel's log at debug level (jieba prints them to stderr by default).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

from kernel.core.errors import StoreError

log = logging.getLogger(__name__)

CACHE_FILE = "jieba.cache"
# A pasted document is not a query: only its start is cut, and only so many terms
# (each one is an OR branch in FTS5 or a LIKE scan) are used.
MAX_QUERY_CHARS = 2000
MAX_QUERY_TERMS = 32

# Function words that match nearly every memory; dropped from queries (not from the
# index) unless a query has nothing else.
_STOPWORD_LIST = """
    的 了 是 在 我 你 您 他 她 它 们 我们 你们 他们 她们 和 与 及 或 也 都 就 还 吗 呢 吧 啊
    呀 哦 嗯 这 那 这个 那个 这些 那些 有 一个 一下 什么 怎么 怎么样 为什么 哪 哪里 谁 请 帮 帮我
    可以 能 会 要 想 把 被 给 对 从 到 上 下 里 么 之 以 而 着 过 得 地 个 吗 嘛 呗 啦 哈 又
    a an the and or but if of to in on at by for with from as is are was were be been being
    am i me my mine you your yours he him his she her it its we us our they them their this
    that these those do does did have has had not no so than then there here what which who
    whom how why when where can could would should will shall may might must just about
    into over also very please tell know let s t don
"""
STOPWORDS = frozenset(_STOPWORD_LIST.split())

_lock = threading.Lock()
_cut: Callable[[str], Iterable[str]] | None = None


class _ToKernelLog(logging.Handler):
    """jieba's chatter at debug level in Kernel's log; its warnings and errors as they are."""

    def emit(self, record: logging.LogRecord) -> None:
        level = record.levelno if record.levelno >= logging.WARNING else logging.DEBUG
        log.log(level, "jieba: %s", record.getMessage())


def _load(cache_dir: Path) -> Callable[[str], Iterable[str]]:
    global _cut
    with _lock:
        if _cut is not None:
            return _cut
        try:
            with warnings.catch_warnings():
                # jieba 0.42's own source has invalid escape sequences (a compile-time
                # DeprecationWarning) and may import the deprecated pkg_resources.
                warnings.simplefilter("ignore")
                import jieba

                jieba_log = logging.getLogger("jieba")
                for handler in list(jieba_log.handlers):
                    jieba_log.removeHandler(handler)
                jieba_log.addHandler(_ToKernelLog())
                jieba_log.propagate = False
                cache_dir.mkdir(parents=True, exist_ok=True)
                jieba.dt.tmp_dir = str(cache_dir)
                jieba.dt.cache_file = CACHE_FILE
                before = set(cache_dir.iterdir())
                try:
                    jieba.dt.initialize()
                finally:
                    _drop_partial_dumps(cache_dir, before)
        except (ImportError, OSError) as exc:
            raise StoreError(f"the word segmenter (jieba) could not load: {exc}") from exc
        _cut = jieba.dt.cut_for_search
        log.info("jieba loaded (dictionary cache in %s)", cache_dir)
        return _cut


def _drop_partial_dumps(cache_dir: Path, before: set[Path]) -> None:
    """jieba writes its cache to a temporary file beside it, then renames it; a dump that
    fails (a full disk) leaves that file (``tempfile.mkstemp``'s ``tmp…``), megabytes the
    database then cannot have: a new one is removed."""
    for path in set(cache_dir.iterdir()) - before:
        if path.name.startswith("tmp") and path.name != CACHE_FILE:
            path.unlink(missing_ok=True)


class Tokenizer:
    """jieba ``cut_for_search`` for one Kernel; the dictionary is shared per process."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir

    @property
    def loaded(self) -> bool:
        return _cut is not None

    async def load(self) -> None:
        """Load jieba once, off the event loop; concurrent callers wait for the same load."""
        if _cut is None:
            await asyncio.to_thread(_load, self.cache_dir)

    def _cut_words(self, text: str) -> list[str]:
        cut = _cut if _cut is not None else _load(self.cache_dir)
        words: list[str] = []
        for token in cut(text.replace("\0", " ")):
            # Lower-cased here so dedupe and stopwords agree with FTS5's own folding;
            # punctuation and spaces carry nothing to search for.
            for word in token.lower().split():
                if any(c.isalnum() for c in word):
                    words.append(word)
        return words

    def index_text(self, text: str) -> str:
        """The tokens stored in the full-text index for ``text``, space-separated.
        Blocking: call it in a thread."""
        return " ".join(self._cut_words(text))

    def query_terms(self, text: str) -> list[str]:
        """Distinct search terms of a query, in order, stopwords dropped unless nothing
        else is left. Blocking: call it in a thread."""
        words = list(dict.fromkeys(self._cut_words(text[:MAX_QUERY_CHARS])))
        meaningful = [w for w in words if w not in STOPWORDS]
        return (meaningful or words)[:MAX_QUERY_TERMS]


def fts_query(terms: Iterable[str]) -> str:
    """An FTS5 MATCH expression that ORs ``terms``, each a quoted string, so that no
    term can act as FTS5 syntax (quotes, AND/OR/NOT/NEAR, ``*``, ``^``, ``-``,
    parentheses, column filters): inside quotes only ``"`` is special, and it is doubled.
    NUL would end the query string early, so it is dropped.
    """
    quoted = ('"' + term.replace("\0", "").replace('"', '""') + '"' for term in terms if term)
    return " OR ".join(quoted)
