"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const STATES = { closed: "Closed", open: "Open", half_open: "Half-open",
    forced_open: "Forced open", disabled: "Disabled", recovering: "Recovering" };

  async function send(params) {
    const url = new URL("api/settings", location.href);
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, String(v));
    const response = await fetch(url, { method: "POST" });
    $("error").textContent = response.ok ? "" : await response.text();
  }

  const sliders = {
    failure: (v) => [{ failure: v / 100 }, v + "%"],
    latency: (v) => [{ latency_ms: v }, v + " ms"],
    timeout: (v) => [{ timeout_ms: v }, v + " ms"],
  };
  for (const [id, f] of Object.entries(sliders)) {
    const show = () => { $(id + "-out").textContent = f(Number($(id).value))[1]; };
    $(id).addEventListener("input", () => { show(); send(f(Number($(id).value))[0]); });
    show();
  }
  $("apply").addEventListener("click", () => send({
    failure_threshold: Number($("failure_threshold").value) / 100,
    minimum_calls: $("minimum_calls").value,
    open_ms: $("open_ms").value,
  }));

  function chart(canvas, points, series, unit) {
    const g = canvas.getContext("2d");
    const w = canvas.width, h = canvas.height;
    g.clearRect(0, 0, w, h);
    let top = 1;
    for (const p of points) for (const [i] of series) top = Math.max(top, p[i]);
    g.fillStyle = "#6b7383"; g.font = "11px system-ui";
    g.fillText(top.toFixed(0) + " " + unit, 4, 12);
    const step = w / 39;
    for (const [i, color] of series) {
      g.strokeStyle = color; g.lineWidth = 2; g.beginPath();
      points.forEach((p, k) => {
        const x = w - (points.length - 1 - k) * step, y = h - 2 - (p[i] / top) * (h - 16);
        k ? g.lineTo(x, y) : g.moveTo(x, y);
      });
      g.stroke();
    }
  }

  // The first answer sets the controls to the server's settings (another tab
  // or a script may have changed them).
  let synced = false;
  function sync(s) {
    $("failure").value = Math.round(s.failure * 100);
    $("latency").value = s.latency_ms;
    $("timeout").value = s.timeout_ms;
    for (const id of Object.keys(sliders)) $(id + "-out").textContent = sliders[id](Number($(id).value))[1];
    $("failure_threshold").value = Math.round(s.failure_threshold * 100);
    $("minimum_calls").value = s.minimum_calls;
    $("open_ms").value = s.open_ms;
    synced = true;
  }

  async function poll() {
    try {
      const data = await (await fetch("api/lanes")).json();
      if (!synced) sync(data.settings);
      $("state").textContent = STATES[data.state] || data.state;
      $("state").className = data.state;
      $("rate").textContent = data.rate + " calls/s per lane";
      data.lanes.forEach((points, i) => {
        const lane = $("lane" + i);
        const p = points[points.length - 1] || [0, 0, 0, 0];
        lane.querySelector(".ok").textContent = p[0].toFixed(0) + " ok/s";
        lane.querySelector(".failed").textContent = p[1].toFixed(0) + " failed/s";
        lane.querySelector(".rejected").textContent = p[2].toFixed(0) + " rejected/s";
        lane.querySelector(".latency").textContent = "mean latency " + p[3].toFixed(0) + " ms";
        chart(lane.querySelector(".throughput"), points,
          [[0, "#1f9d55"], [1, "#d98e04"], [2, "#d64545"]], "calls/s");
        chart(lane.querySelector(".latencies"), points, [[3, "#3b6fd6"]], "ms");
      });
    } catch (e) {
      $("state").textContent = "disconnected";
    }
    setTimeout(poll, 250);
  }
  poll();
})();
