// Settings, read-only: the configuration in effect (GET /config), every secret shown
// masked as the API masks it. Changes are made in config.toml (or through SelfOps).
import { api, el, failed, t } from "./app.js";

export async function render(main) {
  const box = el("div", { id: "settings" });
  main.append(el("h1", {}, t("web.nav.settings")), box);
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
