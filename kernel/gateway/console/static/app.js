// The console's shell: its words, the API client (the sign-in cookie and the CSRF
// token the sign-in answer gave, kept in this tab's sessionStorage: the cookie alone
// opens nothing), element helpers and the router.
// Each page is a module page-<name>.js exporting render(main) (and, optionally,
// leave() called when another page is shown).

export const TOKEN = "kernel.console.csrf";
export const state = {
  csrf: sessionStorage.getItem(TOKEN) || "", strings: {}, language: "zh", timezone: "UTC",
};

export function t(key, vars = {}) {
  const text = state.strings[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (whole, name) => (name in vars ? String(vars[name]) : whole));
}

// A time as the owner reads it: in general.timezone (never the browser's zone), as
// "YYYY-MM-DD HH:MM" (the TUI's and the CLI's shape); dateOnly: "YYYY-MM-DD". A zone
// this browser does not know (an older ICU than the server's) reads in UTC, said so.
export function localTime(iso, dateOnly = false) {
  const date = new Date(iso || "");
  if (Number.isNaN(date.getTime())) return iso || "";
  const parts = {};
  const [format, suffix] = zoneFormat();
  for (const part of format.formatToParts(date)) parts[part.type] = part.value;
  const day = `${parts.year}-${parts.month}-${parts.day}`;
  return (dateOnly ? day : `${day} ${parts.hour}:${parts.minute}`) + suffix;
}

const SHAPE = { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hourCycle: "h23" };

function zoneFormat() {
  try {
    return [new Intl.DateTimeFormat("en-CA", { ...SHAPE, timeZone: state.timezone }), ""];
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    return [new Intl.DateTimeFormat("en-CA", { ...SHAPE, timeZone: "UTC" }), " UTC"];
  }
}

export class ApiFailure extends Error {
  constructor(status, error) {
    super(error?.message || String(status));
    this.status = status;
    this.code = error?.code || "";
    this.details = error?.details || {};
  }
}

function headersFor(method, body) {
  const headers = { Accept: "application/json", "X-CSRF-Token": state.csrf };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  return headers;
}

// A documented sidecar route, as JSON. A 401 (the sign-in expired) goes to sign-in.
export async function api(method, path, body) {
  const response = await request(method, path, body);
  const type = response.headers.get("Content-Type") || "";
  const data = type.includes("json") ? await response.json() : null;
  if (!response.ok) throw new ApiFailure(response.status, data?.error);
  return data;
}

// The raw response (for streams: /agent/process with stream=true is SSE over POST).
export async function request(method, path, body, signal) {
  const response = await fetch(path, {
    method,
    headers: headersFor(method, body),
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
    signal,
  });
  if (response.status === 401) {
    sessionStorage.removeItem(TOKEN);
    location.assign("/console/login");
    throw new ApiFailure(401, { message: t("web.signed_out") });
  }
  return response;
}

// Server-sent events of a streamed response: yields {event, data} (data parsed JSON,
// or the text "[DONE]").
export async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const lines = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) lines.push(line.slice(5).trimStart());
      }
      if (!lines.length) continue;
      const text = lines.join("\n");
      yield { event, data: text === "[DONE]" ? text : JSON.parse(text) };
    }
  }
}

// An element with attributes (on* take functions) and children (strings become text:
// nothing is ever parsed as HTML).
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// A one-line notice at the top of the page (errors in red).
export function notify(text, error = false) {
  const box = document.getElementById("notice") || el("p", { id: "notice", role: "status" });
  box.className = error ? "notice error" : "notice";
  box.textContent = text;
  document.getElementById("main").before(box);
  clearTimeout(notify.timer);
  notify.timer = setTimeout(() => box.remove(), 6000);
}

export function failed(error) {
  notify(error instanceof ApiFailure ? error.message : String(error), true);
}

export const PAGES = ["chat", "sessions", "memories", "jobs", "tasks", "usage", "asks", "skills", "settings", "audit"];
let current = null;
let shows = 0; // a page whose script arrives after a newer choice is never drawn

async function show() {
  if (linkOpened()) return;
  const mine = ++shows;
  const wanted = location.hash.slice(1).split("/")[0];
  const name = PAGES.includes(wanted) ? wanted : "chat";
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.page === name);
  }
  if (current?.leave) current.leave();
  const main = document.getElementById("main");
  main.replaceChildren();
  try {
    const page = await import(`./page-${name}.js`);
    if (mine !== shows) return;
    current = page;
    await page.render(main);
  } catch (error) {
    if (mine !== shows) return;
    current = null;
    failed(error);
  }
}

// kernel console's link (#signin=…) is the sign-in page's to spend, also when it is
// opened in a tab already signed in (only the fragment changes: no new page).
function linkOpened() {
  if (!location.hash.startsWith("#signin=")) return false;
  location.replace("/console/login" + location.hash);
  return true;
}

async function boot() {
  if (linkOpened()) return;
  if (!state.csrf) {  // a new tab, or signed out: the cookie alone is not a sign-in
    location.assign("/console/login");
    return;
  }
  const [words] = await Promise.all([
    fetch("/console/strings").then((r) => r.json()),
    api("GET", "/console/session"),
  ]);
  state.strings = words.strings;
  state.language = words.language;
  state.timezone = words.timezone || "UTC";
  document.documentElement.lang = words.language;
  document.title = t("web.title");
  const nav = document.getElementById("nav");
  nav.replaceChildren(
    ...PAGES.map((page) => el("a", { href: `#${page}`, "data-page": page }, t(`web.nav.${page}`))),
  );
  const out = document.getElementById("sign-out");
  out.textContent = t("web.sign_out");
  out.addEventListener("click", async () => {
    try {
      await api("POST", "/console/logout");
    } finally {
      sessionStorage.removeItem(TOKEN);
      location.assign("/console/login");
    }
  });
  window.addEventListener("hashchange", show);
  await show();
}

boot().catch(failed);
