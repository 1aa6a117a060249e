// Shared by ag.html and tfjs.html: the warm-up rule, the timing loop and
// the statistics, so both peers are timed by exactly the same code.
"use strict";

const bench = {
  // warmup runs step until at least minSteps steps and minMS milliseconds
  // have passed (the first WebGPU steps compile shaders for ~3 s on
  // SwiftShader: they must stay out of the timings), at most maxSteps.
  async warmup(step, {minSteps = 3, minMS = 3000, maxSteps = 50} = {}) {
    const t0 = performance.now();
    let n = 0;
    while (n < maxSteps && (n < minSteps || performance.now() - t0 < minMS)) {
      await step();
      n++;
      bench.status(`warm-up: ${n} steps in ${((performance.now() - t0) / 1e3).toFixed(1)} s`);
    }
    return {steps: n, ms: performance.now() - t0};
  },

  // timed runs n steps and returns each step's wall time in ms and the
  // losses; step must resolve with the loss read back on the host.
  async timed(step, n) {
    const ms = [], losses = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      losses.push(await step());
      ms.push(performance.now() - t0);
      bench.status(`timing: step ${i + 1} of ${n}, ${ms[i].toFixed(1)} ms`);
    }
    return {ms, losses};
  },

  // streamed runs n groups of steps, as ag.train's loop does with reads
  // waited for later: ask() queues a group and returns the promise of its
  // loss, which is awaited once more than depth groups are queued, depth
  // covering about 8 ms of groups (2 to 32, from the groups' mean time).
  // It returns each group's time, between the awaits that returned the
  // read before and its own, and the losses.
  async streamed(ask, n) {
    const ms = [], losses = [], q = [];
    let last = performance.now(), sum = 0;
    const depth = () => (ms.length === 0 ? 2 : Math.min(Math.max(Math.floor(8 / (sum / ms.length)) + 1, 2), 32));
    const take = async () => {
      losses.push(await q.shift());
      const now = performance.now();
      ms.push(now - last);
      sum += now - last;
      last = now;
    };
    for (let i = 0; i < n; i++) {
      q.push(ask());
      while (q.length > depth()) await take();
      if (i % 50 === 49) bench.status(`timing: group ${i + 1} of ${n}`);
    }
    while (q.length) await take();
    return {ms, losses};
  },

  median(xs) {
    const s = [...xs].sort((a, b) => a - b);
    const m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
  },

  summary(ms) {
    return {median_ms: bench.median(ms), min_ms: Math.min(...ms), step_ms: ms};
  },

  // rng is mulberry32: a small seeded generator, so every run of the page
  // trains on the same data.
  rng(seed) {
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  },

  // status shows progress; the driver quotes it when a run times out.
  status(text) {
    document.querySelector("#status").textContent = text;
  },

  // adapterInfo requests a WebGPU adapter as ag does (high-performance) and
  // describes it: adapter.info (vendor, architecture, device, description;
  // driver, backend and type too with --enable-webgpu-developer-features),
  // whether it is a fallback (software) adapter, its features, and with
  // withLimits its limits. {available: false, why} when there is none. Every
  // WebGPU run reports it, so a SwiftShader run is never taken for a GPU one.
  async adapterInfo(withLimits = false) {
    if (!navigator.gpu) {
      return {available: false, why: "navigator.gpu is undefined (WebGPU off, or not a secure context)"};
    }
    let a;
    try {
      a = await navigator.gpu.requestAdapter({powerPreference: "high-performance"});
    } catch (e) {
      return {available: false, why: "requestAdapter threw: " + e};
    }
    if (!a) return {available: false, why: "requestAdapter returned null"};
    const i = a.info || {};
    const out = {
      available: true, vendor: i.vendor || "", architecture: i.architecture || "", device: i.device || "", description: i.description || "",
      is_fallback: !!(i.isFallbackAdapter ?? a.isFallbackAdapter),
      features: [...a.features].sort(),
    };
    for (const k of ["driver", "backend", "type", "subgroupMinSize", "subgroupMaxSize"]) {
      if (i[k] !== undefined && i[k] !== "") out[k] = i[k];
    }
    if (withLimits) {
      out.limits = {};
      for (const k in a.limits) {
        if (typeof a.limits[k] === "number") out.limits[k] = a.limits[k];
      }
    }
    return out;
  },

  // done publishes a result (or an error) on window for the driver.
  done(result) {
    window.benchResult = result;
    document.querySelector("#status").textContent = JSON.stringify(result).slice(0, 400);
    return result;
  },
};
