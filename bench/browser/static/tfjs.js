// TensorFlow.js side of the browser benchmark: the same MLP as ag's
// workload (depth dense layers width x width, ReLU between, none on the
// last; weights and biases U(-1/sqrt(width), 1/sqrt(width)) as ag's
// nn.NewLinear and PyTorch's nn.Linear; Adam;
// MSE; targets tanh(x·T) of a random teacher T; the data on the device and
// each batch gathered by index), timed per backend. The driver (main.go)
// calls runBench once per fresh tab.
"use strict";

const WASM_DIST = "/node_modules/@tensorflow/tfjs-backend-wasm/dist/";

// useBackend switches tfjs to name and returns what it runs on, or throws
// with the reason tfjs gave (it logs init failures instead of throwing).
async function useBackend(name, wasmThreads) {
  if (name === "wasm") {
    tf.wasm.setWasmPaths(WASM_DIST);
    if (wasmThreads > 0) tf.wasm.setThreadsCount(wasmThreads);
  }
  const said = [];
  const keep = {warn: console.warn, error: console.error};
  console.warn = (...a) => { said.push(a.map(String).join(" ")); keep.warn(...a); };
  console.error = (...a) => { said.push(a.map(String).join(" ")); keep.warn(...a); }; // a skip, not an error
  let ok;
  try {
    ok = await tf.setBackend(name);
  } catch (e) {
    said.push(String(e));
    ok = false;
  } finally {
    Object.assign(console, keep);
  }
  if (!ok || tf.getBackend() !== name) {
    throw {skip: `tfjs backend ${name} failed to initialize: ${said.join("; ") || "tf.setBackend returned false"}`};
  }
  await tf.ready();
  const info = {backend: tf.getBackend(), version: tf.version.tfjs};
  if (name === "wasm") {
    info.threads = tf.wasm.getThreadsCount();
    info.simd = await tf.env().getAsync("WASM_HAS_SIMD_SUPPORT");
    info.multithread = await tf.env().getAsync("WASM_HAS_MULTITHREAD_SUPPORT");
    info.cross_origin_isolated = self.crossOriginIsolated;
    info.hardware_concurrency = navigator.hardwareConcurrency;
  }
  if (name === "webgpu") {
    info.adapter = await bench.adapterInfo();
  }
  return info;
}

// mlp builds the model, its optimizer and the data (batches*batch rows);
// step() runs cfg.every training steps (1 by default) and resolves with the
// last one's loss read back: the others are queued and not read, as ag's.
function mlp(cfg) {
  const {width, depth, batch} = cfg;
  const batches = 4; // as workload.Config's default
  const rnd = bench.rng(1);
  const normal = () => Math.sqrt(-2 * Math.log(1 - rnd())) * Math.cos(2 * Math.PI * rnd());
  const model = tf.sequential();
  for (let i = 0; i < depth; i++) {
    model.add(tf.layers.dense({
      units: width, inputShape: i === 0 ? [width] : undefined,
      activation: i < depth - 1 ? "relu" : "linear",
      // varianceScaling's uniform limit is sqrt(3*scale/fanIn): 1/sqrt(width)
      kernelInitializer: tf.initializers.varianceScaling({scale: 1 / 3, mode: "fanIn", distribution: "uniform", seed: 1 + i}),
      biasInitializer: tf.initializers.randomUniform({minval: -1 / Math.sqrt(width), maxval: 1 / Math.sqrt(width), seed: 101 + i}),
    }));
  }
  const xs = new Float32Array(batches * batch * width).map(() => rnd() * 2 - 1);
  const ts = new Float32Array(width * width).map(() => normal() * 2.5 / width);
  const x = tf.tensor2d(xs, [batches * batch, width]);
  const y = tf.tidy(() => tf.tanh(tf.matMul(x, tf.tensor2d(ts, [width, width]))));
  const idx = [];
  for (let b = 0; b < batches; b++) idx.push(tf.range(b * batch, (b + 1) * batch, 1, "int32"));
  const opt = tf.train.adam(cfg.lr);
  let n = 0;
  const every = cfg.every || 1;
  const lossOf = (i) => () => tf.mean(tf.squaredDifference(model.apply(tf.gather(x, i)), tf.gather(y, i)));
  // ask queues a group of every steps and returns the promise of the last
  // one's loss, not awaited (bench.streamed); step awaits it at once.
  const ask = () => {
    for (let k = 1; k < every; k++) opt.minimize(lossOf(idx[n++ % batches]), false); // not read
    const loss = opt.minimize(lossOf(idx[n++ % batches]), true);
    return loss.data().then((d) => { loss.dispose(); return d[0]; }); // read back every `every` steps, as ag's train does
  };
  const step = () => ask();
  const dispose = () => { model.dispose(); opt.dispose(); tf.dispose([x, y, ...idx]); };
  return {model, step, ask, dispose};
}

// runBench times cfg.steps steps on tfjs backend cfg.backend after the
// warm-up; it resolves with {skip: reason} when the backend does not start.
async function runBench(cfg) {
  let m;
  try {
    const out = await useBackend(cfg.backend, cfg.wasmThreads);
    m = mlp(cfg);
    out.params = m.model.countParams();
    out.warmup = await bench.warmup(m.step, cfg.warmup);
    const before = tf.memory().numTensors;
    const every = cfg.every || 1;
    const groups = Math.max(1, Math.round(cfg.steps / every));
    // -stream: the reads awaited groups later, as ag's -stream does
    const t = cfg.stream ? await bench.streamed(m.ask, groups) : await bench.timed(m.step, groups);
    out.leaked_tensors = tf.memory().numTensors - before;
    const ms = t.ms.map((v) => v / every); // per step
    Object.assign(out, bench.summary(ms), {every, first_loss: t.losses[0], last_loss: t.losses[t.losses.length - 1], profiled: false});
    if (cfg.stream) Object.assign(out, {stream: true, mean_ms: ms.reduce((a, b) => a + b, 0) / ms.length});
    return bench.done(out);
  } catch (e) {
    if (e && e.skip) return bench.done({skip: e.skip});
    return bench.done({error: String(e && e.stack || e)});
  } finally {
    if (m) m.dispose();
  }
}

document.querySelector("#status").textContent = "Ready: tfjs " + tf.version.tfjs;
