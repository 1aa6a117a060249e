// GPT-2 in the page for browserbench -gpt2: loads gpt2.wasm (examples/gpt2
// compiled for the browser, the same app.Spec the native run trains),
// builds the model from the text the driver serves at /text and times its
// training steps through globalThis.ag. The driver (gpt2.go) calls runBench
// once, in a fresh tab.
"use strict";

const agLoaded = new Promise((resolve, reject) => {
  window.agReady = resolve; // app.Run calls it once globalThis.ag is set
  const go = new Go();
  WebAssembly.instantiateStreaming(fetch("/build/gpt2.wasm"), go.importObject)
    .then((r) => {
      go.run(r.instance).then(() => reject(new Error("gpt2.wasm exited")));
    })
    .catch((e) => reject(new Error("loading /build/gpt2.wasm: " + e)));
});

// fitsAt is the batch a refusal of ag.build names as the largest that fits
// this size ("size 124M fits at batch 2"), 0 when it names none.
function fitsAt(msg) {
  const m = /size \S+ fits at batch (\d+)/.exec(msg);
  return m ? Number(m[1]) : 0;
}

// runBench builds GPT-2 of cfg.size at context cfg.ctx on cfg.device from
// /text, at batch cfg.batch or, when the device refuses that batch (its
// buffers or memory), at the largest batch the refusal names; warms up
// (bench.warmup: WebGPU compiles its shaders in the first steps), then
// times cfg.steps steps, one ag.train(1) call each, timed here around the
// call (every step reads its loss back, as the native run's do). It ends
// with ag.eval()'s metrics (the fixed-batch loss, the unigram entropy, the
// smoothed loss). It resolves with {skip: reason} when the device is not
// there.
async function runBench(cfg) {
  try {
    await agLoaded;
    const devs = await ag.devices();
    if (cfg.device === "webgpu" && !devs.webgpu.ok) {
      return bench.done({skip: "ag: WebGPU not available: " + devs.webgpu.why});
    }
    bench.status("fetching /text");
    const resp = await fetch("/text");
    if (!resp.ok) throw new Error(`fetching /text: HTTP ${resp.status}`);
    const text = await resp.text();
    const params = {size: cfg.size, ctx: cfg.ctx, vocab: cfg.vocab, bpe: cfg.bpe, sample: 0, device: cfg.device, text: {name: cfg.textName, text}};
    let batch = cfg.batch, info, refused = "";
    for (;;) {
      bench.status(`building ${cfg.size} at batch ${batch} (tokenizer from ${text.length} bytes)`);
      try {
        info = await ag.build({...params, batch});
        break;
      } catch (e) {
        const b = fitsAt(String(e));
        if (b === 0 || b >= batch) throw e;
        refused = String(e);
        batch = b;
      }
    }
    if (info.name !== cfg.device) {
      return bench.done({skip: `ag.build asked for ${cfg.device} and got ${info.name}: ${info.fallback}`});
    }
    const out = {device: info.device, params: info.params, batch, refused, built: info.built, setup_ms: info.setup_ms, version: ag.version, webgpu: devs.webgpu.why};
    if (cfg.device === "webgpu") {
      bench.status("built; asking for the adapter's info");
      out.adapter = await bench.adapterInfo();
    }
    bench.status("the first step (WebGPU compiles the step's shaders: minutes on SwiftShader)");
    const step = async () => (await ag.train(1)).last_loss;
    out.warmup = await bench.warmup(step, cfg.warmup);
    const t = await bench.timed(step, cfg.steps);
    Object.assign(out, bench.summary(t.ms), {losses: t.losses, first_loss: t.losses[0], last_loss: t.losses[t.losses.length - 1]});
    out.metrics = await ag.eval();
    return bench.done(out);
  } catch (e) {
    return bench.done({error: String(e && e.stack || e)});
  }
}

agLoaded.then(
  () => { document.querySelector("#status").textContent = "Ready: " + ag.version; },
  (e) => { document.querySelector("#status").textContent = "Error: " + e.message; console.error(e.message); },
);
