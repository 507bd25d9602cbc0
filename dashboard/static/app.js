// duroxide dashboard: live refresh of the [data-live] sections, and the
// actions, each confirmed first, sent to the JSON API with fetch().
"use strict";

(function () {
  // ---- live refresh ----
  const refreshMs = Number(document.body.dataset.refreshMs || 0);
  let busy = false; // an action is being confirmed or sent

  async function refresh() {
    if (busy || document.hidden) return;
    try {
      const res = await fetch(location.href, { headers: { "Accept": "text/html" }, credentials: "same-origin" });
      if (!res.ok || res.redirected) return;
      const html = await res.text();
      if (busy) return; // an action began while the page was fetched
      const doc = new DOMParser().parseFromString(html, "text/html");
      for (const el of document.querySelectorAll("[data-live][id]")) {
        const fresh = doc.getElementById(el.id);
        if (fresh && fresh.innerHTML !== el.innerHTML) el.innerHTML = fresh.innerHTML;
      }
      // Controls that only apply while the instance is live (raise,
      // cancel, force purge) go when the fresh page no longer has them.
      // An answer such a control shows ("Cancel requested") stays: it
      // takes the control's place.
      for (const el of document.querySelectorAll("[data-while-live][id]")) {
        if (doc.getElementById(el.id)) continue;
        const out = el.querySelector(".result");
        if (out && out.textContent) el.replaceWith(out); else el.remove();
      }
      // A page that stopped refreshing (a finished instance) stops here too.
      if (Number(doc.body.dataset.refreshMs || 0) === 0) stop();
    } catch (e) {
      // The server may be restarting: try again at the next tick.
    }
  }
  let timer = refreshMs > 0 ? setInterval(refresh, refreshMs) : null;
  function stop() { if (timer) { clearInterval(timer); timer = null; } }

  // ---- actions ----
  // instancePath is the instance ID as one path segment, percent-encoded
  // by the server (the page never carries the raw ID in markup).
  function instancePath() {
    const a = document.getElementById("actions");
    return a ? a.dataset.instancePath : "";
  }
  const enc = encodeURIComponent;

  // parseJSON reads an optional JSON field: empty means null.
  function parseJSON(text, what) {
    if (text.trim() === "") return null;
    try { return JSON.parse(text); } catch (e) { throw new Error(what + " is not valid JSON: " + e.message); }
  }

  // request describes the API call of a form.
  function request(form) {
    const f = form.elements;
    switch (form.dataset.action) {
      case "start": {
        const body = { orchestration: f.orchestration.value.trim() };
        if (f.instanceId.value.trim() !== "") body.instanceId = f.instanceId.value.trim();
        body.input = parseJSON(f.input.value, "The input");
        return { method: "POST", url: "/api/instances", body: JSON.stringify(body) };
      }
      case "raise": {
        const data = parseJSON(f.data.value, "The data");
        return { method: "POST", url: "/api/instances/" + instancePath() + "/events/" + enc(f.name.value.trim()), body: JSON.stringify(data) };
      }
      case "cancel":
        return { method: "POST", url: "/api/instances/" + instancePath() + "/cancel",
          body: JSON.stringify({ reason: f.reason.value.trim() || "canceled from the dashboard" }) };
      case "pause":
        return { method: "POST", url: "/api/instances/" + instancePath() + "/pause",
          body: JSON.stringify({ reason: f.reason.value.trim(), by: "dashboard" }) };
      case "resume":
        return { method: "POST", url: "/api/instances/" + instancePath() + "/resume" };
      case "rewind":
        return { method: "POST", url: "/api/instances/" + instancePath() + "/rewind",
          body: JSON.stringify({ reason: f.reason.value.trim() }) };
      case "rewind-force":
        return { method: "POST", url: "/api/instances/" + instancePath() + "/rewind",
          body: JSON.stringify({ reason: f.reason.value.trim(), by: "dashboard", force: true }) };
      case "purge":
        return { method: "DELETE", url: "/api/instances/" + instancePath() + (f.force && f.force.checked ? "?force=true" : "") };
      case "release":
        return { method: "DELETE", url: "/api/workflows/" + enc(form.dataset.lock) + "/lock" };
      case "schedule-pause":
      case "schedule-resume":
      case "schedule-trigger":
        return { method: "POST", url: "/api/schedules/" + enc(form.dataset.schedule) + "/" + form.dataset.action.slice("schedule-".length) };
      case "bulk":
        return { method: "POST", url: "/api/bulk", body: JSON.stringify(bulkBody(form)) };
      case "bulk-cancel":
        return { method: "POST", url: "/api/bulk/" + enc(form.dataset.job) + "/cancel" };
    }
    throw new Error("unknown action");
  }

  // bulkBody is the POST /api/bulk body of the bulk form (without dryRun).
  function bulkBody(form) {
    const f = form.elements;
    const filter = {};
    const text = (name, key) => { const v = f[name].value.trim(); if (v !== "") filter[key || name] = v; };
    if (f.state.value !== "") filter.states = [f.state.value];
    text("orchestration"); text("version"); text("prefix"); text("errorKind"); text("waitKind");
    if (f.stalled.checked) filter.stalled = true;
    const body = { action: f.action.value, filter: filter, by: "dashboard" };
    if (f.reason.value.trim() !== "") body.reason = f.reason.value.trim();
    if (body.action === "raiseEvent") {
      body.eventName = f.eventName.value.trim();
      const data = parseJSON(f.eventData.value, "The event data");
      if (data !== null) body.eventData = data;
    }
    if (body.action === "purge" && f.force.checked) body.force = true;
    return body;
  }

  // previewBulk asks the API how many instances the bulk form's action
  // would touch (a dry run: nothing changes), then asks to confirm that
  // count.
  async function previewBulk(form, req) {
    busy = true;
    const out = form.querySelector(".result");
    out.className = "result";
    out.textContent = "Counting the matching instances…";
    let res, body = null;
    try {
      const dry = JSON.parse(req.body);
      dry.dryRun = true;
      res = await fetch(req.url, { method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" }, body: JSON.stringify(dry) });
      try { body = await res.json(); } catch (e) { /* not JSON */ }
    } catch (e) {
      busy = false;
      show(form, false, "The server could not be reached: " + e.message);
      return;
    }
    if (res.status >= 400) {
      busy = false;
      const d = describe("bulk", res.status, body);
      show(form, d.ok, d.text);
      return;
    }
    const action = JSON.parse(req.body).action;
    if (body.count === 0) {
      busy = false;
      show(form, true, "No instance matches: nothing to " + action + ".");
      return;
    }
    const ids = body.instances.slice(0, 5).map((s) => s.instanceId);
    const more = body.count > ids.length ? ", …" : "";
    out.textContent = "";
    pending.set(form, req);
    const box = form.querySelector(".confirm");
    box.querySelector(".confirm-text").textContent = action + " " + body.count + (body.count === 1 ? " instance" : " instances") +
      " (" + ids.join(", ") + more + ")?" + (action === "purge" ? " Purged instances cannot be brought back." : "");
    box.hidden = false;
    box.querySelector(".confirm-yes").focus();
  }

  // followJob shows a bulk job's progress until it ends.
  async function followJob(form, id) {
    for (;;) {
      let job;
      try {
        const res = await fetch("/api/bulk/" + enc(id), { credentials: "same-origin" });
        if (!res.ok) return;
        job = await res.json();
      } catch (e) {
        return;
      }
      const line = "Job " + job.id + " " + job.state + ": " + job.processed + " of " + job.total + " instances, " +
        job.succeeded + " succeeded, " + job.skipped + " skipped, " + job.failed + " failed.";
      show(form, job.state !== "Failed" && job.failed === 0, line);
      if (job.state === "Done" || job.state === "Failed" || job.state === "Canceled") { refresh(); return; }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  // describe turns the API's answer into a sentence.
  function describe(action, status, body) {
    if (status >= 400) {
      let msg = (body && body.error) ? body.error : "HTTP " + status;
      if (body && body.details) msg += ": " + body.details;
      return { ok: false, text: "Failed (" + status + "): " + msg };
    }
    switch (action) {
      case "start":
        return { ok: true, text: body.duplicate ? "Already started (duplicate key): " + body.instanceId : "Started " + body.instanceId, link: "/instances/" + enc(body.instanceId) };
      case "raise": return { ok: true, text: "Event raised." };
      case "cancel": return { ok: true, text: "Cancel requested: the instance sees it and ends Canceled when its code returns, or at the grace deadline." };
      case "pause": return { ok: true, text: "Paused: it takes no turn until resumed.", link: location.pathname };
      case "resume": return { ok: true, text: "Resumed.", link: location.pathname };
      case "rewind": return { ok: true, text: "Rewound: execution " + body.executionId + " resumes it.", link: location.pathname };
      case "rewind-force": return { ok: true, text: "Rewound: execution " + body.executionId + " takes over from the stuck one.", link: location.pathname };
      case "purge": return { ok: true, text: "Purged.", link: "/" };
      case "release": return { ok: true, text: body.released ? "Lock released." : "There was no lock." };
      case "schedule-pause": return { ok: true, text: "Paused." };
      case "schedule-resume": return { ok: true, text: "Resumed." };
      case "schedule-trigger":
        if (!body.instanceId) return { ok: true, text: "Fired: " + body.outcome };
        return { ok: true, text: "Fired: started " + body.instanceId, link: "/instances/" + enc(body.instanceId) };
      case "bulk": return { ok: true, text: "Job " + body.job.id + " started on " + body.count + " instances." };
      case "bulk-cancel": return { ok: true, text: "Canceled after " + body.processed + " of " + body.total + " instances; a running job stops at its next chunk." };
    }
    return { ok: true, text: "Done." };
  }

  function show(form, ok, text, link) {
    const out = form.querySelector(".result");
    out.className = "result " + (ok ? "ok" : "error");
    out.textContent = text;
    if (link) {
      const a = document.createElement("a");
      a.href = link;
      a.textContent = link === "/" ? " Back to the instances." : link === location.pathname ? " Reload the page." : " Open it.";
      out.appendChild(a);
    }
  }

  // Listeners are delegated from the document: the live refresh replaces
  // sections that hold forms (the locks table), and new forms must work too.
  const pending = new WeakMap(); // form -> the request awaiting confirmation

  document.addEventListener("submit", (ev) => {
    const form = ev.target.closest("form.action");
    if (!form) return;
    ev.preventDefault();
    let req;
    try {
      req = request(form);
    } catch (e) {
      show(form, false, e.message);
      return;
    }
    if (form.dataset.action === "bulk") {
      previewBulk(form, req);
      return;
    }
    pending.set(form, req);
    busy = true;
    const box = form.querySelector(".confirm");
    box.querySelector(".confirm-text").textContent = form.dataset.confirm;
    box.hidden = false;
    form.querySelector(".result").textContent = "";
    // Keyboard and screen-reader users land on the step that follows.
    box.querySelector(".confirm-yes").focus();
  });

  document.addEventListener("click", async (ev) => {
    const button = ev.target.closest(".confirm-yes, .confirm-no");
    if (!button) return;
    const form = button.closest("form.action");
    if (!form) return;
    form.querySelector(".confirm").hidden = true;
    const req = pending.get(form);
    pending.delete(form);
    if (button.classList.contains("confirm-no") || !req) {
      busy = false;
      const submit = form.querySelector("button[type=submit]");
      if (submit) submit.focus();
      return;
    }
    const init = { method: req.method, credentials: "same-origin", headers: { "Content-Type": "application/json" } };
    if (req.body !== undefined) init.body = req.body;
    try {
      const res = await fetch(req.url, init);
      let body = null;
      try { body = await res.json(); } catch (e) { /* not JSON */ }
      const d = describe(form.dataset.action, res.status, body);
      show(form, d.ok, d.text, d.link);
      if (form.dataset.action === "bulk" && body && body.job) followJob(form, body.job.id);
    } catch (e) {
      show(form, false, "The server could not be reached: " + e.message);
    } finally {
      busy = false;
      // Let the answer be read before a refresh may replace its section.
      setTimeout(refresh, 1500);
    }
  });
})();
