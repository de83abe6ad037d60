"""What the browser tools do on a chat's page: open an address, read the page as text
with its links, buttons and inputs numbered, click or fill by number, find text, take
a screenshot.

The numbers are written into the page itself (a ``data-kernel-n`` attribute on each
visible link, button and input, in document order, at most ``[browser] max_items``) each
time the page is read, so a click names exactly the element the model was shown; any
click or fill reads the page again and the numbers start afresh. Everything read from
a page reaches the model inside an untrusted-content block.

The text is what the page shows (its visible text: a form's answer, what a button
revealed), and for a page longer than ``[browser] max_chars`` its main content as
web_fetch reads it (trafilatura through :func:`kernel.web.worker.extract`, off the
event loop): boilerplate goes before the article is cut.

Public API: :func:`open_url`, :func:`click`, :func:`fill`, :func:`find`,
:func:`screenshot`, :func:`read`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from typing import Any

from kernel.browser.session import Tab
from kernel.config import Config
from kernel.core.errors import ToolError
from kernel.core.i18n import t
from kernel.core.untrusted import untrusted
from kernel.web.fetch import checked_url
from kernel.web.worker import extract

log = logging.getLogger(__name__)

_BLANKS = re.compile(r"\n\s*\n\s*")
LABEL = 80  # characters of an element's label
FOUND = 20  # matches find returns at most
AROUND = 80  # characters of context each side of a match

# Marks the page's visible links, buttons and inputs with data-kernel-n (1, 2, …) and
# lists them; the old marks are removed first.
_NUMBER = """(max) => {
  const marked = document.querySelectorAll('[data-kernel-n]');
  for (const old of marked) old.removeAttribute('data-kernel-n');
  const wanted = 'a[href], button, input:not([type=hidden]), textarea, select, summary, '
    + '[role=button], [role=link], [role=checkbox], [role=tab], [contenteditable=""], '
    + '[contenteditable=true]';
  const out = [];
  for (const el of document.querySelectorAll(wanted)) {
    if (out.length >= max) break;
    const box = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    if ((box.width === 0 && box.height === 0) || style.visibility === 'hidden'
        || style.display === 'none' || el.disabled) continue;
    const tag = el.tagName.toLowerCase();
    const type = (el.getAttribute('type') || '').toLowerCase();
    let kind = 'button';
    if (tag === 'a' || el.getAttribute('role') === 'link') kind = 'link';
    else if (tag === 'select') kind = 'select';
    else if (tag === 'textarea' || el.isContentEditable) kind = 'input';
    else if (tag === 'input') {
      if (['submit', 'button', 'reset', 'image'].includes(type)) kind = 'button';
      else if (['checkbox', 'radio'].includes(type)) kind = type;
      else kind = 'input';
    }
    const n = out.length + 1;
    el.setAttribute('data-kernel-n', String(n));
    const said = (kind === 'input' || kind === 'select') ? '' : (el.innerText || el.value || '');
    const label = (said || el.getAttribute('aria-label') || el.getAttribute('placeholder')
      || el.getAttribute('title') || el.getAttribute('name') || el.getAttribute('alt') || '')
      .replace(/\\s+/g, ' ').trim();
    out.push({n, kind, type, label, href: tag === 'a' ? el.href : '',
              value: kind === 'input' ? String(el.value || '').slice(0, 80) : ''});
  }
  return out;
}"""


async def open_url(tab: Tab, url: str, config: Config) -> dict[str, Any]:
    """Open ``url`` in the chat's page (its redirects followed, each one checked) and
    read it."""
    checked_url(url)  # web_fetch's rules: http(s), no credentials, a host
    await _goto(tab, url.strip(), config)
    return await read(tab, config)


async def _goto(tab: Tab, url: str, config: Config) -> None:
    from playwright.async_api import Error

    for _ in range(config.web.max_redirects + 1):
        traffic = tab.traffic
        traffic.refusal, traffic.redirect = None, None
        try:
            await tab.page.goto(url, wait_until="domcontentloaded")
        except Error as exc:
            if traffic.refusal is not None:
                raise ToolError(traffic.refusal.text) from None
            if traffic.redirect is not None:
                url = traffic.redirect
                checked_url(url, redirect=True)
                continue
            log.info("browser: a page did not open (%s)", type(exc).__name__)
            raise ToolError(t("browser.failed", error=_first_line(exc))) from None
        return
    raise ToolError(
        f"the page redirected more than {config.web.max_redirects} times ([web] max_redirects)"
    )


async def _settle(tab: Tab, config: Config) -> None:
    """After a click or fill: wait for a navigation it started, follow a redirect it
    met (checked as a new navigation), say why one was refused."""
    with contextlib.suppress(Exception):
        await tab.page.wait_for_load_state(
            "domcontentloaded", timeout=config.browser.timeout * 1000
        )
    traffic = tab.traffic
    if traffic.refusal is not None:
        refusal, traffic.refusal = traffic.refusal, None
        raise ToolError(refusal.text)
    if traffic.redirect is not None:
        await _goto(tab, traffic.redirect, config)


async def read(tab: Tab, config: Config) -> dict[str, Any]:
    """The page as the model reads it: its address, its text (title first) and its
    numbered items, both inside untrusted-content blocks."""
    page = tab.page
    items = await page.evaluate(_NUMBER, config.browser.max_items)
    limit = config.browser.max_chars
    text = _BLANKS.sub("\n\n", (await page.inner_text("body")).strip())
    if len(text) > limit:  # a long page: its main content, as web_fetch reads it
        text = (await extract(await page.content(), within=config.web.fetch_timeout)).text
    listing = "\n".join(_item_line(item) for item in items)
    title = " ".join((await page.title()).split())[:300]
    if title and not text.startswith(title):
        text = f"# {title}\n\n{text}"  # inside the untrusted block, as web_fetch's title
    refused = tab.traffic.downloads
    tab.traffic.downloads = 0
    result: dict[str, Any] = {
        "url": page.url,
        "text": untrusted(page.url, text[:limit]),
        "truncated": len(text) > limit,
        "items": untrusted(page.url, listing or "(none)"),
    }
    if refused:
        result["downloads_refused"] = refused
    return result


def _item_line(item: dict[str, Any]) -> str:
    label = json.dumps(str(item.get("label", ""))[:LABEL], ensure_ascii=False)
    kind = str(item.get("kind", ""))
    line = f"[{item.get('n')}] {kind} {label}"
    if item.get("href"):
        line += f" -> {str(item['href'])[:300]}"
    if item.get("value"):
        line += f" = {json.dumps(str(item['value']), ensure_ascii=False)}"
    return line


def _element(tab: Tab, number: int) -> Any:
    return tab.page.locator(f'[data-kernel-n="{int(number)}"]')


async def _existing(tab: Tab, number: int) -> Any:
    element = _element(tab, number)
    if number < 1 or await element.count() == 0:
        raise ToolError(t("browser.no_number", number=number))
    return element.first


async def click(tab: Tab, number: int, config: Config) -> dict[str, Any]:
    """Click item ``number``, then read the page again (a new numbering)."""
    element = await _existing(tab, number)
    tab.traffic.refusal, tab.traffic.redirect = None, None
    try:
        await element.click()
    except Exception as exc:
        if tab.traffic.refusal is None:
            raise ToolError(t("browser.failed", error=_first_line(exc))) from None
    await _settle(tab, config)
    return await read(tab, config)


async def fill(tab: Tab, number: int, text: str, submit: bool, config: Config) -> dict[str, Any]:
    """Type ``text`` into input ``number`` (a select: choose that option; ``submit``:
    press Enter after), then read the page again."""
    element = await _existing(tab, number)
    kind = await element.evaluate(
        "(el) => el.tagName === 'SELECT' ? 'select' : ("
        "['INPUT', 'TEXTAREA'].includes(el.tagName) || el.isContentEditable ? 'input' : 'other')"
    )
    if kind == "other":
        raise ToolError(t("browser.not_fillable", number=number))
    tab.traffic.refusal, tab.traffic.redirect = None, None
    try:
        if kind == "select":
            await element.select_option(label=text)
        else:
            await element.fill(text)
        if submit:
            await element.press("Enter")
    except Exception as exc:
        if tab.traffic.refusal is None:
            raise ToolError(t("browser.failed", error=_first_line(exc))) from None
    await _settle(tab, config)
    return await read(tab, config)


async def find(tab: Tab, text: str) -> dict[str, Any]:
    """Where ``text`` occurs in the page's visible text (case-insensitive), with the
    words around each match."""
    needle = " ".join(text.split())
    if not needle:
        raise ToolError("say what to find: the text is empty")
    body = " ".join((await tab.page.inner_text("body")).split())
    lower, key = body.casefold(), needle.casefold()
    matches: list[str] = []
    start = lower.find(key)
    total = 0
    while start >= 0:
        total += 1
        if len(matches) < FOUND:
            left, right = max(0, start - AROUND), min(len(body), start + len(key) + AROUND)
            matches.append(body[left:right])
        start = lower.find(key, start + len(key))
    url = tab.page.url
    if not total:
        return {"url": url, "count": 0, "matches": t("browser.not_found", text=json.dumps(needle))}
    shown = "\n".join(f"{i}. …{m}…" for i, m in enumerate(matches, 1))
    return {"url": url, "count": total, "matches": untrusted(url, shown)}


async def screenshot(tab: Tab) -> tuple[bytes, str]:
    """The visible part of the page as PNG, and the page's title."""
    data: bytes = await tab.page.screenshot(type="png")
    return data, (await tab.page.title())[:200]


def _first_line(exc: BaseException) -> str:
    """An error's first line, without Playwright's call log (which quotes addresses)."""
    return (str(exc).split("\n", 1)[0] or type(exc).__name__)[:300]
