// Settings, read-only: the configuration in effect (GET /config), every secret shown
// masked as the API masks it. Changes are made in config.toml (or through SelfOps).
// Above it, the owner's data as one download (GET /agent/export: a zip of Markdown,
// JSON Lines and CSV, what `kernel export` writes).
import { ApiFailure, api, el, failed, request, t } from "./app.js";

export async function render(main) {
  const box = el("div", { id: "settings" });
  const download = el("button", { type: "button", id: "export-download" }, t("web.export.download"));
  download.addEventListener("click", () => exportData(download));
  const exporting = el("p", { class: "muted" }, t("web.export.hint"), " ", download);
  main.append(el("h1", {}, t("web.nav.settings")), exporting, box);
  try {
    const data = await api("GET", "/config");
    box.append(el("p", { class: "muted" }, t("web.settings.hint", { path: data.path })));
    if (data.warnings?.length) {
      box.append(el("ul", { class: "settings-warnings error" }, ...data.warnings.map((w) => el("li", {}, w))));
    }
    for (const [name, value] of Object.entries(data.sections)) {
      box.append(section(name, value));
    }
  } catch (error) {
    failed(error);
  }
}

function section(name, value) {
  const rows = [];
  flatten("", value, rows);
  const body = rows.length
    ? el(
        "div",
        { class: "scroll" },
        el("table", { class: "settings-table" }, el("tbody", {}, ...rows.map(([key, text]) => el("tr", {}, el("th", {}, key), el("td", {}, text))))),
      )
    : el("p", { class: "muted" }, t("web.settings.none"));
  return el("details", { open: true, class: "card", "data-section": name }, el("summary", {}, `[${name}]`), body);
}

function isTable(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

// Nested tables become dotted keys; arrays of tables get their index (servers[0].name).
function flatten(prefix, value, rows) {
  if (isTable(value)) {
    const entries = Object.entries(value);
    if (!entries.length && prefix) rows.push([prefix, "{}"]);
    for (const [key, item] of entries) flatten(prefix ? `${prefix}.${key}` : key, item, rows);
  } else if (Array.isArray(value) && value.some((item) => isTable(item) || Array.isArray(item))) {
    value.forEach((item, index) => flatten(`${prefix}[${index}]`, item, rows));
  } else {
    rows.push([prefix, text(value)]);
  }
}

function text(value) {
  if (value === null || value === undefined) return "—";
  if (Array.isArray(value)) return value.length ? value.map(text).join(", ") : "[]";
  if (value === "") return '""';
  return String(value);
}

// The zip fetched with the page's sign-in (the CSRF token is a header: a plain link
// cannot carry it), then handed to the browser as a file.
async function exportData(button) {
  button.disabled = true;
  try {
    const response = await request("GET", "/agent/export");
    if (!response.ok) throw new ApiFailure(response.status, (await response.json())?.error);
    const name = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "")?.[1];
    const link = el("a", { href: URL.createObjectURL(await response.blob()), download: name || "kernel-export.zip" });
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
  } catch (error) {
    failed(error);
  } finally {
    button.disabled = false;
  }
}
