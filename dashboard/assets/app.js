// The dashboard page. Everything from the server is set with textContent or
// style properties: the page never builds HTML from data.
"use strict";
(() => {
  const base = new URL(".", document.currentScript.src);
  const $ = (id) => document.getElementById(id);
  const main = $("breakers");
  const template = $("card");
  const cards = new Map();
  let query = { q: "", sick: false, page: 0 };
  let source = null;
  let last = null;

  const STATES = { closed: "Closed", open: "Open", half_open: "Half-open",
    forced_open: "Forced open", disabled: "Disabled", recovering: "Recovering" };

  function duration(ms) {
    if (ms < 1000) return ms + " ms";
    const s = ms / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + Math.floor(s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }
  const pct = (x) => (100 * x).toFixed(1) + "%";

  function connect() {
    if (source) source.close();
    const url = new URL("api/stream", base);
    if (query.q) url.searchParams.set("q", query.q);
    if (query.sick) url.searchParams.set("sick", "1");
    url.searchParams.set("page", String(query.page));
    source = new EventSource(url);
    source.addEventListener("frame", (e) => render(JSON.parse(e.data)));
    source.onopen = () => $("live").className = "live on";
    source.onerror = () => $("live").className = "live";
  }

  // A card per row: `key` is the row's id (one per breaker, though breakers
  // of two registries may share a name) and its rank among the rows of that
  // id (a source may list one breaker twice). Its controls name the id, so
  // they act on that breaker alone.
  function card(key, row) {
    let c = cards.get(key);
    if (c) return c;
    const el = template.content.firstElementChild.cloneNode(true);
    el.querySelector(".name").textContent = row.name;
    const { id, name } = row;
    for (const button of el.querySelectorAll(".controls button")) {
      button.addEventListener("click", () => control(id, name, button.dataset.action));
    }
    c = { el, q: (s) => el.querySelector(s) };
    cards.set(key, c);
    return c;
  }

  function rate(row, el, value, threshold) {
    el.querySelector(".fill").style.width = pct(Math.min(1, value));
    const mark = el.querySelector(".mark");
    if (threshold == null) { mark.style.display = "none"; }
    else { mark.style.display = "block"; mark.style.left = pct(Math.min(1, threshold)); }
    el.querySelector(".value").textContent =
      pct(value) + (threshold == null ? "" : " / " + pct(threshold));
  }

  function chart(canvas, history) {
    const g = canvas.getContext("2d");
    const w = canvas.width, h = canvas.height;
    g.clearRect(0, 0, w, h);
    let top = 1;
    for (const [a, r] of history) top = Math.max(top, a, r);
    const step = w / 39;
    for (const [i, color] of [[0, "#1f9d55"], [1, "#d64545"]]) {
      g.strokeStyle = color; g.lineWidth = 1.5; g.beginPath();
      history.forEach((p, k) => {
        const x = w - (history.length - 1 - k) * step, y = h - 2 - (p[i] / top) * (h - 4);
        k ? g.lineTo(x, y) : g.moveTo(x, y);
      });
      g.stroke();
    }
  }

  function update(c, row) {
    c.el.className = "breaker " + row.state;
    c.q(".state").textContent = STATES[row.state] || row.state;
    c.q(".since").textContent = "for " + duration(row.time_in_state_ms);
    // While Open the window counts afresh: show the counts that tripped it.
    const t = row.tripped_by;
    const w = t && row.window.calls === 0 ? t : row.window;
    const rates = c.el.querySelectorAll(".rate");
    rate(row, rates[0], w.calls ? w.failures / w.calls : 0, row.failure_threshold);
    rate(row, rates[1], w.calls ? w.slow / w.calls : 0, row.slow_threshold);
    c.q(".admitted").textContent = row.admitted_per_s.toFixed(1) + " admitted/s";
    c.q(".rejected").textContent = row.rejected_per_s.toFixed(1) + " rejected/s";
    chart(c.q("canvas"), row.history);
    c.q(".backoff").textContent = "backoff level " + row.level;
    c.q(".cooldown").textContent = row.retry_after_ms == null ? "until reset"
      : row.retry_after_ms > 0 ? "retry in " + duration(row.retry_after_ms) : "";
    c.q(".tripped").textContent = t
      ? "tripped by " + t.failures + " failed, " + t.slow + " slow of " + t.calls : "";
    const peers = row.fleet_open_reports;
    c.q(".peers").textContent = peers > 0
      ? peers + (peers > 1 ? " peers report" : " peer reports") + " it Open" : "";
    c.q(".override").textContent = row.fleet_override == null ? ""
      : "fleet-wide: " + (row.fleet_override === "force_open" ? "forced open" : "disabled");
    // A shadow breaker never rejects: it counts what it would have rejected.
    c.q(".shadow").hidden = !row.shadow;
    c.q(".wouldreject").textContent = row.shadow ? "would have rejected " + row.would_reject : "";
    const table = c.q(".candidates");
    table.hidden = row.candidates.length === 0;
    c.q(".candidates tbody").replaceChildren(...row.candidates.map((k) => {
      const tr = document.createElement("tr");
      for (const text of [k.name, STATES[k.state] || k.state, String(k.opened),
        duration(k.time_open_ms), String(k.would_reject), String(k.failures_spared),
        String(k.successes_turned_away)]) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.appendChild(td);
      }
      return tr;
    }));
    table.querySelector("caption").textContent = row.candidates.length === 0 ? ""
      : "what-if candidates (" + row.candidates[0].unseen + " calls rejected here, unseen by them)";
    const list = c.q(".recent");
    const items = row.recent.slice().reverse().map((e) => {
      const li = document.createElement("li");
      li.textContent = (e.earlier ? "before " : "") +
        new Date(e.at_ms).toLocaleTimeString() + "  " +
        e.reason.replace(/_/g, " ") + (e.count > 1 ? " ×" + e.count : "");
      return li;
    });
    list.replaceChildren(...items);
  }

  function render(frame) {
    last = frame;
    document.body.classList.toggle("nocontrols", !frame.controls);
    $("summary").textContent = frame.total + " breakers, " + frame.sick + " sick" +
      (frame.matched !== frame.total ? ", " + frame.matched + " shown by the filter" : "") +
      (frame.fleet ? "; fleet: " + frame.fleet.live_peers + " live peers, " +
        frame.fleet.quorum_opens + " quorum opens" : "");
    const fleetControls = !!(frame.fleet && frame.fleet.controls);
    $("fleetfor").hidden = !fleetControls;
    if (fleetControls) {
      const field = $("for");
      field.max = String(Math.floor(frame.fleet.override_max_s / 60));
      if (field.value === "" && document.activeElement !== field) {
        field.value = String(Math.round(frame.fleet.override_default_s / 60));
      }
    }
    // Past the last page (breakers went), the server shows the last: the
    // pager goes on from the page shown.
    query.page = frame.page;
    $("pageinfo").textContent = "page " + (frame.page + 1) + " of " + frame.pages;
    $("prev").disabled = frame.page === 0;
    $("next").disabled = frame.page + 1 >= frame.pages;
    const keep = new Set();
    const order = [];
    const seen = new Map();
    for (const row of frame.breakers) {
      const rank = seen.get(row.id) || 0;
      seen.set(row.id, rank + 1);
      const key = row.id + "/" + rank;
      const c = card(key, row);
      update(c, row);
      keep.add(key);
      order.push(c.el);
    }
    for (const [key, c] of cards) if (!keep.has(key)) { c.el.remove(); cards.delete(key); }
    order.forEach((el, i) => { if (main.children[i] !== el) main.insertBefore(el, main.children[i] || null); });
  }

  async function control(id, name, action) {
    const url = new URL("api/control", base);
    url.searchParams.set("id", String(id));
    url.searchParams.set("name", name);
    url.searchParams.set("action", action);
    // Through a fleet, force open and disable last as long as the field says.
    if (last && last.fleet && last.fleet.controls && action !== "reset") {
      const minutes = Math.floor(Number($("for").value));
      if (minutes >= 1) url.searchParams.set("for_s", String(minutes * 60));
    }
    // A refusal stays shown (frames rewrite the summary) until the next control.
    const response = await fetch(url, { method: "POST" });
    $("error").textContent = response.ok ? "" : action + " of " + name + " failed: " +
      response.status + " " + (await response.text()).trim();
  }

  let typing = null;
  $("filter").addEventListener("input", (e) => {
    clearTimeout(typing);
    typing = setTimeout(() => { query.q = e.target.value; query.page = 0; connect(); }, 200);
  });
  $("sick").addEventListener("change", (e) => { query.sick = e.target.checked; query.page = 0; connect(); });
  $("prev").addEventListener("click", () => { if (query.page > 0) { query.page--; connect(); } });
  $("next").addEventListener("click", () => {
    if (last && query.page + 1 < last.pages) { query.page++; connect(); }
  });
  connect();
})();
