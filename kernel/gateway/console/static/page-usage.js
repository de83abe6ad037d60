// Usage: daily cost by model over the last 30 days as an inline SVG chart (tokens when
// no call has a price), the totals of today, this week and this month, and a table by
// model. Days are the owner's (general.timezone), as /usage counts them.
import { api, el, t } from "./app.js";

const DAYS = 30;
const SERIES = 6; // the costliest models get their own colour; the rest are "other"
const SVG = "http://www.w3.org/2000/svg";
const W = 720;
const H = 240;
const PAD = { left: 56, right: 8, top: 12, bottom: 28 };

let view = null;

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(name, String(value));
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function tokens(total) {
  return total.input_tokens + total.output_tokens + total.cache_read_tokens + total.cache_write_tokens;
}

function money(value, currency) {
  return `${value.toFixed(value >= 100 ? 0 : value >= 1 ? 2 : 4)} ${currency}`;
}

function count(value) {
  if (value >= 1e6) return `${(value / 1e6).toFixed(1)}M`;
  if (value >= 1e4) return `${(value / 1e3).toFixed(0)}k`;
  return String(value);
}

function dayList(today) {
  const [y, m, d] = today.split("-").map(Number);
  const days = [];
  for (let back = DAYS - 1; back >= 0; back--) {
    days.push(new Date(Date.UTC(y, m - 1, d - back)).toISOString().slice(0, 10));
  }
  return days;
}

function usageQuery(params) {
  return `/usage?${new URLSearchParams(params)}`;
}

function splitKey(key) {
  const at = key.indexOf(":");
  return at < 0 ? { provider: "", model: key } : { provider: key.slice(0, at), model: key.slice(at + 1) };
}

// {series: [{name, values: Map(day → value)}], useCost}
async function collect(since, byModel) {
  const useCost = byModel.total.cost > 0;
  const measure = (g) => (useCost ? g.cost : tokens(g));
  const top = byModel.groups.slice(0, SERIES);
  const [all, ...perModel] = await Promise.all([
    api("GET", usageQuery({ since, group_by: "day" })),
    ...top.map((g) => {
      const { provider, model } = splitKey(g.key);
      const params = { since, model, group_by: "day" };
      if (provider) params.provider = provider;
      return api("GET", usageQuery(params));
    }),
  ]);
  const series = top.map((g, i) => ({
    name: g.key,
    values: new Map(perModel[i].groups.map((d) => [d.key, measure(d)])),
  }));
  if (byModel.groups.length > SERIES) {
    const other = new Map();
    for (const day of all.groups) {
      const shown = series.reduce((sum, s) => sum + (s.values.get(day.key) || 0), 0);
      other.set(day.key, Math.max(0, measure(day) - shown));
    }
    series.push({ name: t("web.usage.other"), values: other });
  }
  return { series, useCost };
}

function chart(days, series, useCost, currency) {
  const totals = days.map((day) => series.reduce((sum, s) => sum + (s.values.get(day) || 0), 0));
  const max = Math.max(...totals, 0);
  const top = max > 0 ? max : 1;
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const slot = plotW / days.length;
  const label = (v) => (useCost ? money(v, currency) : count(Math.round(v)));
  const root = svg("svg", {
    id: "usage-chart",
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-label": useCost ? t("web.usage.chart_cost") : t("web.usage.chart_tokens"),
    "data-measure": useCost ? "cost" : "tokens",
  });
  const y = (v) => PAD.top + plotH - (v / top) * plotH;
  for (const v of [0, top / 2, top]) {
    root.append(
      svg("line", { class: "grid", x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }),
      svg("text", { class: "axis", x: PAD.left - 4, y: y(v) + 4, "text-anchor": "end" }, max > 0 || v === 0 ? label(v) : ""),
    );
  }
  days.forEach((day, i) => {
    let base = 0;
    const x = PAD.left + i * slot + slot * 0.15;
    const group = svg("g", { "data-day": day });
    series.forEach((s, k) => {
      const value = s.values.get(day) || 0;
      if (value <= 0) return;
      const top1 = y(base + value);
      group.append(
        svg(
          "rect",
          { class: `bar series-${k}`, x, y: top1, width: slot * 0.7, height: Math.max(1, y(base) - top1) },
          svg("title", {}, `${day} · ${s.name}: ${label(value)}`),
        ),
      );
      base += value;
    });
    root.append(group);
    if (i === 0 || i === days.length - 1 || i === Math.floor(days.length / 2)) {
      root.append(svg("text", { class: "axis", x: PAD.left + i * slot + slot / 2, y: H - 8, "text-anchor": "middle" }, day.slice(5)));
    }
  });
  if (max === 0) {
    root.append(svg("text", { class: "axis", x: W / 2, y: H / 2, "text-anchor": "middle" }, t("web.usage.no_calls")));
  }
  return root;
}

function legend(series) {
  return el(
    "ul",
    { class: "legend" },
    ...series.map((s, k) => el("li", {}, el("span", { class: `swatch series-${k}` }), s.name)),
  );
}

function table(groups, currency) {
  const cost = (g) => {
    const known = g.cost > 0 || g.unpriced_calls < g.calls ? money(g.cost, currency) : "—";
    return g.unpriced_calls ? `${known} ${t("web.usage.unpriced", { calls: g.unpriced_calls })}` : known;
  };
  return el(
    "div",
    { class: "scroll" },
    el(
      "table",
      { id: "usage-by-model" },
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          ...["model", "calls", "input", "output", "cache", "cost"].map((k) =>
            el("th", { class: k === "model" ? "" : "num" }, t(`web.usage.col.${k}`)),
          ),
        ),
      ),
      el(
        "tbody",
        {},
        ...groups.map((g) =>
          el(
            "tr",
            { "data-model": g.key },
            el("td", {}, g.key),
            el("td", { class: "num" }, g.calls),
            el("td", { class: "num" }, count(g.input_tokens)),
            el("td", { class: "num" }, count(g.output_tokens)),
            el("td", { class: "num" }, count(g.cache_read_tokens)),
            el("td", { class: "num" }, cost(g)),
          ),
        ),
      ),
    ),
  );
}

function periods(summary) {
  return el(
    "div",
    { class: "row usage-periods" },
    ...summary.periods.map((p) =>
      el(
        "div",
        { class: "card usage-period", "data-period": p.period },
        el("div", { class: "muted small" }, t(`web.usage.period.${p.period}`)),
        el("strong", {}, p.calls && p.unpriced_calls === p.calls ? "—" : money(p.cost, summary.currency)),
        el("div", { class: "muted small" }, t("web.usage.calls_tokens", { calls: p.calls, tokens: count(tokens(p)) })),
      ),
    ),
  );
}

export async function render(main) {
  view = {};
  const current = view;
  main.append(el("h2", {}, t("web.nav.usage")));
  const summary = await api("GET", "/usage/summary");
  const days = dayList(summary.at.slice(0, 10));
  const since = days[0];
  const byModel = await api("GET", usageQuery({ since, group_by: "model" }));
  const { series, useCost } = await collect(since, byModel);
  if (current !== view) return;
  main.append(
    periods(summary),
    el("h3", {}, useCost ? t("web.usage.chart_cost") : t("web.usage.chart_tokens")),
    el("div", { class: "usage-chart" }, chart(days, series, useCost, summary.currency)),
    legend(series),
    el("h3", {}, t("web.usage.by_model", { since })),
    byModel.groups.length ? table(byModel.groups, summary.currency) : el("p", { class: "muted" }, t("web.usage.no_calls")),
  );
  if (!useCost && byModel.total.calls > 0) main.append(el("p", { class: "muted small" }, t("web.usage.no_prices")));
}

export function leave() {
  view = null;
}
