// The -probe page: which WebGPU adapter this browser gives a page, with its
// limits and features, and whether a device on it runs a compute shader
// (a tiny one, checked). The driver (probe.go) calls runBench once.
"use strict";

async function runBench() {
  const out = {
    user_agent: navigator.userAgent, secure_context: isSecureContext, cross_origin_isolated: self.crossOriginIsolated,
    hardware_concurrency: navigator.hardwareConcurrency,
  };
  try {
    out.adapter = await bench.adapterInfo(true);
    if (out.adapter.available) out.compute = await computeCheck();
  } catch (e) {
    out.error = String(e && e.stack || e);
  }
  return bench.done(out);
}

// computeCheck opens a device on the adapter and runs y = 2x + 1 over 4096
// floats, reading y back: {ok, ms, why}.
async function computeCheck() {
  const t0 = performance.now();
  try {
    const a = await navigator.gpu.requestAdapter({powerPreference: "high-performance"});
    const dev = await a.requestDevice();
    const errs = [];
    dev.addEventListener("uncapturederror", (e) => errs.push(e.error.message));
    const n = 4096;
    const x = new Float32Array(n).map((_, i) => i);
    const buf = dev.createBuffer({size: n * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST});
    dev.queue.writeBuffer(buf, 0, x);
    const read = dev.createBuffer({size: n * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
    const mod = dev.createShaderModule({code: `
      @group(0) @binding(0) var<storage, read_write> v: array<f32>;
      @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3u) {
        if (id.x < arrayLength(&v)) { v[id.x] = 2.0 * v[id.x] + 1.0; }
      }`});
    const pipe = dev.createComputePipeline({layout: "auto", compute: {module: mod, entryPoint: "main"}});
    const bg = dev.createBindGroup({layout: pipe.getBindGroupLayout(0), entries: [{binding: 0, resource: {buffer: buf}}]});
    const enc = dev.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipe);
    pass.setBindGroup(0, bg);
    pass.dispatchWorkgroups(n / 64);
    pass.end();
    enc.copyBufferToBuffer(buf, 0, read, 0, n * 4);
    dev.queue.submit([enc.finish()]);
    await read.mapAsync(GPUMapMode.READ);
    const y = new Float32Array(read.getMappedRange().slice(0));
    read.unmap();
    dev.destroy();
    let bad = -1;
    for (let i = 0; i < n; i++) {
      if (y[i] !== 2 * i + 1) { bad = i; break; }
    }
    const ms = performance.now() - t0;
    if (errs.length) return {ok: false, ms, why: "device errors: " + errs.join("; ")};
    if (bad >= 0) return {ok: false, ms, why: `wrong result at ${bad}: ${y[bad]}, want ${2 * bad + 1}`};
    return {ok: true, ms};
  } catch (e) {
    return {ok: false, ms: performance.now() - t0, why: String(e && e.message || e)};
  }
}

document.querySelector("#status").textContent = "Ready";
