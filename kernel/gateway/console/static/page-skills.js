// Skills: each skill with whether it can be used (and why not); switched on and off.
import { api, el, failed, notify, t } from "./app.js";

let view = null;

function row(skill) {
  const status = skill.usable
    ? el("span", { class: "outcome outcome-succeeded" }, t("web.skills.usable"))
    : el("span", { class: skill.enabled ? "error" : "muted" }, skill.enabled ? t("web.skills.unusable") : t("web.skills.off"));
  return el(
    "tr",
    { "data-skill": skill.name },
    el("td", {}, el("strong", {}, skill.name)),
    el("td", {}, skill.description, skill.problem ? el("div", { class: "error small" }, skill.problem) : null),
    el("td", {}, status),
    el(
      "td",
      { class: "actions" },
      skill.enabled
        ? el("button", { type: "button", "data-action": "disable", onclick: () => toggle(skill, "disable") }, t("web.skills.disable"))
        : el("button", { type: "button", class: "primary", "data-action": "enable", onclick: () => toggle(skill, "enable") }, t("web.skills.enable")),
    ),
  );
}

async function toggle(skill, action) {
  const tr = view?.body.querySelector(`tr[data-skill="${CSS.escape(skill.name)}"]`);
  tr?.querySelectorAll("button").forEach((b) => (b.disabled = true));
  try {
    const changed = await api("PUT", `/skills/${encodeURIComponent(skill.name)}/${action}`);
    tr?.replaceWith(row(changed));
    notify(t(`web.skills.done.${action}`, { name: skill.name }));
  } catch (error) {
    tr?.querySelectorAll("button").forEach((b) => (b.disabled = false));
    failed(error);
  }
}

export async function render(main) {
  view = { body: el("tbody", {}) };
  const current = view;
  const empty = el("p", { class: "muted", hidden: true }, t("web.skills.empty"));
  main.append(
    el("h2", {}, t("web.nav.skills")),
    el("p", { class: "muted small" }, t("web.skills.hint")),
    el(
      "div",
      { class: "scroll" },
      el(
        "table",
        { id: "skills" },
        el(
          "thead",
          {},
          el("tr", {}, el("th", {}, t("web.skills.name")), el("th", {}, t("web.skills.description")), el("th", {}, t("web.skills.status")), el("th", {}, "")),
        ),
        view.body,
      ),
    ),
    empty,
  );
  const data = await api("GET", "/skills");
  if (current !== view) return;
  view.body.replaceChildren(...data.skills.map(row));
  empty.hidden = data.skills.length > 0;
}

export function leave() {
  view = null;
}
