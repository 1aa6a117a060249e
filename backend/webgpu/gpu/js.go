//go:build js

package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall/js"

	"github.com/ag-go/ag/backend"
)

// The browser device layer, written against syscall/js and the WebGPU
// JavaScript API directly. The binding's js side falls short where this
// backend needs it (notes/PLATFORM.md): it ignores requiredLimits, panics on
// requiredFeatures, reports every mapAsync as successful, needs
// globalThis.wasm for WriteBuffer and has no query sets. Every call that
// waits on a promise blocks the calling goroutine: run GPU work on a
// goroutine of its own, never inside a js.FuncOf callback.

// Buffer is a storage buffer of the device (Device.NewBuffer).
type Buffer struct {
	v    js.Value
	size uint64
}

// Pipeline is a compute pipeline and its layout (Device.NewPipeline).
type Pipeline struct{ p, bgl js.Value }

// BindGroup binds buffer ranges to a pipeline's bindings (Device.NewBindGroup).
// BindGroup binds buffer ranges to a pipeline's bindings (Device.NewBindGroup).
type BindGroup struct{ g js.Value }

type dev struct {
	adapter, device, queue js.Value
	info                   Info

	qs                 js.Value
	qCount             uint32
	qResolve, qReadout js.Value

	// Every wait on a promise is a round trip to the GPU process (about a
	// millisecond in Chromium on an H200, where a small training step
	// computes in a tenth of that), so a step waits once, when it reads its
	// loss. Validation error scopes are popped without waiting (pending)
	// and settled with the next wait, which reports their first error;
	// reads reuse one staging buffer (stage) rather than making one each.
	pending   []js.Value
	stage     js.Value
	stageSize uint64

	// Reads started and not waited for (ReadLater) each map a staging
	// buffer of their own: laterFree holds those given back, later those
	// mapping, oldest first (destroyed by close, which fails their waits).
	laterFree []stageBuf
	later     []*laterRead

	// A deferred run is encoded in JavaScript from a plan (DeferRun): one
	// call from Go where per-dispatch calls were three, each a crossing of
	// the wasm boundary that cost microseconds. The last few plans are kept
	// with their key and reused while the key repeats (a captured step's
	// replays, a lazy step binding the buffers it bound before); planGen
	// counts what makes a plan stale (a buffer destroyed, a program
	// released), as aheadGen does for the native layer's recorded runs.
	encode   js.Value // func(plan) Promise<GPUError|null>
	plans    []jsPlan
	planGen  uint64
	counters Counters // PlanHits, PlanBuilt (tests)
}

// jsPlan is a run encoded for the encode function: [pipelines, bind
// groups, Uint32Array of x,y,z per dispatch, flat copies (src, srcOff, dst,
// dstOff, size)].
type jsPlan struct {
	key RunKey
	gen uint64
	v   js.Value
}

// noop is a JavaScript function that does nothing (a promise's handler).
var noop = js.Global().Get("Function").New("")

// MaxPlans bounds the plans kept: a step is one or two programs (a clipped
// captured step's two runs), and what a plan holds in JS lives as long as
// it does.
const MaxPlans = 4

// encodeSrc is the body of the function that makes encode for a device and
// its queue. It submits one compute pass and the copies in an error scope
// and returns the scope's promise, as submit does call by call.
const encodeSrc = `return function(pl) {
	device.pushErrorScope("validation");
	const enc = device.createCommandEncoder();
	const cp = enc.beginComputePass();
	const ps = pl[0], bs = pl[1], w = pl[2], cs = pl[3];
	for (let i = 0; i < ps.length; i++) {
		cp.setPipeline(ps[i]);
		cp.setBindGroup(0, bs[i]);
		cp.dispatchWorkgroups(w[3*i], w[3*i+1], w[3*i+2]);
	}
	cp.end();
	for (let i = 0; i < cs.length; i += 5) {
		enc.copyBufferToBuffer(cs[i], cs[i+1], cs[i+2], cs[i+3], cs[i+4]);
	}
	queue.submit([enc.finish()]);
	return device.popErrorScope();
};`

// GPUBufferUsage, GPUMapMode and GPUShaderStage flags.
const (
	jsMapRead      = 0x1
	jsCopySrc      = 0x4
	jsCopyDst      = 0x8
	jsStorage      = 0x80
	jsQueryResolve = 0x200
	jsModeRead     = 0x1
	jsCompute      = 0x4
)

// await waits for a promise; a rejection becomes an error.
func await(p js.Value) (js.Value, error) {
	if p.Type() != js.TypeObject || p.Get("then").Type() != js.TypeFunction {
		return p, nil
	}
	done := make(chan struct{})
	var res js.Value
	var err error
	ok := js.FuncOf(func(_ js.Value, a []js.Value) any {
		if len(a) > 0 {
			res = a[0]
		}
		close(done)
		return nil
	})
	fail := js.FuncOf(func(_ js.Value, a []js.Value) any {
		err = errors.New(jsText(a))
		close(done)
		return nil
	})
	defer ok.Release()
	defer fail.Release()
	p.Call("then", ok, fail)
	<-done
	return res, err
}

func jsText(a []js.Value) string {
	if len(a) == 0 || a[0].IsUndefined() || a[0].IsNull() {
		return "promise rejected"
	}
	return a[0].Call("toString").String()
}

func jsAdapter() (js.Value, error) {
	// Node (20) and some workers have no navigator at all: Get on
	// undefined would panic where the answer is "no WebGPU here".
	nav := js.Global().Get("navigator")
	if !nav.Truthy() {
		return js.Value{}, errors.New("webgpu: there is no navigator here (not a browser page or worker): no WebGPU")
	}
	gpu := nav.Get("gpu")
	if !gpu.Truthy() {
		return js.Value{}, errors.New("webgpu: navigator.gpu is missing: this browser has no WebGPU (or it is disabled)")
	}
	ad, err := await(gpu.Call("requestAdapter", map[string]any{"powerPreference": "high-performance"}))
	if err != nil {
		return js.Value{}, fmt.Errorf("webgpu: requestAdapter: %w", err)
	}
	if !ad.Truthy() {
		return js.Value{}, errors.New("webgpu: requestAdapter returned no adapter")
	}
	return ad, nil
}

func jsDesc(ad js.Value) Info {
	info := Info{API: "browser WebGPU", Kind: "GPU", GPU: true}
	ai := ad.Get("info")
	str := func(k string) string {
		if !ai.Truthy() {
			return ""
		}
		if v := ai.Get(k); v.Type() == js.TypeString {
			return v.String()
		}
		return ""
	}
	info.Name = str("description")
	if info.Name == "" {
		info.Name = strings.TrimSpace(str("vendor") + " " + str("architecture") + " " + str("device"))
	}
	if info.Name == "" {
		info.Name = "WebGPU adapter"
	}
	fallback := ad.Get("isFallbackAdapter").Truthy() || (ai.Truthy() && ai.Get("isFallbackAdapter").Truthy())
	if fallback || strings.Contains(strings.ToLower(info.Name), "swiftshader") {
		info.Kind, info.GPU = "software (fallback adapter)", false
		// Chromium drops the device when SwiftShader compiles the attention
		// kernel ("Instance dropped in popErrorScope" from then on; seen in
		// the browser suite, cause not established - its compiler is slow
		// on the kernel, and the GPU watchdog is the suspect): core runs
		// attention as its composite there.
		info.Unsupported = []backend.Op{backend.OpAttention}
	}
	return info
}

func jsLimits(info *Info, l js.Value) {
	u := func(k string) uint64 { return uint64(l.Get(k).Float()) }
	info.MaxBuffer = u("maxBufferSize")
	info.MaxBinding = u("maxStorageBufferBindingSize")
	info.MaxInvocations = uint32(u("maxComputeInvocationsPerWorkgroup"))
	info.MaxWGSizeX = uint32(u("maxComputeWorkgroupSizeX"))
	info.MaxWGStorage = uint32(u("maxComputeWorkgroupStorageSize"))
	info.StorageAlign = uint32(u("minStorageBufferOffsetAlignment"))
	info.MaxWGPerDim = uint32(u("maxComputeWorkgroupsPerDimension"))
	info.MaxStorageBuffers = uint32(u("maxStorageBuffersPerShaderStage"))
}

func probeDev() (Info, error) {
	ad, err := jsAdapter()
	if err != nil {
		return Info{}, err
	}
	info := jsDesc(ad)
	jsLimits(&info, ad.Get("limits"))
	info.Timestamps = ad.Get("features").Call("has", "timestamp-query").Bool()
	info.F16 = ad.Get("features").Call("has", "shader-f16").Bool()
	return info, nil
}

func openDev() (*dev, error) {
	ad, err := jsAdapter()
	if err != nil {
		return nil, err
	}
	al := ad.Get("limits")
	upTo := func(k string, most float64) float64 { return min(al.Get(k).Float(), most) }
	desc := map[string]any{
		// The same limits as device_native.go's openDev: the adapter's
		// buffer sizes, and device.go's wanted ones.
		"requiredLimits": map[string]any{
			"maxBufferSize":                     al.Get("maxBufferSize"),
			"maxStorageBufferBindingSize":       al.Get("maxStorageBufferBindingSize"),
			"maxComputeWorkgroupStorageSize":    upTo("maxComputeWorkgroupStorageSize", wantWGStorage),
			"maxComputeInvocationsPerWorkgroup": upTo("maxComputeInvocationsPerWorkgroup", wantInvocations),
			"maxComputeWorkgroupSizeX":          upTo("maxComputeWorkgroupSizeX", wantInvocations),
			"maxComputeWorkgroupSizeY":          upTo("maxComputeWorkgroupSizeY", wantInvocations),
			"maxStorageBuffersPerShaderStage":   upTo("maxStorageBuffersPerShaderStage", wantStorageBuffers),
		},
	}
	var feats []any
	for _, f := range []string{"timestamp-query", insidePasses, "shader-f16"} {
		if ad.Get("features").Call("has", f).Bool() {
			feats = append(feats, f)
		}
	}
	var device js.Value
	_, err = withFewer(feats, func(feats []any) (err error) {
		desc["requiredFeatures"] = feats
		device, err = await(ad.Call("requestDevice", desc))
		return err
	})
	if err != nil || !device.Truthy() {
		return nil, fmt.Errorf("webgpu: requestDevice: %v", err)
	}
	d := &dev{adapter: ad, device: device, queue: device.Get("queue")}
	d.encode = js.Global().Get("Function").New("device", "queue", encodeSrc).Invoke(device, d.queue)
	d.info = jsDesc(ad)
	jsLimits(&d.info, device.Get("limits"))
	d.info.Timestamps = device.Get("features").Call("has", "timestamp-query").Bool()
	d.info.F16 = device.Get("features").Call("has", "shader-f16").Bool()
	d.info.InsideTS = d.info.Timestamps && device.Get("features").Call("has", insidePasses).Bool()
	return d, nil
}

// scoped runs f inside a validation error scope and waits for its error
// (and those pending).
func (d *dev) scoped(f func()) error {
	d.scopedLater(f)
	_, err := d.settle(js.Value{})
	return err
}

// scopedLater runs f inside a validation error scope whose error the next
// settle reports: for calls whose errors are bugs of this package (a bind
// group, a buffer within the limits Alloc checked), not worth a wait.
func (d *dev) scopedLater(f func()) {
	d.device.Call("pushErrorScope", "validation")
	f()
	d.pending = append(d.pending, d.device.Call("popErrorScope"))
}

// settle waits for p (undefined: nothing) and the pending error scopes
// together, one round trip, and returns p's value or the first error.
func (d *dev) settle(p js.Value) (js.Value, error) {
	if len(d.pending) == 0 && p.IsUndefined() {
		return js.Value{}, nil
	}
	all, n := d.gather(p)
	res, err := await(all)
	if err != nil {
		return js.Value{}, err
	}
	if err := scopeErr(res, n); err != nil {
		return js.Value{}, err
	}
	if p.IsUndefined() {
		return js.Value{}, nil
	}
	return res.Index(n), nil
}

// gather takes the pending error scopes and p (undefined: none) into one
// promise of all their results, the n scopes' first.
func (d *dev) gather(p js.Value) (all js.Value, n int) {
	ps := make([]any, 0, len(d.pending)+1)
	for _, e := range d.pending {
		ps = append(ps, e)
	}
	n = len(ps)
	d.pending = d.pending[:0]
	if !p.IsUndefined() {
		ps = append(ps, p)
	}
	return js.Global().Get("Promise").Call("all", ps), n
}

// scopeErr is the first validation error among the first n results.
func scopeErr(res js.Value, n int) error {
	for i := range n {
		if e := res.Index(i); e.Truthy() {
			return errors.New(e.Get("message").String())
		}
	}
	return nil
}

func (d *dev) rawBuffer(size uint64, usage int) (js.Value, error) {
	var b js.Value
	d.scopedLater(func() { b = d.device.Call("createBuffer", map[string]any{"size": size, "usage": usage}) })
	return b, nil
}

func (d *dev) NewBuffer(size uint64) (*Buffer, error) {
	b, err := d.rawBuffer(size, jsStorage|jsCopySrc|jsCopyDst)
	if err != nil {
		return nil, err
	}
	return &Buffer{v: b, size: size}, nil
}

func (d *dev) DestroyBuffer(b *Buffer) {
	d.DropAhead() // a plan may bind it
	b.v.Call("destroy")
}

func (d *dev) Write(b *Buffer, off uint64, data []byte) error {
	return inChunks(off, data, func(off uint64, data []byte) error {
		arr := js.Global().Get("Uint8Array").New(len(data))
		js.CopyBytesToJS(arr, data)
		d.queue.Call("writeBuffer", b.v, off, arr)
		return nil
	})
}

func (d *dev) Read(b *Buffer, off uint64, dst []byte) error {
	return inChunks(off, dst, func(off uint64, dst []byte) error {
		n := uint64(len(dst))
		if d.stageSize < n {
			if d.stageSize > 0 {
				d.stage.Call("destroy")
			}
			// (a multiple of 4 at least 64 KiB: small reads share one)
			size := max((n+3)&^3, 64<<10)
			st, err := d.rawBuffer(size, jsMapRead|jsCopyDst)
			if err != nil {
				return err
			}
			d.stage, d.stageSize = st, size
		}
		d.submitCopy(b.v, off, d.stage, n)
		return d.mapRead(d.stage, n, dst)
	})
}

// stageBuf is a MapRead staging buffer and its size.
type stageBuf struct {
	v    js.Value
	size uint64
}

// newStage is a MapRead staging buffer of size bytes.
func (d *dev) newStage(size uint64) (stageBuf, error) {
	v, err := d.rawBuffer(size, jsMapRead|jsCopyDst)
	return stageBuf{v: v, size: size}, err
}

// submitCopy submits a copy of n bytes of src from off to the start of
// dst, in an error scope the next settle reports.
func (d *dev) submitCopy(src js.Value, off uint64, dst js.Value, n uint64) {
	d.scopedLater(func() {
		enc := d.device.Call("createCommandEncoder")
		enc.Call("copyBufferToBuffer", src, off, dst, 0, n)
		d.queue.Call("submit", []any{enc.Call("finish")})
	})
}

// startLater submits r's copy and asks for its mapping, without waiting:
// await waits for the mapping and for the error scopes pending until then
// (the runs deferred before the read), finish copies the bytes out.
func (d *dev) startLater(b *Buffer, off uint64, r *laterRead) error {
	d.submitCopy(b.v, off, r.st.v, r.n)
	r.p, r.scopes = d.gather(r.st.v.Call("mapAsync", jsModeRead, 0, r.n))
	// A read never waited for (against LaterReader's contract) whose
	// device closes rejects: handled here, so that it is no page error;
	// a wait still gets the rejection.
	r.p.Call("catch", noop)
	return nil
}

// completeRead waits for r and copies its bytes out (past MaxLater reads
// in flight): its own wait then returns what this did.
func (d *dev) completeRead(r *laterRead) {
	r.err = r.take(r.Await())
	r.complete = true
}

// laterRead is a read in flight (ReadLater).
type laterRead struct {
	laterBase
	scopes int      // error scopes before the mapping in p's results
	p      js.Value // Promise.all(scopes..., mapAsync)
}

// Await waits for the mapping and the error scopes; the first validation
// error is the read's.
func (r *laterRead) Await() error {
	res, err := await(r.p)
	if err != nil {
		return fmt.Errorf("mapAsync: %w", err)
	}
	return scopeErr(res, r.scopes)
}

// Finish copies the mapped bytes out and gives the staging buffer back,
// unless completeRead did; after an error (or the device's close) the
// buffer is dropped.
func (r *laterRead) Finish(werr error, closed bool) error {
	if r.complete {
		return r.err
	}
	if closed {
		return errReadClosed
	}
	return r.take(werr)
}

// take copies the mapped bytes out (unless werr) and gives the staging
// buffer back, or drops it after an error.
func (r *laterRead) take(werr error) error {
	d := r.d
	if i := slices.Index(d.later, r); i >= 0 {
		d.later = slices.Delete(d.later, i, i+1)
	}
	if werr != nil {
		if st := r.st.v.Get("mapState").String(); st == "mapped" {
			r.st.v.Call("unmap")
		}
		r.st.destroy()
		return werr
	}
	arr := js.Global().Get("Uint8Array").New(r.st.v.Call("getMappedRange", 0, r.n))
	js.CopyBytesToGo(r.dst, arr)
	r.st.v.Call("unmap")
	d.giveStage(r.st)
	return nil
}

func (st stageBuf) destroy() { st.v.Call("destroy") }

// mapRead maps a MapRead buffer, copies n bytes out and unmaps; the wait
// settles the pending error scopes too.
func (d *dev) mapRead(buf js.Value, n uint64, dst []byte) error {
	if _, err := d.settle(buf.Call("mapAsync", jsModeRead, 0, n)); err != nil {
		return fmt.Errorf("mapAsync: %w", err)
	}
	arr := js.Global().Get("Uint8Array").New(buf.Call("getMappedRange", 0, n))
	js.CopyBytesToGo(dst, arr)
	buf.Call("unmap")
	return nil
}

func (d *dev) NewPipeline(label, src string, readOnly []bool) (*Pipeline, error) {
	var p Pipeline
	err := d.scoped(func() {
		mod := d.device.Call("createShaderModule", map[string]any{"label": label, "code": src})
		entries := make([]any, len(readOnly))
		for i, ro := range readOnly {
			t := "storage"
			if ro {
				t = "read-only-storage"
			}
			entries[i] = map[string]any{"binding": i, "visibility": jsCompute, "buffer": map[string]any{"type": t}}
		}
		p.bgl = d.device.Call("createBindGroupLayout", map[string]any{"label": label, "entries": entries})
		pl := d.device.Call("createPipelineLayout", map[string]any{"label": label, "bindGroupLayouts": []any{p.bgl}})
		p.p = d.device.Call("createComputePipeline", map[string]any{"label": label, "layout": pl,
			"compute": map[string]any{"module": mod, "entryPoint": "main"}})
	})
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func (d *dev) ReleasePipeline(*Pipeline) {} // garbage-collected in the browser

func (d *dev) NewBindGroup(p *Pipeline, entries []BindEntry) (*BindGroup, error) {
	es := make([]any, len(entries))
	for i, e := range entries {
		es[i] = map[string]any{"binding": i, "resource": map[string]any{"buffer": e.Buf.v, "offset": e.Off, "size": e.Size}}
	}
	var g js.Value
	d.scopedLater(func() { g = d.device.Call("createBindGroup", map[string]any{"layout": p.bgl, "entries": es}) })
	return &BindGroup{g: g}, nil
}

func (d *dev) ReleaseBindGroup(*BindGroup) {} // garbage-collected in the browser

func (d *dev) ensureQueries(n uint32) error {
	if d.qCount >= n {
		return nil
	}
	d.releaseQueries()
	return d.scoped(func() {
		d.qs = d.device.Call("createQuerySet", map[string]any{"type": "timestamp", "count": n})
		d.qResolve = d.device.Call("createBuffer", map[string]any{"size": 8 * n, "usage": jsQueryResolve | jsCopySrc})
		d.qReadout = d.device.Call("createBuffer", map[string]any{"size": 8 * n, "usage": jsMapRead | jsCopyDst})
		d.qCount = n
	})
}

func (d *dev) releaseQueries() {
	if d.qCount == 0 {
		return
	}
	d.qs.Call("destroy")
	d.qResolve.Call("destroy")
	d.qReadout.Call("destroy")
	d.qCount = 0
}

// Run records the passes into one encoder, submits once and waits, in one
// round trip with the pending error scopes. With timed, the first pass
// writes a timestamp at its start and every pass one at its end
// (len(passes)+1 ticks, ns per the WebGPU spec), read back in the wait.
func (d *dev) Run(passes [][]Dispatch, copies []CopyOp, timed bool) ([]uint64, error) {
	nq := uint32(len(passes) + 1)
	if timed {
		if err := d.ensureQueries(nq); err != nil {
			return nil, err
		}
	}
	d.submit(passes, copies, timed)
	if !timed {
		_, err := d.settle(d.queue.Call("onSubmittedWorkDone"))
		return nil, err
	}
	return d.readTicks(nq)
}

// readTicks maps the first nq timestamps of the readout buffer, which
// waits for the run that resolved them: one round trip.
func (d *dev) readTicks(nq uint32) ([]uint64, error) {
	raw := make([]uint64, nq)
	if err := d.mapRead(d.qReadout, 8*uint64(nq), BytesOf(raw)); err != nil {
		return nil, fmt.Errorf("timestamps: %w", err)
	}
	return raw, nil
}

// FoldsRead is false: a plain run is submitted and not waited for
// (DeferRun), so a run and a read already cost one round trip.
func (d *dev) FoldsRead(int) bool { return false }

// RunRead is run, then the read.
func (d *dev) RunRead(passes [][]Dispatch, copies []CopyOp, timed bool, rb *ReadBack) ([]uint64, error) {
	raw, err := d.Run(passes, copies, timed)
	if err != nil || rb == nil {
		return raw, err
	}
	return raw, d.Read(rb.Src, rb.Off, rb.Dst)
}

// insidePasses is Chromium's feature for timestamps between the dispatches
// of one pass (GPUComputePassEncoder.writeTimestamp).
const insidePasses = "chromium-experimental-timestamp-query-inside-passes"

// RunInside runs the dispatches in one pass as a plain run does, with a
// timestamp before the first and after each (len(ds)+1 ticks), and waits.
// Timing each kernel in a pass of its own instead charged every pass's
// cost to its kernel: in Chromium on an H200 two dozen tiny adds took 40%
// of a profiled run that a 1024^3 product takes 90% of.
func (d *dev) RunInside(ds []Dispatch, copies []CopyOp) ([]uint64, error) {
	nq := uint32(len(ds) + 1)
	if err := d.ensureQueries(nq); err != nil {
		return nil, err
	}
	d.scopedLater(func() {
		enc := d.device.Call("createCommandEncoder")
		cp := enc.Call("beginComputePass")
		cp.Call("writeTimestamp", d.qs, 0)
		for i, x := range ds {
			cp.Call("setPipeline", x.Pipe.p)
			cp.Call("setBindGroup", 0, x.Bind.g)
			cp.Call("dispatchWorkgroups", x.X, x.Y, x.Z)
			cp.Call("writeTimestamp", d.qs, i+1)
		}
		cp.Call("end")
		for _, c := range copies {
			enc.Call("copyBufferToBuffer", c.Src.v, c.SrcOff, c.Dst.v, c.DstOff, c.Size)
		}
		enc.Call("resolveQuerySet", d.qs, 0, nq, d.qResolve, 0)
		enc.Call("copyBufferToBuffer", d.qResolve, 0, d.qReadout, 0, 8*nq)
		d.queue.Call("submit", []any{enc.Call("finish")})
	})
	return d.readTicks(nq)
}

// DeferRun submits the run that build binds, in one pass, without
// waiting: the next settle (a read's map, a run's wait) reports its
// validation errors. A wait per plain run was a round trip to the GPU
// process each, a millisecond, most of a small step's time in the browser.
// The run is encoded by the JavaScript encode from a plan, reused while
// its key repeats and nothing it binds went away (planGen).
func (d *dev) DeferRun(key RunKey, build func() ([]Dispatch, []CopyOp, error)) (bool, error) {
	i := slices.IndexFunc(d.plans, func(p jsPlan) bool { return p.gen == d.planGen && p.key.Same(key) })
	if i >= 0 {
		d.counters.PlanHits++
	} else {
		ds, copies, err := build()
		if err != nil {
			return false, err
		}
		d.counters.PlanBuilt++
		pl := jsPlan{key: key.Clone(), gen: d.planGen, v: planOf(ds, copies)}
		if len(d.plans) == MaxPlans {
			d.plans = d.plans[:copy(d.plans, d.plans[1:])]
		}
		d.plans = append(d.plans, pl)
		i = len(d.plans) - 1
	}
	d.pending = append(d.pending, d.encode.Invoke(d.plans[i].v))
	return false, nil
}

// planOf builds encode's plan of one pass of ds and the copies after it.
func planOf(ds []Dispatch, copies []CopyOp) js.Value {
	pipes, binds := make([]any, len(ds)), make([]any, len(ds))
	dims := make([]uint32, 3*len(ds))
	for i, x := range ds {
		pipes[i], binds[i] = x.Pipe.p, x.Bind.g
		dims[3*i], dims[3*i+1], dims[3*i+2] = x.X, x.Y, x.Z
	}
	cs := make([]any, 0, 5*len(copies))
	for _, c := range copies {
		cs = append(cs, c.Src.v, c.SrcOff, c.Dst.v, c.DstOff, c.Size)
	}
	raw := js.Global().Get("Uint8Array").New(4 * len(dims))
	js.CopyBytesToJS(raw, BytesOf(dims))
	w := js.Global().Get("Uint32Array").New(raw.Get("buffer"))
	return js.ValueOf([]any{pipes, binds, w, cs})
}

// DrainDeferred does nothing: in the browser a timed run's wait is a round
// trip anyway, which covers the runs before it.
func (d *dev) DrainDeferred() {}

// SetDefer does nothing: in the browser plain runs are always deferred.
func (d *dev) SetDefer(bool) bool { return true }

// WaitIdle waits until everything submitted has finished, and for the
// pending error scopes: one round trip.
func (d *dev) WaitIdle() error {
	_, err := d.settle(d.queue.Call("onSubmittedWorkDone"))
	return err
}

// DefersRuns is true: plain runs are submitted and not waited for
// (DeferRun).
func (d *dev) DefersRuns() bool { return true }

// RunRepeatable is RunRead: plain runs here are deferred, never repeated
// through it.
func (d *dev) RunRepeatable(_ RunKey, build func() ([]Dispatch, []CopyOp, error), timed bool, rb *ReadBack) ([]uint64, bool, error) {
	ds, copies, err := build()
	if err != nil {
		return nil, false, err
	}
	ticks, err := d.RunRead([][]Dispatch{ds}, copies, timed, rb)
	return ticks, false, err
}

// DropAhead makes every plan stale (DeferRun): called when what one may
// bind goes away.
func (d *dev) DropAhead() {
	d.planGen++
	clear(d.plans)
	d.plans = d.plans[:0]
}

// submit records the passes and copies into one encoder and submits it in
// an error scope the next settle reports. With timed, the first pass writes
// a timestamp at its start and every pass one at its end, resolved into
// the readout buffer (ensureQueries made room).
func (d *dev) submit(passes [][]Dispatch, copies []CopyOp, timed bool) {
	nq := uint32(len(passes) + 1)
	d.scopedLater(func() {
		enc := d.device.Call("createCommandEncoder")
		for i, pass := range passes {
			desc := map[string]any{}
			if timed {
				tw := map[string]any{"querySet": d.qs, "endOfPassWriteIndex": i + 1}
				if i == 0 {
					tw["beginningOfPassWriteIndex"] = 0
				}
				desc["timestampWrites"] = tw
			}
			cp := enc.Call("beginComputePass", desc)
			for _, ds := range pass {
				cp.Call("setPipeline", ds.Pipe.p)
				cp.Call("setBindGroup", 0, ds.Bind.g)
				cp.Call("dispatchWorkgroups", ds.X, ds.Y, ds.Z)
			}
			cp.Call("end")
		}
		for _, c := range copies {
			enc.Call("copyBufferToBuffer", c.Src.v, c.SrcOff, c.Dst.v, c.DstOff, c.Size)
		}
		if timed {
			enc.Call("resolveQuerySet", d.qs, 0, nq, d.qResolve, 0)
			enc.Call("copyBufferToBuffer", d.qResolve, 0, d.qReadout, 0, 8*nq)
		}
		d.queue.Call("submit", []any{enc.Call("finish")})
	})
}

func (d *dev) Close() {
	d.DropAhead()
	d.releaseQueries()
	d.dropStages()
	for _, r := range d.later { // their mappings fail: the waits report the close
		r.st.destroy()
	}
	if d.stageSize > 0 {
		d.stage.Call("destroy")
		d.stageSize = 0
	}
	d.device.Call("destroy")
}

// Quietly runs f: the browser reports errors through error scopes, not a
// log.
func Quietly(f func()) { f() }

// Unfinished is 0: the browser's deferred runs are not counted (a wait
// settles them all).
func (d *dev) Unfinished() uint64 { return 0 }
