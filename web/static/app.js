// The ag profile page: loads ag.wasm (a model of package app: by default
// examples/mlp, the MLP workload), trains it through globalThis.ag, and
// renders profiles (browser or native JSON) as plain SVG and HTML. No
// libraries.
"use strict";

(() => {
  // The stages, in execution order, with their meanings: written once, in
  // Go (package profile), and read from /stages.json at start (a profile
  // file carries them too, as stage_info). Colors go by position.
  let STAGES = [];
  let STAGE_INFO = {};
  function setStages(list) {
    if (!Array.isArray(list) || !list.length) return;
    STAGES = list.map((s) => s.stage);
    STAGE_INFO = Object.fromEntries(list.map((s) => [s.stage, s.doc]));
  }
  // stageClass is the color class of a stage: its position in the order.
  const stageClass = (st) => "s-" + Math.max(0, STAGES.indexOf(st));
  const PASSES = ["forward", "backward", "update"];
  // The profile modes: the MLP's three, or those of another app's model (app.Info.modes).
  let MODES = ["eager", "lazy", "captured"];
  const SVG = "http://www.w3.org/2000/svg";

  const $ = (sel) => document.querySelector(sel);
  const state = {
    ready: false,
    busy: false,
    stopAsked: false, // Stop pressed during this train's build (ag.train would clear ag.stop's flag)
    built: null, // config string of the model built
    app: null, // app.Info of the wasm module's model (ag.app), null for the page's own MLP (isBuiltinMLP)
    info: null, // the last ag.build answer
    metrics0: null, // an app's metrics right after build
    losses: [], // [step, loss]
    stepMS: [],
    profiles: [], // {id, label, kind: "browser"|"file", data}
    selected: null,
    sort: { key: "ms", dir: -1 },
    expanded: new Set(), // op rows opened to their IR ops
    cmp: { a: null, b: null, chosen: false }, // the two profiles compared; chosen: by the user
    scale: "share",
  };

  // ---------- helpers ----------
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  function svg(tag, attrs, ...kids) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, v);
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  function fmtMS(ms) {
    if (!isFinite(ms)) return "–";
    if (ms >= 1000) return (ms / 1000).toFixed(2) + " s";
    if (ms >= 100) return ms.toFixed(0) + " ms";
    if (ms >= 10) return ms.toFixed(1) + " ms";
    if (ms >= 0.1) return ms.toFixed(2) + " ms";
    return (ms * 1000).toFixed(1) + " µs";
  }
  function fmtNum(v, digits = 3) {
    if (!isFinite(v)) return "–";
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1e4 || a < 1e-3) return v.toExponential(2);
    return v.toPrecision(digits);
  }
  function fmtBytes(b) {
    if (!b) return "0 B";
    const u = ["B", "KiB", "MiB", "GiB"];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i === 0 ? b.toFixed(0) : b.toFixed(b >= 100 ? 0 : 1)) + " " + u[i];
  }
  function median(a) {
    if (!a.length) return NaN;
    const s = [...a].sort((x, y) => x - y);
    return s[Math.floor(s.length / 2)];
  }
  function setStatus(text, kind) {
    const s = $("#status");
    s.textContent = text;
    s.dataset.kind = kind || "";
  }
  function banner(kind, html, id) {
    if (id) document.getElementById(id)?.remove();
    const b = el("div", { class: "banner " + kind, role: kind === "error" ? "alert" : "status", id });
    b.innerHTML = html;
    const close = el("button", { type: "button", class: "close", "aria-label": "Dismiss", text: "×" });
    close.addEventListener("click", () => b.remove());
    b.append(close);
    $("#banners").append(b);
    return b;
  }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }
  function download(name, text, type) {
    const url = URL.createObjectURL(new Blob([text], { type }));
    const a = el("a", { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }
  function errText(e) { return (e && e.message) || String(e); }

  // ---------- wasm ----------
  async function loadWasm() {
    if (typeof Go !== "function") {
      const r = await fetch("wasm_exec.js", { method: "HEAD" }).catch(() => null);
      throw new Error(r && r.status === 503 ? "not-built" : "wasm_exec.js did not load");
    }
    const resp = await fetch("ag.wasm");
    if (resp.status === 503) throw new Error("not-built");
    if (!resp.ok) throw new Error(`fetching ag.wasm: HTTP ${resp.status}`);
    const go = new Go();
    const ready = new Promise((res) => { window.agReady = res; });
    const { instance } = await WebAssembly.instantiateStreaming(resp, go.importObject);
    go.run(instance).then(() => banner("error", "The ag wasm module exited; reload the page."));
    await ready;
  }

  // The placeholders of index.html, drawn again when no profile is left.
  const EMPTY = {};

  async function init() {
    EMPTY.modes = $("#modes").innerHTML;
    EMPTY.ops = $("#op-table tbody").innerHTML;
    EMPTY.counters = $("#counters").innerHTML;
    EMPTY.compare = $("#compare").innerHTML;
    try {
      setStages(await (await fetch("stages.json")).json());
    } catch (e) {
      console.warn("stages.json:", e); // the legend waits for a profile's stage_info
    }
    buildLegend();
    wireUI();
    try {
      await loadWasm();
    } catch (e) {
      if (errText(e) === "not-built") {
        banner("error", "<b>ag.wasm is not built.</b> Run <code>make wasm</code> and restart <code>ag serve</code>. Opening profile JSON files still works.");
        setStatus("Training is unavailable: ag.wasm is not built.", "error");
      } else {
        banner("error", "<b>Could not start ag in this browser:</b> " + esc(errText(e)));
        setStatus("Training is unavailable.", "error");
      }
      $("#device-name").textContent = "none";
      $("#webgpu-state").textContent = "not checked";
      return;
    }
    try {
      const d = await ag.devices();
      showDevices(d);
    } catch (e) {
      banner("error", "Listing devices failed: " + esc(errText(e)));
    }
    try {
      const a = await ag.app();
      if (!isBuiltinMLP(a)) setupApp(a);
    } catch (e) {
      banner("error", "Reading the model's description failed: " + esc(errText(e)));
      return;
    }
    state.ready = true;
    setBusy(false);
    setStatus("Ready. Choose a model and train it.");
  }

  function showDevices(d) {
    const wg = d.webgpu;
    // "auto" is the native command line's choice; the page picks webgpu whenever it runs.
    wg.why = wg.why.replace(/\s*\(not picked by auto\)/, "");
    $("#webgpu-state").textContent = wg.ok ? wg.why : "not available";
    $("#webgpu-state").title = wg.why;
    const opt = $('#f-device option[value="webgpu"]');
    opt.disabled = !wg.ok;
    $('#f-device option[value="best"]').textContent = `best (${d.best})`;
    $("#device-name").textContent = d.current || `${d.best} (not opened yet)`;
    if (!wg.ok) {
      banner("warn", `<b>WebGPU is not available here</b> (${esc(wg.why)}). ag trains on its CPU backend compiled to WebAssembly instead: same numbers, slower. For WebGPU use a browser with it enabled (Chrome, Edge; in headless Chromium pass <code>--enable-unsafe-webgpu</code>).`, "webgpu-banner");
    } else if (/software|fallback|swiftshader/i.test(wg.why)) {
      banner("info", `WebGPU runs on a <b>software adapter</b> (${esc(wg.why)}): correct, but slower than a GPU.`, "webgpu-banner");
    }
  }

  // ---------- a model of package app ----------
  // isBuiltinMLP tells the page's default model (examples/mlp) from others:
  // its form and description are index.html's own (the .mlp fields), so
  // the page keeps them. Another model named mlp, with other parameters,
  // gets a form of its own.
  function isBuiltinMLP(a) {
    const fields = [...document.querySelectorAll("#train-form input.mlp")].map((i) => i.name).sort();
    return a.name === "mlp" && JSON.stringify(a.params.map((p) => p.name).sort()) === JSON.stringify(fields);
  }
  // setupApp turns the page to a model that registered itself through
  // package app: its name and description, a field per parameter in place
  // of the MLP's, its profile modes, and a card for metrics and samples.
  function setupApp(a) {
    state.app = a;
    document.title = `ag · ${a.name}`;
    document.body.dataset.app = a.name;
    $("#setup-h").textContent = `${a.name}: model and training`;
    $("#model-desc").textContent = a.describe;
    for (const e of document.querySelectorAll("#train-form .mlp")) e.remove();
    const steps = $("#f-steps");
    const before = steps.labels[0];
    const idOf = (pre, name) => pre + name.replace(/[^A-Za-z0-9_-]/g, "_");
    const labelFor = (id, name, doc) => el("label", { for: id, text: name + " " }, el("span", { class: "hint", text: doc }));
    for (const p of a.params) {
      const id = idOf("p-", p.name);
      let input;
      if (p.choices && p.choices.length) {
        // a word out of a list (app.Param.Choices): build gets the word
        input = el("select", { id, name: p.name, "data-choice": p.name }, ...p.choices.map((c, i) =>
          el("option", { value: c, text: c, selected: i === p.default })));
      } else {
        input = el("input", { id, name: p.name, type: "number", min: p.min, max: p.max, step: p.int ? 1 : "any",
          value: p.default, required: true, "data-param": p.name });
      }
      before.before(labelFor(id, p.name, p.doc), input);
    }
    for (const p of a.strings) {
      const id = idOf("s-", p.name);
      before.before(labelFor(id, p.name, p.doc), el("input", { id, name: p.name, type: "text", value: p.default, "data-string": p.name }));
    }
    // Files (app.FileParam): picked or dropped, read here as text; build
    // gets {name, text}. The first file's picker is also a drop zone.
    state.files = {};
    a.files.forEach((p, i) => {
      const id = idOf("file-", p.name);
      const input = el("input", { id, name: p.name, type: "file", accept: "text/*,.txt,.md,.json", "data-file": p.name });
      const take = async (f) => {
        if (!f) return;
        state.files[p.name] = { name: f.name, text: await f.text() };
        document.body.dataset["file_" + p.name] = f.name;
        setStatus(`Read ${f.name} (${f.size.toLocaleString()} bytes) for ${p.name}.`);
      };
      input.addEventListener("change", () => take(input.files[0]));
      before.before(labelFor(id, p.name, p.doc), input);
      if (i === 0) {
        const zone = el("div", { class: "drop", id: "drop-zone", text: `Drop a text file here for ${p.name}` });
        zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("over"); });
        zone.addEventListener("dragleave", () => zone.classList.remove("over"));
        zone.addEventListener("drop", (e) => { e.preventDefault(); zone.classList.remove("over"); take(e.dataTransfer.files[0]); });
        $("#train-form .fields").after(zone);
      }
    });
    if (a.checkpoint) {
      const save = el("button", { type: "button", id: "btn-save", text: "Download checkpoint" });
      const load = el("input", { type: "file", id: "f-load", accept: ".safetensors,application/octet-stream" });
      save.addEventListener("click", saveCheckpoint);
      load.addEventListener("change", () => loadCheckpoint(load.files[0]));
      $("#app-out").append(el("div", { class: "actions checkpoint" }, save,
        el("label", { for: "f-load", text: "Load checkpoint " }), load));
    }
    steps.value = a.steps;
    steps.max = Math.max(1000000, a.steps);
    setModes(a.modes);
    $("#app-out").hidden = false;
  }
  function setModes(modes) {
    MODES = modes;
    $("#btn-profile").textContent = MODES.length === 1 ? "Profile" : `Profile ${MODES.length} modes`;
  }

  function renderMetrics(m) {
    const box = $("#metrics");
    if (!m) { box.replaceChildren(el("p", { class: "empty", text: state.info && !state.info.eval ? "This model reports no metrics." : "Train the model to measure it." })); return; }
    const t = el("table", { class: "small metrics" }, el("caption", { class: "sr-only", text: "Metrics after build and now" }),
      el("thead", {}, el("tr", {}, el("th", { scope: "col", class: "txt", text: "metric" }),
        el("th", { scope: "col", text: "untrained" }), el("th", { scope: "col", text: "now" }))));
    const tb = el("tbody");
    for (const k of Object.keys(m).sort()) {
      const v0 = state.metrics0 ? state.metrics0[k] : undefined;
      tb.append(el("tr", { "data-metric": k }, el("th", { scope: "row", class: "txt", text: k }),
        el("td", { text: v0 === undefined ? "–" : fmtNum(v0, 4) }), el("td", { text: fmtNum(m[k], 4) })));
    }
    t.append(tb);
    box.replaceChildren(el("div", { class: "table-wrap" }, t));
  }

  // ---------- UI wiring ----------
  function wireUI() {
    $("#train-form").addEventListener("submit", (ev) => { ev.preventDefault(); train(); });
    $("#btn-profile").addEventListener("click", profileModes);
    $("#btn-stop").addEventListener("click", () => { state.stopAsked = true; if (window.ag) ag.stop(); setStatus("Stopping after this step…"); });
    $("#f-file").addEventListener("change", openFile);
    $("#f-prof").addEventListener("change", (e) => { state.selected = e.target.value; renderDetail(); });
    $("#f-pass").addEventListener("change", () => { state.expanded.clear(); renderOps(); renderCompare(); });
    $("#f-group").addEventListener("change", () => { state.expanded.clear(); renderOps(); renderCompare(); });
    $("#f-cmp-a").addEventListener("change", (e) => { state.cmp.a = e.target.value; state.cmp.chosen = true; renderCompare(); });
    $("#f-cmp-b").addEventListener("change", (e) => { state.cmp.b = e.target.value; state.cmp.chosen = true; renderCompare(); });
    for (const r of document.querySelectorAll('input[name="scale"]')) {
      r.addEventListener("change", (e) => { state.scale = e.target.value; renderModes(); });
    }
    for (const th of document.querySelectorAll("#op-table th")) {
      th.querySelector("button").addEventListener("click", () => {
        const k = th.dataset.key;
        state.sort = { key: k, dir: state.sort.key === k ? -state.sort.dir : (k === "op" || k === "timing" ? 1 : -1) };
        renderOps();
      });
    }
    $("#btn-dl-json").addEventListener("click", () => {
      const p = current();
      if (p) download(`ag-profile-${slug(p.label)}.json`, JSON.stringify(p.data, null, 1), "application/json");
    });
    $("#btn-dl-trace").addEventListener("click", async () => {
      const p = current();
      if (!p || p.kind !== "browser") return;
      try {
        download(`ag-trace-${slug(p.label)}.json`, await ag.trace(p.data.mode), "application/json");
      } catch (e) {
        banner("error", "Trace: " + esc(errText(e)));
      }
    });
    let t;
    window.addEventListener("resize", () => { clearTimeout(t); t = setTimeout(() => { renderLoss(); renderModes(); }, 100); });
  }
  function slug(s) { return s.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, ""); }

  function setBusy(b, training) {
    state.busy = b;
    const can = state.ready && !b;
    $("#btn-train").disabled = !can;
    $("#btn-profile").disabled = !can;
    $("#btn-stop").disabled = !(b && training);
    for (const i of document.querySelectorAll("#train-form input, #train-form select")) i.disabled = b;
    document.body.classList.toggle("busy", b);
  }

  function readForm() {
    const f = $("#train-form");
    const bad = [...f.querySelectorAll("input")].filter((i) => !i.checkValidity());
    for (const i of f.querySelectorAll("input")) i.setAttribute("aria-invalid", String(!i.checkValidity()));
    if (bad.length) {
      bad[0].focus();
      throw new Error(`${bad[0].labels[0].firstChild.textContent.trim()}: ${bad[0].validationMessage}`);
    }
    const n = (id) => Number($(id).value);
    if (state.app) {
      const cfg = { device: $("#f-device").value };
      for (const i of f.querySelectorAll("input[data-param]")) cfg[i.dataset.param] = Number(i.value);
      for (const i of f.querySelectorAll("select[data-choice]")) cfg[i.dataset.choice] = i.value;
      for (const i of f.querySelectorAll("input[data-string]")) cfg[i.dataset.string] = i.value;
      for (const [k, v] of Object.entries(state.files || {})) cfg[k] = v;
      return { cfg, steps: n("#f-steps"), psteps: n("#f-psteps"), every: n("#f-every") };
    }
    return {
      cfg: { width: n("#f-width"), depth: n("#f-depth"), batch: n("#f-batch"), lr: n("#f-lr"), device: $("#f-device").value },
      steps: n("#f-steps"),
      psteps: n("#f-psteps"),
      every: n("#f-every"),
    };
  }

  async function ensureBuilt(cfg) {
    const key = JSON.stringify(cfg);
    if (state.built === key) return false;
    setStatus(state.app ? `Building ${state.app.name}…` : `Building a ${cfg.depth}×${cfg.width} MLP…`);
    const info = await ag.build(cfg);
    state.built = key;
    state.info = info;
    state.losses = [];
    state.stepMS = [];
    $("#device-name").textContent = info.device;
    if (state.app) {
      setModes(info.modes);
      // An app whose Trainer has no Params() reports 0: say nothing
      // rather than "0 parameters".
      $("#model-desc").textContent = state.app.describe + (info.params > 0 ? ` · ${info.params.toLocaleString()} parameters` : "") + (info.built ? ` · ${info.built}` : "");
      state.metrics0 = info.eval ? await ag.eval() : null;
      if (info.eval) document.body.dataset.metrics0 = JSON.stringify(state.metrics0);
      renderMetrics(state.metrics0);
      $("#sample").hidden = true;
    } else {
      $("#model-desc").textContent = `${cfg.depth} Linear layers of ${cfg.width}×${cfg.width} (${info.params.toLocaleString()} parameters), ReLU, batch ${cfg.batch}, Adam lr ${cfg.lr}, MSE · ${fmtNum(info.flops / 1e6)} MFLOP per step`;
    }
    for (const w of info.warnings) if (!/WebGPU is not available/.test(w)) banner("warn", esc(w));
    renderLoss();
    return true;
  }

  // saveCheckpoint downloads the built model's state (app.Checkpointer).
  async function saveCheckpoint() {
    if (state.busy || !state.info) { setStatus("Train or build the model before saving it.", "error"); return; }
    setBusy(true);
    try {
      const b = await ag.save();
      download(`${state.app.name}-step${state.losses.length ? state.losses[state.losses.length - 1][0] : 0}.safetensors`, b, "application/octet-stream");
      document.body.dataset.saved = String(b.length);
      setStatus(`Saved a checkpoint of ${b.length.toLocaleString()} bytes.`, "ok");
    } catch (e) {
      setStatus("Saving failed: " + errText(e), "error");
    } finally {
      setBusy(false);
    }
  }
  // loadCheckpoint builds the model of the form (when it is not built)
  // and loads the file's state into it.
  async function loadCheckpoint(f) {
    if (!f || state.busy) return;
    let form;
    try { form = readForm(); } catch (e) { setStatus(errText(e), "error"); return; }
    setBusy(true);
    try {
      await ensureBuilt(form.cfg);
      await ag.load(new Uint8Array(await f.arrayBuffer()));
      document.body.dataset.loaded = f.name;
      setStatus(`Loaded ${f.name}.`, "ok");
      if (state.info.eval) {
        const m = await ag.eval();
        renderMetrics(m);
        document.body.dataset.metrics = JSON.stringify(m);
      }
      if (state.info.sample) {
        const txt = await ag.sample();
        $("#sample").textContent = txt;
        $("#sample").hidden = false;
      }
    } catch (e) {
      setStatus("Loading failed: " + errText(e), "error");
      banner("error", "<b>Loading the checkpoint failed:</b> " + esc(errText(e)));
    } finally {
      setBusy(false);
    }
  }

  async function train() {
    if (state.busy) return;
    let form;
    try { form = readForm(); } catch (e) { setStatus(errText(e), "error"); return; }
    setBusy(true, true);
    state.stopAsked = false;
    try {
      await ensureBuilt(form.cfg);
      // ag.train clears ag.stop's flag when it starts, so a Stop pressed
      // while the model was building would be lost and all steps run
      if (state.stopAsked) {
        setStatus("Stopped before training.", "ok");
        return;
      }
      setStatus(`Training ${form.steps} steps…`);
      let pending = false;
      const opts = { every: form.every };
      const progress = (step, loss, ms) => {
        state.losses.push([step, loss]);
        state.stepMS.push(ms);
        if (!pending) {
          pending = true;
          requestAnimationFrame(() => { pending = false; renderLoss(); });
        }
      };
      // A model that samples shows a sample as it learns: a long train
      // runs in 4 parts, a sample after each but the last.
      const parts = state.app && state.info.sample && form.steps >= 50 ? 4 : 1;
      let r = null;
      for (let k = 0, left = form.steps; k < parts && left > 0 && !(r && (r.stopped || state.stopAsked)); k++) {
        const n = k === parts - 1 ? left : Math.ceil(form.steps / parts);
        left -= n;
        const p = await ag.train(n, progress, opts);
        r = r ? { ...p, steps: r.steps + p.steps, first_loss: r.first_loss, step_ms: r.step_ms.concat(p.step_ms) } : p;
        if (k < parts - 1 && left > 0 && !p.stopped && !state.stopAsked) {
          const txt = await ag.sample();
          $("#sample").textContent = `after ${p.total} steps:\n${txt}`;
          $("#sample").hidden = false;
          document.body.dataset.samples = String(+(document.body.dataset.samples || 0) + 1);
        }
      }
      r.stopped = r.stopped || state.stopAsked;
      renderLoss();
      const ms = median(r.step_ms);
      let measured = "";
      if (state.app && state.info.eval) {
        setStatus("Measuring…");
        const m = await ag.eval();
        renderMetrics(m);
        document.body.dataset.metrics = JSON.stringify(m);
        measured = " " + Object.keys(m).sort().map((k) => `${k} ${fmtNum(m[k], 3)}`).join(", ") + ".";
      }
      if (state.app && state.info.sample) {
        setStatus("Sampling…");
        const txt = await ag.sample();
        $("#sample").textContent = txt;
        $("#sample").hidden = false;
        document.body.dataset.sample = txt;
        document.body.dataset.samples = String(+(document.body.dataset.samples || 0) + 1);
      }
      setStatus(`${r.stopped ? "Stopped after" : "Trained"} ${r.steps} steps: loss ${fmtNum(r.first_loss, 4)} → ${fmtNum(r.last_loss, 4)}, median ${fmtMS(ms)} per step.${measured}`, "ok");
      document.body.dataset.trained = String(r.total);
    } catch (e) {
      setStatus("Training failed: " + errText(e), "error");
      banner("error", "<b>Training failed:</b> " + esc(errText(e)));
    } finally {
      setBusy(false);
    }
  }

  async function profileModes() {
    if (state.busy) return;
    let form;
    try { form = readForm(); } catch (e) { setStatus(errText(e), "error"); return; }
    setBusy(true, false);
    try {
      await ensureBuilt(form.cfg);
      for (const mode of MODES) {
        setStatus(`Profiling ${form.psteps} steps in ${mode} mode…`);
        const data = await ag.profile({ mode, steps: form.psteps });
        addProfile({ id: "browser-" + mode, label: mode, kind: "browser", data });
      }
      setStatus(`Profiled ${form.psteps} steps in each of ${MODES.join(", ")} on ${state.profiles.find((p) => p.kind === "browser").data.device}.`, "ok");
      document.body.dataset.profiled = "true";
    } catch (e) {
      setStatus("Profiling failed: " + errText(e), "error");
      banner("error", "<b>Profiling failed:</b> " + esc(errText(e)));
    } finally {
      setBusy(false);
    }
  }

  // The shape of a profile JSON (profile.Profile, schema 1, plus the page's
  // own mode and mode_note): each field the page reads and its type. A key
  // ending in "?" may be missing or null; [spec] is an array of spec. Other
  // fields are ignored. Checked before anything is rendered, because one
  // wrong type inside the render would leave a half-drawn page.
  const NUM = "number", STR = "string", BOOL = "boolean";
  // calls: op calls (a composite of several nodes is one); files written
  // before ag counted calls have count (their nodes recorded) instead.
  const OPROW = { op: STR, "calls?": NUM, "count?": NUM, nodes: NUM, create_ms: NUM, compute_ms: NUM, ms: NUM, pct: NUM,
    "timing?": STR, "measured_pct?": NUM, "ir?": [{ op: STR, nodes: NUM, compute_ms: NUM }] };
  const REPORT = {
    pass: STR, ops: NUM, runs: NUM, total_ms: NUM, transfer_pct: NUM, ceiling: NUM,
    stages: [{ stage: STR, ms: NUM, pct: NUM }],
    "by_op?": [OPROW],
    "by_layer?": [OPROW],
  };
  const PROFILE = {
    schema: NUM, "device?": STR, "timer?": STR, "mode?": STR, "mode_note?": STR,
    steps: NUM, step_total_ms: NUM, "coverage_pct?": NUM, "compiles?": NUM,
    forward: REPORT, backward: REPORT, update: REPORT,
    "transfers?": { "counted?": BOOL, "sites?": [{ dir: STR, site: STR, count: NUM, bytes: NUM }],
      "up_count?": NUM, "up_bytes?": NUM, "down_count?": NUM, "down_bytes?": NUM },
    "launches?": { total: NUM, "sites?": [{ site: STR, count: NUM }] },
    "stage_info?": [{ stage: STR, doc: STR }],
  };

  function typeName(v) {
    if (v === null) return "null";
    if (Array.isArray(v)) return "an array";
    if (typeof v === "number" && !isFinite(v)) return "not a finite number";
    return { object: "an object", string: "a string", number: "a number", boolean: "a boolean" }[typeof v] || typeof v;
  }

  // checkShape returns "" when v fits spec, else what is wrong and where
  // ("forward.stages[0].pct is a string ("12"), want a number").
  function checkShape(v, spec, path) {
    const at = path || "the file";
    if (Array.isArray(spec)) {
      if (!Array.isArray(v)) return `${at} is ${typeName(v)}, want an array`;
      for (let i = 0; i < v.length; i++) {
        const why = checkShape(v[i], spec[0], `${path}[${i}]`);
        if (why) return why;
      }
      return "";
    }
    if (typeof spec === "object") {
      if (typeName(v) !== "an object") return `${at} is ${typeName(v)}, want an object`;
      for (const [key, sub] of Object.entries(spec)) {
        const optional = key.endsWith("?");
        const k = optional ? key.slice(0, -1) : key;
        if (v[k] === undefined || v[k] === null) {
          if (optional) continue;
          return `field ${path ? path + "." : ""}${k} is missing`;
        }
        const why = checkShape(v[k], sub, path ? `${path}.${k}` : k);
        if (why) return why;
      }
      return "";
    }
    if (typeof v !== spec || (spec === NUM && !isFinite(v))) {
      const shown = JSON.stringify(v);
      return `field ${at} is ${typeName(v)}${shown && shown.length <= 40 ? ` (${shown})` : ""}, want a ${spec}`;
    }
    return "";
  }

  function validProfile(d) {
    if (!d || typeof d !== "object" || Array.isArray(d)) return `the file holds ${typeName(d)}, want a JSON object`;
    if (d.schema !== 1) return `schema ${JSON.stringify(d.schema)}, this page reads schema 1`;
    return checkShape(d, PROFILE, "");
  }

  // fileError reports a file that could not be opened; one banner at a
  // time, so a series of bad files does not stack up.
  function fileError(name, html) {
    banner("error", `<b>${esc(name)}</b> ${html}`, "file-banner");
    setStatus(`Could not open ${name}; the view is unchanged.`, "error");
  }

  async function openFile(ev) {
    const f = ev.target.files[0];
    ev.target.value = "";
    if (!f) return;
    let data;
    try {
      data = JSON.parse(await f.text());
    } catch (e) {
      fileError(f.name, `is not JSON: ${esc(errText(e))}`);
      return;
    }
    const why = validProfile(data);
    if (why) {
      fileError(f.name, `is not an ag profile: ${esc(why)}. Write one with <code>ag demo -profile-json FILE</code>.`);
      return;
    }
    const label = (data.mode ? data.mode + " · " : "") + f.name.replace(/\.json$/i, "");
    if (!addProfile({ id: "file-" + f.name, label, kind: "file", data, file: f.name })) return;
    document.getElementById("file-banner")?.remove();
    setStatus(`Opened ${f.name} (${data.device || "unknown device"}, ${data.steps} steps).`, "ok");
    document.body.dataset.opened = f.name;
  }

  // addProfile adds (or replaces) a profile and renders it. If rendering
  // throws, the profile list goes back to what it was and is drawn again,
  // so one bad profile cannot break every later one; it returns whether
  // the profile was added.
  function addProfile(p) {
    const before = { profiles: [...state.profiles], selected: state.selected };
    const i = state.profiles.findIndex((q) => q.id === p.id);
    if (i >= 0) state.profiles[i] = p; else state.profiles.push(p);
    state.selected = p.id;
    try {
      renderProfiles();
      return true;
    } catch (e) {
      state.profiles = before.profiles;
      state.selected = before.selected;
      try { renderProfiles(); } catch (e2) { console.warn("re-rendering the previous profiles:", e2); }
      fileError(p.file || p.label, `could not be drawn: ${esc(errText(e))}`);
      return false;
    }
  }
  function renderProfiles() {
    const sel = $("#f-prof");
    const opts = state.profiles.map((q) => el("option", { value: q.id, text: (q.kind === "file" ? "file: " : "") + q.label }));
    sel.replaceChildren(...(opts.length ? opts : [el("option", { text: "none yet" })]));
    sel.value = state.selected;
    sel.disabled = !state.profiles.length;
    renderModes();
    renderDetail();
    renderCompareChoices();
  }
  function current() { return state.profiles.find((p) => p.id === state.selected); }

  // ---------- loss chart ----------
  function niceTicks(lo, hi, n) {
    const span = hi - lo || Math.abs(hi) || 1;
    const step0 = span / n;
    const mag = Math.pow(10, Math.floor(Math.log10(step0)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => span / s <= n) || 10 * mag;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }

  function renderLoss() {
    const box = $("#loss-chart");
    const pts = state.losses;
    const n = pts.length;
    $("#st-steps").textContent = n ? String(pts[n - 1][0]) : "–";
    $("#st-loss").textContent = n ? fmtNum(pts[n - 1][1], 4) : "–";
    $("#st-fell").textContent = n > 1 ? (pts[0][1] / pts[n - 1][1]).toFixed(1) + "×" : "–";
    $("#st-ms").textContent = state.stepMS.length ? fmtMS(median(state.stepMS.slice(-50))).replace(" ms", "") : "–";
    if (!n) {
      box.replaceChildren(el("p", { class: "empty", text: "Train a model to see its loss fall." }));
      return;
    }
    const W = Math.max(280, box.clientWidth || 600), H = Math.round(Math.min(300, Math.max(200, W * 0.42)));
    const m = { l: 52, r: 14, t: 12, b: 34 };
    const losses = pts.map((p) => p[1]).filter((v) => v > 0 && isFinite(v));
    const lmin = Math.min(...losses), lmax = Math.max(...losses);
    const log = lmax / lmin > 20;
    const fy = log ? Math.log10 : (v) => v;
    let y0 = log ? Math.floor(fy(lmin) * 2) / 2 : 0, y1 = log ? Math.ceil(fy(lmax) * 2) / 2 : lmax * 1.05;
    if (y1 <= y0) y1 = y0 + 1;
    const x0 = pts[0][0], x1 = Math.max(pts[n - 1][0], x0 + 1);
    const X = (s) => m.l + (s - x0) / (x1 - x0) * (W - m.l - m.r);
    const Y = (v) => m.t + (1 - (fy(v) - y0) / (y1 - y0)) * (H - m.t - m.b);
    const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
      "aria-label": `Loss over ${n} steps, from ${fmtNum(pts[0][1], 4)} to ${fmtNum(pts[n - 1][1], 4)}${log ? " (log scale)" : ""}` });
    const grid = svg("g", { class: "grid" });
    const yt = log ? niceTicks(y0, y1, 5).filter((v) => Number.isInteger(v * 2)) : niceTicks(y0, y1, 5);
    for (const t of yt) {
      const v = log ? Math.pow(10, t) : t;
      const y = Y(v);
      grid.append(svg("line", { x1: m.l, x2: W - m.r, y1: y, y2: y }));
      grid.append(svg("text", { x: m.l - 6, y: y + 4, "text-anchor": "end" }, fmtNum(v, 2)));
    }
    for (const t of niceTicks(x0, x1, Math.max(2, Math.floor(W / 90)))) {
      if (t < x0) continue;
      const x = X(t);
      grid.append(svg("line", { x1: x, x2: x, y1: m.t, y2: H - m.b, class: "v" }));
      grid.append(svg("text", { x, y: H - m.b + 16, "text-anchor": "middle" }, String(t)));
    }
    grid.append(svg("text", { x: (m.l + W - m.r) / 2, y: H - 4, "text-anchor": "middle", class: "axis-label" }, "step"));
    grid.append(svg("text", { x: 12, y: m.t + (H - m.t - m.b) / 2, "text-anchor": "middle", class: "axis-label",
      transform: `rotate(-90 12 ${m.t + (H - m.t - m.b) / 2})` }, log ? "loss (log)" : "loss"));
    s.append(grid);
    const d = pts.filter((p) => p[1] > 0).map((p, i) => `${i ? "L" : "M"}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join("");
    s.append(svg("path", { d, class: "loss-line" }));
    const last = pts[n - 1];
    s.append(svg("circle", { cx: X(last[0]), cy: Y(last[1]), r: 3.5, class: "loss-dot" }));
    box.replaceChildren(s);
    // For tests and tools reading the page: the curve's ends.
    Object.assign(box.dataset, { points: n, first: pts[0][1], last: last[1] });
  }

  // ---------- breakdown ----------
  function buildLegend() {
    $("#legend").replaceChildren(...STAGES.map((st) =>
      el("li", { title: STAGE_INFO[st] }, el("span", { class: "swatch " + stageClass(st), "aria-hidden": "true" }), st)));
  }

  function passRows(d) {
    return PASSES.map((p) => d[p]).filter((r) => r && !(r.ops === 0 && r.runs === 0 && r.total_ms === 0));
  }

  function renderModes() {
    const box = $("#modes");
    if (!state.profiles.length) { box.innerHTML = EMPTY.modes; return; }
    if (!STAGES.length) { // stages.json did not load: take a profile's own list
      const withInfo = state.profiles.find((p) => p.data.stage_info);
      if (withInfo) { setStages(withInfo.data.stage_info); buildLegend(); }
    }
    let maxMS = 0;
    for (const p of state.profiles) for (const r of passRows(p.data)) maxMS = Math.max(maxMS, r.total_ms / Math.max(1, p.data.steps));
    box.replaceChildren(...state.profiles.map((p) => modeCard(p, maxMS)));
  }

  function modeCard(p, maxMS) {
    const d = p.data;
    const steps = Math.max(1, d.steps || 0);
    const card = el("article", { class: "mode" + (p.id === state.selected ? " selected" : ""), "data-mode": d.mode || "file", "data-id": p.id });
    const head = el("header", {},
      el("h3", {}, p.label, el("span", { class: "badge " + p.kind, text: p.kind === "file" ? "native file" : "browser" })),
      el("p", { class: "dev", text: d.device || "unknown device" }));
    if (d.mode_note) head.append(el("p", { class: "note", text: d.mode_note }));
    card.append(head);
    const perStep = d.steps ? d.step_total_ms / d.steps : NaN;
    card.append(el("dl", { class: "kpis" },
      kpi("per step", fmtMS(perStep)),
      kpi("steps", String(d.steps ?? "–")),
      kpi("attributed", d.coverage_pct ? d.coverage_pct.toFixed(0) + "%" : "–", "stage time over step wall time")));
    card.append(passBars(d, steps, maxMS));
    card.append(el("div", { class: "table-wrap" }, passTable(d, steps)));
    const sel = el("button", { type: "button", class: "link", text: p.id === state.selected ? "showing its ops below" : "show its ops and counters" });
    sel.disabled = p.id === state.selected;
    sel.addEventListener("click", () => { state.selected = p.id; $("#f-prof").value = p.id; renderModes(); renderDetail(); });
    card.append(sel);
    return card;
  }

  function kpi(k, v, title) {
    return el("div", { title }, el("dt", { text: k }), el("dd", { text: v }));
  }

  // passBars draws one stacked bar per pass: stage shares (scale "share") or
  // per-step ms on a scale shared by every card (scale "time").
  function passBars(d, steps, maxMS) {
    const rows = passRows(d);
    const W = 320, labelW = 70, valW = 66, barH = 20, gap = 10;
    const H = rows.length * (barH + gap) + 2;
    const bw = W - labelW - valW;
    const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "bars", role: "img",
      "aria-label": "Stage shares per pass: " + rows.map((r) => `${r.pass} ${fmtMS(r.total_ms / steps)} per step`).join(", ") });
    rows.forEach((r, i) => {
      const y = i * (barH + gap) + 1;
      const perStep = r.total_ms / steps;
      const full = state.scale === "time" && maxMS > 0 ? bw * perStep / maxMS : bw;
      const g = svg("g", { class: "bar", "data-pass": r.pass, "data-total-ms": r.total_ms });
      g.append(svg("text", { x: 0, y: y + barH * 0.7, class: "lbl" }, r.pass));
      g.append(svg("rect", { x: labelW, y, width: bw, height: barH, class: "track", rx: 3 }));
      let x = labelW;
      const ordered = [...r.stages].sort((a, b) => STAGES.indexOf(a.stage) - STAGES.indexOf(b.stage));
      for (const st of ordered) {
        const w = full * st.pct / 100;
        const seg = svg("rect", { x, y, width: Math.max(0, w), height: barH, class: "seg " + stageClass(st.stage),
          "data-stage": st.stage, "data-pct": st.pct, "data-ms": st.ms });
        seg.append(svg("title", {}, `${r.pass} ${st.stage}: ${st.pct.toFixed(1)}% (${fmtMS(st.ms / steps)} per step) — ${STAGE_INFO[st.stage] || ""}`));
        g.append(seg);
        // The stage is named on the bar where it fits (the legend's
        // colours alone left the names to hover tooltips).
        const pct = st.pct.toFixed(0) + "%";
        const lbl = w > 6.2 * (st.stage.length + pct.length + 1) + 8 ? `${st.stage} ${pct}` : w > 34 ? pct : "";
        if (lbl && state.scale === "share") {
          g.append(svg("text", { x: x + w / 2, y: y + barH * 0.7, class: "seg-lbl", "text-anchor": "middle" }, lbl));
        }
        x += w;
      }
      g.append(svg("text", { x: W, y: y + barH * 0.7, class: "val", "text-anchor": "end" }, fmtMS(perStep)));
      s.append(g);
    });
    return s;
  }

  // passTable lists what each pass would gain resident: its transfer share
  // and ceiling, and its op count.
  function passTable(d, steps) {
    const t = el("table", { class: "pass-table" });
    t.append(el("caption", { class: "sr-only", text: "Transfer share and resident ceiling per pass" }));
    t.append(el("thead", {}, el("tr", {},
      el("th", { scope: "col", class: "txt", text: "pass" }),
      el("th", { scope: "col", text: "ms/step" }),
      el("th", { scope: "col", text: "transfer", title: "upload + download as a share of the pass" }),
      el("th", { scope: "col", text: "ceiling", title: "total / (total - transfer): the most a fully resident pass could gain" }),
      el("th", { scope: "col", text: "ops" }))));
    const tb = el("tbody");
    for (const r of passRows(d)) {
      tb.append(el("tr", { "data-pass": r.pass },
        el("th", { scope: "row", class: "txt", text: r.pass }),
        el("td", { text: fmtMS(r.total_ms / steps) }),
        el("td", { class: "transfer", text: r.transfer_pct.toFixed(1) + "%" }),
        el("td", { class: "ceiling", text: r.ceiling >= 1000 ? "∞" : r.ceiling.toFixed(2) + "×" }),
        el("td", { text: String(Math.round(r.ops / steps)) })));
    }
    t.append(tb);
    return t;
  }

  // ---------- detail: ops table and counters ----------
  function renderDetail() {
    const p = current();
    $("#btn-dl-json").disabled = !p;
    $("#btn-dl-trace").disabled = !p || p.kind !== "browser";
    $("#btn-dl-trace").title = p && p.kind !== "browser" ? "traces come with browser profiles; native runs write theirs with ag demo -trace" : "";
    if (p && p.data.device) {
      // The header names the device of what is shown: an opened file's own.
      $("#device-name").textContent = p.data.device + (p.kind === "file" ? ` (file ${p.file})` : "");
    }
    renderOps();
    renderCounters();
    for (const c of document.querySelectorAll(".mode")) c.classList.toggle("selected", c.dataset.id === state.selected);
  }

  // TIMINGS says how a row's compute time was obtained (profile.Timing);
  // every kind but "measured" is marked ≈ wherever its time is shown.
  const TIMINGS = {
    measured: "its kernels timed one by one",
    split: "a fused kernel's measured time, shared among the ops it runs by their cost (max(FLOPs, 10 × bytes))",
    estimated: "the measured time of a whole graph, shared by per-kernel times measured in calibration runs",
    even: "no per-kernel timer: the run's time split evenly among its nodes",
    mixed: "its IR nodes timed in different ways (measured, split, estimated): the share measured in brackets, or none",
  };
  const measured = (o) => !o.timing || o.timing === "measured" || !(o.compute_ms > 0);
  function timingText(o) {
    if (!o.timing) return "not recorded";
    if (!(o.compute_ms > 0)) return "–";
    if (o.timing === "mixed") {
      // "mixed (0% measured)" read as a contradiction: none measured is
      // said so, and a share under 1% is not rounded to 0.
      const m = o.measured_pct || 0;
      if (m <= 0) return "≈ none measured";
      return `≈ mixed (${m < 1 ? "<1" : m >= 99 && m < 100 ? ">99" : m.toFixed(0)}% measured)`;
    }
    return o.timing === "measured" ? "measured" : "≈ " + o.timing;
  }
  // approx renders a number, marked ≈ when it was not measured.
  function approx(text, exact) {
    return exact ? document.createTextNode(text) : el("span", {}, el("span", { class: "est", title: "estimated, not measured per kernel", text: "≈" }), text);
  }

  function renderTimingNote(p, rows) {
    const box = $("#timing-note");
    if (!p) { box.textContent = "Ops are named as you wrote them (MatMul, ReLU, Linear's bias add); open a row for the IR ops it ran."; return; }
    const kinds = [...new Set(rows.filter((o) => o.compute_ms > 0 && o.timing).map((o) => o.timing))];
    const parts = [el("b", { text: "Timer: " }), p.data.timer || "not recorded in this profile (written before ag recorded its timer)", ". "];
    const est = kinds.filter((k) => k !== "measured");
    if (est.length) {
      parts.push("≈ marks a time not measured per kernel: ");
      est.forEach((k, i) => parts.push(el("b", { text: k }), ` = ${TIMINGS[k] || k}${i < est.length - 1 ? "; " : ". "}`));
    } else if (kinds.length) {
      parts.push("Every time below was measured. ");
    }
    parts.push("Ops carry the names you wrote; ▸ opens a row to the IR ops it ran.");
    box.replaceChildren(...parts);
    box.dataset.timings = kinds.join(",");
  }

  function renderOps() {
    const p = current();
    const tbody = $("#op-table tbody");
    for (const th of document.querySelectorAll("#op-table th")) {
      if (th.dataset.key === state.sort.key) th.setAttribute("aria-sort", state.sort.dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    }
    const group = $("#f-group").value;
    if (!p) { tbody.innerHTML = EMPTY.ops; renderTimingNote(null, []); return; }
    const r = p.data[$("#f-pass").value];
    const rows = [...((r && r[group]) || [])];
    renderTimingNote(p, rows);
    const k = state.sort.key, dir = state.sort.dir;
    const str = (o) => (k === "timing" ? timingText(o) : o.op);
    rows.sort((a, b) => (k === "op" || k === "timing" ? str(a).localeCompare(str(b)) : ((a[k] ?? 0) - (b[k] ?? 0))) * dir || a.op.localeCompare(b.op));
    if (!rows.length) {
      const what = group === "by_layer" ? (r && r.by_op && r.by_op.length ? "No layer scopes in this pass (ops outside nn modules, or a file written before ag recorded layers)." : "No layers recorded in this pass.") : "No ops recorded in this pass.";
      tbody.replaceChildren(el("tr", {}, el("td", { colspan: 8, class: "empty", text: what })));
      return;
    }
    // The stages that belong to no op, so the rows add up to the pass total.
    const other = r.total_ms - rows.reduce((a, o) => a + o.ms, 0);
    const otherPct = r.total_ms > 0 ? 100 * other / r.total_ms : 0;
    const maxPct = Math.max(...rows.map((o) => o.pct), otherPct, 1);
    const bar = (pctv, cls) => el("span", { class: "pct-bar" + (cls ? " " + cls : ""), style: `width:${(100 * pctv / maxPct).toFixed(1)}%` });
    const out = [];
    for (const o of rows) {
      const exact = measured(o);
      const ir = o.ir || [];
      const opens = ir.length > 1 || (ir.length === 1 && ir[0].op !== o.op.toLowerCase());
      const open = opens && state.expanded.has(o.op);
      let name = o.op;
      if (opens) {
        name = el("button", { type: "button", class: "expand", "aria-expanded": String(open), title: `the IR ops ${o.op} ran`, text: o.op });
        name.addEventListener("click", () => {
          if (state.expanded.has(o.op)) state.expanded.delete(o.op); else state.expanded.add(o.op);
          renderOps();
        });
      }
      out.push(el("tr", { "data-op": o.op, "data-timing": o.timing || "" },
        el("th", { scope: "row", class: "txt" }, name),
        o.calls !== undefined && o.calls !== null ? el("td", { text: String(o.calls) })
          : el("td", { title: "written before ag counted calls (this file counted nodes)", text: "—" }),
        el("td", { text: String(o.nodes) }),
        el("td", { text: o.create_ms.toFixed(3) }),
        el("td", { class: "compute" }, approx(o.compute_ms.toFixed(3), exact)),
        el("td", {}, approx(o.ms.toFixed(3), exact)),
        el("td", { class: "pct" }, bar(o.pct), approx(o.pct.toFixed(1), exact)),
        el("td", { class: "txt timing", title: TIMINGS[o.timing] || "", text: timingText(o) })));
      if (!open) continue;
      for (const i of ir) {
        const ipct = r.total_ms > 0 ? 100 * i.compute_ms / r.total_ms : 0;
        out.push(el("tr", { class: "ir", "data-ir-of": o.op },
          el("th", { scope: "row", class: "txt", text: i.op }),
          el("td"), el("td", { text: String(i.nodes) }), el("td"),
          el("td", {}, approx(i.compute_ms.toFixed(3), exact)), el("td"),
          el("td", { class: "pct" }, bar(ipct, "ir"), approx(ipct.toFixed(1), exact)),
          el("td", { class: "txt timing", text: "IR op" })));
      }
    }
    if (other > 1e-6) {
      // Named by stage, so a row that is most of the pass says what it is
      // (a captured step's forward: its read-back and the wait for it).
      const stages = (r.stages || []).filter((s) => s.stage !== "create" && s.stage !== "compute" && s.ms > 0)
        .map((s) => `${s.stage} ${s.ms.toFixed(3)}`).join(", ");
      const label = group === "by_layer" ? "(outside layers, other stages)" : "(other stages)";
      // the stages, ms each, across the calls..compute columns
      out.push(el("tr", { class: "other" },
        el("th", { scope: "row", class: "txt", text: label }),
        el("td", { colspan: 4, class: "txt other-stages", title: "time no op owns, by stage (ms); the legend says what each stage is", text: stages }),
        el("td", { text: other.toFixed(3) }),
        el("td", { class: "pct" }, bar(otherPct, "other"), el("span", { text: otherPct.toFixed(1) })),
        el("td")));
    }
    tbody.replaceChildren(...out);
  }

  // ---------- compare ----------
  function renderCompareChoices() {
    const ids = state.profiles.map((q) => q.id);
    const has = (id) => ids.includes(id);
    // Until the user picks, lazy against captured (the question the page
    // is most often asked), else the first two profiles.
    if (!state.cmp.chosen || !has(state.cmp.a)) state.cmp.a = has("browser-lazy") ? "browser-lazy" : (ids[0] ?? null);
    if (!state.cmp.chosen || !has(state.cmp.b) || state.cmp.b === state.cmp.a) {
      const pref = state.cmp.a === "browser-lazy" && has("browser-captured") ? "browser-captured" : ids.find((id) => id !== state.cmp.a);
      state.cmp.b = pref ?? null;
    }
    for (const [sel, v] of [[$("#f-cmp-a"), state.cmp.a], [$("#f-cmp-b"), state.cmp.b]]) {
      const opts = state.profiles.map((q) => el("option", { value: q.id, text: (q.kind === "file" ? "file: " : "") + q.label }));
      sel.replaceChildren(...(opts.length ? opts : [el("option", { text: "none yet" })]));
      if (v) sel.value = v;
      sel.disabled = state.profiles.length < 2;
    }
    renderCompare();
  }

  // diffCell is B − A per step, marked up (slower) or down (faster) when it
  // is 10% or more of the larger and at least 5 µs.
  function diffCells(a, b) {
    const d = b - a, big = Math.max(Math.abs(a), Math.abs(b));
    const cls = Math.abs(d) >= 0.1 * big && Math.abs(d) >= 0.005 ? (d > 0 ? "up" : "down") : "";
    const ratio = a > 0 ? (b / a).toFixed(2) + "×" : "–";
    return [el("td", { class: "delta " + cls, "data-delta": d.toFixed(6), text: (d > 0 ? "+" : d < 0 ? "−" : "") + fmtMS(Math.abs(d)) }),
      el("td", { class: cls, text: ratio })];
  }

  function cmpTable(caption, nameA, nameB, rows) {
    const t = el("table", { class: "cmp" });
    t.append(el("caption", { text: caption }));
    t.append(el("thead", {}, el("tr", {},
      el("th", { scope: "col", class: "txt", text: "" }),
      el("th", { scope: "col", text: "A " + nameA }), el("th", { scope: "col", text: "B " + nameB }),
      el("th", { scope: "col", text: "Δ B − A" }), el("th", { scope: "col", text: "B / A" }))));
    const tb = el("tbody");
    for (const [name, a, b, exactA, exactB] of rows) {
      tb.append(el("tr", { "data-name": name },
        el("th", { scope: "row", class: "txt", text: name }),
        el("td", {}, approx(fmtMS(a), exactA !== false)), el("td", {}, approx(fmtMS(b), exactB !== false)), ...diffCells(a, b)));
    }
    t.append(tb);
    return el("div", { class: "table-wrap" }, t);
  }

  function renderCompare() {
    const box = $("#compare");
    const A = state.profiles.find((q) => q.id === state.cmp.a), B = state.profiles.find((q) => q.id === state.cmp.b);
    if (!A || !B || A === B) { box.innerHTML = EMPTY.compare; return; }
    const sa = Math.max(1, A.data.steps || 0), sb = Math.max(1, B.data.steps || 0);
    const pass = $("#f-pass").value, group = $("#f-group").value;
    const per = (r, steps) => (r ? r.total_ms / steps : 0);
    const passes = PASSES.map((ps) => [ps, per(A.data[ps], sa), per(B.data[ps], sb)]);
    passes.push(["step (wall)", A.data.step_total_ms / sa, B.data.step_total_ms / sb]);
    const ra = A.data[pass] || {}, rb = B.data[pass] || {};
    const stageMap = (r, steps) => Object.fromEntries((r.stages || []).map((x) => [x.stage, x.ms / steps]));
    const ma = stageMap(ra, sa), mb = stageMap(rb, sb);
    const stages = STAGES.filter((st) => st in ma || st in mb).map((st) => [st, ma[st] || 0, mb[st] || 0]);
    const opMap = (r, steps) => Object.fromEntries((r[group] || []).map((o) => [o.op, { ms: o.ms / steps, exact: measured(o) }]));
    const oa = opMap(ra, sa), ob = opMap(rb, sb);
    const names = [...new Set([...Object.keys(oa), ...Object.keys(ob)])];
    const ops = names.map((n) => [n, oa[n]?.ms || 0, ob[n]?.ms || 0, oa[n]?.exact, ob[n]?.exact])
      .sort((x, y) => Math.max(y[1], y[2]) - Math.max(x[1], x[2]) || x[0].localeCompare(y[0])).slice(0, 40);
    const devs = A.data.device === B.data.device ? `both on ${A.data.device || "an unknown device"}` : `A on ${A.data.device || "?"}, B on ${B.data.device || "?"}`;
    box.replaceChildren(
      el("p", { class: "of", text: `A ${A.label} · B ${B.label} · ${devs} · ms per step` }),
      el("div", { class: "cmp-grid" },
        cmpTable("Passes", A.label, B.label, passes),
        cmpTable(`Stages of the ${pass}`, A.label, B.label, stages),
        cmpTable(`${group === "by_layer" ? "Layers" : "Ops"} of the ${pass}`, A.label, B.label, ops)));
  }

  function renderCounters() {
    const p = current();
    const box = $("#counters");
    if (!p) { box.innerHTML = EMPTY.counters; return; }
    const d = p.data, steps = Math.max(1, d.steps || 0);
    const t = d.transfers || { sites: [] }, l = d.launches || { sites: [], total: 0 };
    // Every figure here is per step; the tables below count all the
    // profiled steps and say so (bytes up "1.5 KiB" beside
    // "uploads/step 1.00" read as one upload of 1.5 KiB).
    const kp = el("dl", { class: "kpis" },
      kpi("launches/step", fmtNum(l.total / steps, 3)),
      kpi("uploads/step", fmtNum((t.up_count || 0) / steps, 3)),
      kpi("bytes up/step", fmtBytes((t.up_bytes || 0) / steps)),
      kpi("downloads/step", fmtNum((t.down_count || 0) / steps, 3)),
      kpi("bytes down/step", fmtBytes((t.down_bytes || 0) / steps)));
    const all = `${d.steps} step${d.steps === 1 ? "" : "s"}`;
    if (d.compiles !== undefined) kp.append(kpi(`compiles, all ${all}`, String(d.compiles)));
    const xt = el("table", { class: "small" }, el("caption", { text: `Transfers by site, all ${all}` }),
      el("thead", {}, el("tr", {}, el("th", { scope: "col", class: "txt", text: "dir" }), el("th", { scope: "col", class: "txt", text: "site" }),
        el("th", { scope: "col", text: "count" }), el("th", { scope: "col", text: "bytes" }))));
    const xb = el("tbody");
    for (const s of t.sites || []) xb.append(el("tr", {}, el("td", { class: "txt", text: s.dir === "up" ? "↑ up" : "↓ down" }),
      el("td", { class: "txt", text: s.site }), el("td", { text: String(s.count) }), el("td", { text: fmtBytes(s.bytes) })));
    if (!(t.sites || []).length) xb.append(el("tr", {}, el("td", { colspan: 4, class: "empty", text: t.counted ? "none" : "not counted" })));
    xt.append(xb);
    const lt = el("table", { class: "small" }, el("caption", { text: `Launches by site, all ${all}` }),
      el("thead", {}, el("tr", {}, el("th", { scope: "col", class: "txt", text: "site" }), el("th", { scope: "col", text: "count" }))));
    const lb = el("tbody");
    for (const s of l.sites || []) lb.append(el("tr", {}, el("td", { class: "txt", text: s.site }), el("td", { text: String(s.count) })));
    lb.append(el("tr", { class: "total" }, el("th", { scope: "row", class: "txt", text: "total" }), el("td", { text: String(l.total) })));
    lt.append(lb);
    box.replaceChildren(el("p", { class: "of", text: `${p.label} · ${d.device || ""} · ${d.steps} steps` }), kp, el("div", { class: "table-wrap" }, xt), el("div", { class: "table-wrap" }, lt));
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
