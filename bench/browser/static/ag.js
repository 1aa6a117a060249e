// ag's side of the browser benchmark: loads ag.wasm (examples/mlp) and
// times the MLP workload through globalThis.ag. The driver (main.go) calls
// runBench once per fresh tab.
"use strict";

const agLoaded = new Promise((resolve, reject) => {
  window.agReady = resolve; // app.Run calls it once globalThis.ag is set
  const go = new Go();
  WebAssembly.instantiateStreaming(fetch("/build/ag.wasm"), go.importObject)
    .then((r) => {
      go.run(r.instance).then(() => reject(new Error("ag.wasm exited")));
    })
    .catch((e) => reject(new Error("loading /build/ag.wasm: " + e)));
});

// runBench times cfg.steps training steps of the model cfg describes on
// cfg.device ("webgpu" or "cpu") in cfg.mode, the loss read back every
// cfg.every steps:
//   lazy:     ag.train(every, null, {every}) per call, timed here around the
//             call (as tfjs.js times its steps) and shared by its steps:
//             recorded, lowered, cached program; the last one's loss read.
//   captured: ag.train(every, null, {mode: "captured", every}), timed the
//             same way: the recorded step replayed.
//   eager:    ag.profile({mode: "eager"}): the profiler's step times.
//   With cfg.stream, lazy and captured are timed as one ag.train(steps)
//   call instead (its step_ms per step), whose reads are waited for a few
//   groups after they are asked.
//   A profile of the same mode follows lazy and captured runs, for the
//   stage breakdown.
// It resolves with {skip: reason} when the device is not there.
async function runBench(cfg) {
  try {
    await agLoaded;
    const devs = await ag.devices();
    if (cfg.device === "webgpu" && !devs.webgpu.ok) {
      return bench.done({skip: "ag: WebGPU not available: " + devs.webgpu.why});
    }
    const info = await ag.build({width: cfg.width, depth: cfg.depth, batch: cfg.batch, lr: cfg.lr, device: cfg.device});
    if (info.name !== cfg.device) {
      return bench.done({skip: `ag.build asked for ${cfg.device} and got ${info.name}: ${info.fallback}`});
    }
    const out = {device: info.device, params: info.params, flops: info.flops, version: ag.version, webgpu: devs.webgpu.why};
    if (cfg.device === "webgpu") out.adapter = await bench.adapterInfo();
    if (cfg.mode === "lazy" || cfg.mode === "captured") {
      const every = cfg.every || 1;
      const step = async () => (await ag.train(every, null, {mode: cfg.mode, every})).last_loss;
      out.warmup = await bench.warmup(step, cfg.warmup);
      if (cfg.stream) {
        // one call, as a page trains: its reads are waited for groups
        // after they are asked; step_ms shares each group's time
        const t0 = performance.now();
        const r = await ag.train(cfg.steps, null, {mode: cfg.mode, every});
        const total = performance.now() - t0;
        Object.assign(out, bench.summary(r.step_ms), {every, stream: true, total_ms: total, mean_ms: total / r.steps,
          first_loss: r.first_loss, last_loss: r.last_loss, profiled: false});
      } else {
        const t = await bench.timed(step, Math.max(1, Math.round(cfg.steps / every)));
        const ms = t.ms.map((v) => v / every); // per step
        Object.assign(out, bench.summary(ms), {every, first_loss: t.losses[0], last_loss: t.losses[t.losses.length - 1], profiled: false});
      }
      if (cfg.profileSteps > 0) out.profile = await ag.profile({mode: cfg.mode, steps: cfg.profileSteps});
    } else if (cfg.mode === "eager") {
      const step = () => ag.profile({mode: cfg.mode, steps: 1});
      out.warmup = await bench.warmup(step, cfg.warmup);
      const p = await ag.profile({mode: cfg.mode, steps: cfg.steps});
      Object.assign(out, bench.summary(p.step_ms), {profiled: true});
      out.profile = p;
    } else {
      throw new Error(`runBench: mode ${cfg.mode}: want lazy, captured or eager`);
    }
    return bench.done(out);
  } catch (e) {
    return bench.done({error: String(e && e.stack || e)});
  }
}

agLoaded.then(
  () => { document.querySelector("#status").textContent = "Ready: " + ag.version; },
  (e) => { document.querySelector("#status").textContent = "Error: " + e.message; console.error(e.message); },
);
