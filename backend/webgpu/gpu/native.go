//go:build !js

package gpu

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/ag-go/ag/backend/internal/vkenv"
)

// The native device layer: wgpu-native through github.com/cogentcore/webgpu.
// Pitfalls it works around (notes/PLATFORM.md): the device is requested from
// DefaultLimits raised field by field, because the adapter's own limits carry
// a garbage MaxPushConstantSize; no DeviceLostCallback (it panics under
// cgocheck); compute passes are released after End; mapped ranges are copied
// out before Unmap; many WriteBuffer calls are flushed with an empty submit.

// Buffer is a storage buffer of the device (Device.NewBuffer).
type Buffer struct {
	b    *wgpu.Buffer
	size uint64
}

// Pipeline is a compute pipeline and its layout (Device.NewPipeline).
type Pipeline struct {
	p   *wgpu.ComputePipeline
	bgl *wgpu.BindGroupLayout
	pl  *wgpu.PipelineLayout
}

// BindGroup binds buffer ranges to a pipeline's bindings (Device.NewBindGroup).
type BindGroup struct{ g *wgpu.BindGroup }

type dev struct {
	inst    *wgpu.Instance
	adapter *wgpu.Adapter
	device  *wgpu.Device
	queue   *wgpu.Queue
	info    Info

	staging     *wgpu.Buffer // MapRead|CopyDst, grown on demand
	stagingSize uint64

	// Timestamp queries: a query set and its resolve/readback buffers,
	// grown to the largest run seen.
	qs                 *wgpu.QuerySet
	qCount             uint32
	qResolve, qReadout *wgpu.Buffer

	pendingWrites int
	// ahead is the next run's command buffer, recorded during this one
	// (RunRepeatable); lastKey is the last plain run's; aheadGen counts
	// what made recorded commands stale.
	ahead    *aheadCmd
	lastKey  RunKey
	aheadGen uint64
	// spin: wait for the GPU by polling without pause (sleeping between
	// polls adds wake-up latency to every run); else sleep between polls,
	// leaving the cores to a software adapter.
	spin bool
	// deferRuns: plain runs are submitted without waiting (DeferRun).
	// runs counts those submitted, done those of them known finished: all
	// when the queue was last seen empty, or those before a later read's
	// copy once its mapping completed. At most MaxInFlight are not known
	// finished. (Not counted down by Queue.OnSubmittedWorkDone:
	// cogentcore/webgpu v0.23 hands C the address of a Go variable as the
	// callback's handle, which the collector may reuse before the callback
	// runs; on an H200 two benchmark runs of six died that way: mappings
	// go through startMap for the same reason. Nor waited
	// for one by one: wgpu's blocking poll is never used, see dev.wait.)
	deferRuns  bool
	runs, done uint64

	// Reads started and not waited for (ReadLater), oldest first, each
	// with a staging buffer of its own; laterFree holds the staging
	// buffers given back.
	later     []*laterRead
	laterFree []stageBuf
	counters  Counters // Ahead, Drains (tests)
}

// MaxInFlight (native) bounds the deferred runs submitted since the queue was last
// seen empty: the host builds and submits steps while the GPU runs the
// ones before, and does not run away from it (a loop that never reads
// would queue without end); the next waits for the queue to drain, a gap
// of one poll every MaxInFlight runs.
const MaxInFlight = 3

func adapterDesc(ad *wgpu.Adapter) Info {
	ai := ad.GetInfo()
	// wgpu-native v0.23's info puts the adapter name in the description
	// and hex ids in the name fields ("0x0"); prefer the readable one.
	info := Info{Name: ai.Name, Driver: ai.DriverDescription, API: ai.BackendType.String()}
	if info.Name == "" || strings.HasPrefix(info.Name, "0x") {
		info.Name, info.Driver = ai.DriverDescription, ""
	}
	switch ai.BackendType {
	case wgpu.BackendTypeVulkan:
		info.API = "Vulkan"
	case wgpu.BackendTypeMetal:
		info.API = "Metal"
	case wgpu.BackendTypeD3D12:
		info.API = "D3D12"
	case wgpu.BackendTypeOpenGL, wgpu.BackendTypeOpenGLES:
		info.API = "OpenGL"
	}
	switch ai.AdapterType {
	case wgpu.AdapterTypeDiscreteGPU:
		info.Kind, info.GPU = "discrete GPU", true
	case wgpu.AdapterTypeIntegratedGPU:
		info.Kind, info.GPU = "integrated GPU", true
	case wgpu.AdapterTypeCPU:
		info.Kind = "software (CPU)"
	default:
		info.Kind = "unknown adapter type"
	}
	return info
}

func fillLimits(info *Info, l wgpu.Limits) {
	info.MaxBuffer = l.MaxBufferSize
	info.MaxBinding = l.MaxStorageBufferBindingSize
	info.MaxInvocations = l.MaxComputeInvocationsPerWorkgroup
	info.MaxWGSizeX = l.MaxComputeWorkgroupSizeX
	info.MaxWGStorage = l.MaxComputeWorkgroupStorageSize
	info.StorageAlign = l.MinStorageBufferOffsetAlignment
	info.MaxWGPerDim = l.MaxComputeWorkgroupsPerDimension
	info.MaxStorageBuffers = l.MaxStorageBuffersPerShaderStage
}

// BackendsEnv picks the native APIs wgpu may use: unset, Vulkan, Metal and
// D3D12 ("primary"); "all" adds OpenGL, "gl" is OpenGL alone.
const BackendsEnv = "AG_WEBGPU_BACKENDS"

// instanceBackends is the API set of AG_WEBGPU_BACKENDS. OpenGL is left out
// by default: wgpu-native v0.23 (wgpu-hal's egl.rs) panics inside
// wgpuCreateInstance, aborting the process, when libEGL is installed but
// finds no display (no EGL vendor, as on a GPU server with a Vulkan-only
// driver), however good the Vulkan driver is; and where Vulkan is missing
// its OpenGL adapter is a slow software one (llvmpipe).
func instanceBackends() (wgpu.InstanceBackend, string, error) {
	switch v := os.Getenv(BackendsEnv); v {
	case "", "primary":
		return wgpu.InstanceBackendPrimary, "Vulkan, Metal or D3D12", nil
	case "all":
		return wgpu.InstanceBackendPrimary | wgpu.InstanceBackendGL, "Vulkan, Metal, D3D12 or OpenGL", nil
	case "gl":
		return wgpu.InstanceBackendGL, "OpenGL", nil
	case "vulkan":
		return wgpu.InstanceBackendVulkan, "Vulkan", nil
	default:
		return 0, "", fmt.Errorf("webgpu: %s=%q: want primary, all, vulkan or gl", BackendsEnv, v)
	}
}

// instances holds one wgpu instance per API set for the life of the
// process: an instance per opened device, released at Close, did not give
// its Vulkan instance back on NVIDIA's driver, whose 30th device opened
// after 29 closed found no adapter. An instance holds no device memory.
var instances struct {
	sync.Mutex
	byAPIs map[wgpu.InstanceBackend]*wgpu.Instance
}

// instance returns the process's wgpu instance for backends.
func instance(backends wgpu.InstanceBackend) (*wgpu.Instance, error) {
	instances.Lock()
	defer instances.Unlock()
	if inst := instances.byAPIs[backends]; inst != nil {
		return inst, nil
	}
	vkenv.Prepare()
	inst, err := createInstance(backends)
	if err != nil {
		return nil, err
	}
	if instances.byAPIs == nil {
		instances.byAPIs = map[wgpu.InstanceBackend]*wgpu.Instance{}
	}
	instances.byAPIs[backends] = inst
	return inst, nil
}

// requestAdapter finds the adapter of the process's instance (which the
// caller must not release).
func requestAdapter() (*wgpu.Instance, *wgpu.Adapter, error) {
	backends, apis, err := instanceBackends()
	if err != nil {
		return nil, nil, err
	}
	inst, err := instance(backends)
	if err != nil {
		return nil, nil, err
	}
	ad, err := inst.RequestAdapter(&wgpu.RequestAdapterOptions{PowerPreference: wgpu.PowerPreferenceHighPerformance})
	if err != nil || ad == nil {
		hint := ""
		if o := vkenv.Overrides(); o != "" {
			hint = ", with " + o
		}
		if backends&wgpu.InstanceBackendGL == 0 {
			hint += "; " + BackendsEnv + "=all also tries OpenGL"
		}
		return nil, nil, fmt.Errorf("webgpu: no adapter on %s (%v%s): install a Vulkan driver, e.g. mesa-vulkan-drivers", apis, err, hint)
	}
	return inst, ad, nil
}

// probeDev finds the adapter Open would use and releases it again.
func probeDev() (Info, error) {
	_, ad, err := requestAdapter()
	if err != nil {
		return Info{}, err
	}
	info := adapterDesc(ad)
	fillLimits(&info, ad.GetLimits().Limits)
	info.Timestamps = ad.HasFeature(wgpu.FeatureNameTimestampQuery)
	info.F16 = ad.HasFeature(wgpu.FeatureNameShaderF16)
	ad.Release()
	return info, nil
}

// openDev requests a device with the adapter's buffer limits and, where
// offered, timestamp queries.
func openDev() (*dev, error) {
	inst, ad, err := requestAdapter()
	if err != nil {
		return nil, err
	}
	al := ad.GetLimits().Limits
	lim := wgpu.DefaultLimits()
	lim.MaxBufferSize = al.MaxBufferSize
	lim.MaxStorageBufferBindingSize = al.MaxStorageBufferBindingSize
	lim.MaxComputeWorkgroupStorageSize = min(al.MaxComputeWorkgroupStorageSize, wantWGStorage)
	lim.MaxComputeInvocationsPerWorkgroup = min(al.MaxComputeInvocationsPerWorkgroup, wantInvocations)
	lim.MaxComputeWorkgroupSizeX = min(al.MaxComputeWorkgroupSizeX, wantInvocations)
	lim.MaxComputeWorkgroupSizeY = min(al.MaxComputeWorkgroupSizeY, wantInvocations)
	lim.MaxStorageBuffersPerShaderStage = min(al.MaxStorageBuffersPerShaderStage, wantStorageBuffers)
	var feats []wgpu.FeatureName
	for _, f := range []wgpu.FeatureName{wgpu.FeatureNameTimestampQuery, wgpu.FeatureNameShaderF16} {
		if ad.HasFeature(f) {
			feats = append(feats, f)
		}
	}
	// Without timestamps device time falls back to the host clock, without
	// shader-f16 tiles stay f32.
	var device *wgpu.Device
	feats, err = withFewer(feats, func(feats []wgpu.FeatureName) (err error) {
		device, err = ad.RequestDevice(&wgpu.DeviceDescriptor{Label: "ag", RequiredFeatures: feats, RequiredLimits: &wgpu.RequiredLimits{Limits: lim}})
		return err
	})
	if err != nil {
		ad.Release()
		return nil, fmt.Errorf("webgpu: RequestDevice (maxBufferSize %d, maxStorageBufferBindingSize %d): %w", lim.MaxBufferSize, lim.MaxStorageBufferBindingSize, err)
	}
	d := &dev{inst: inst, adapter: ad, device: device, queue: device.GetQueue()}
	d.info = adapterDesc(ad)
	fillLimits(&d.info, device.GetLimits().Limits)
	d.info.Timestamps = slices.Contains(feats, wgpu.FeatureNameTimestampQuery) && device.HasFeature(wgpu.FeatureNameTimestampQuery)
	d.info.F16 = slices.Contains(feats, wgpu.FeatureNameShaderF16) && device.HasFeature(wgpu.FeatureNameShaderF16)
	// Spinning costs a CPU core while the GPU works: worth it on a GPU,
	// not on a software adapter that needs the cores itself.
	switch os.Getenv("AG_WEBGPU_WAIT") {
	case "spin":
		d.spin = true
	case "block":
	default:
		d.spin = d.info.GPU
	}
	d.deferRuns = os.Getenv("AG_WEBGPU_DEFER") != "off"
	return d, nil
}

func (d *dev) NewBuffer(size uint64) (*Buffer, error) {
	b, err := d.device.CreateBuffer(&wgpu.BufferDescriptor{
		Usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopySrc | wgpu.BufferUsageCopyDst,
		Size:  size,
	})
	if err != nil {
		return nil, err
	}
	return &Buffer{b: b, size: size}, nil
}

func (d *dev) DestroyBuffer(b *Buffer) {
	d.DropAhead()
	freeBuffer(b.b)
}

func (d *dev) Write(b *Buffer, off uint64, data []byte) error {
	return inChunks(off, data, func(off uint64, data []byte) error {
		if err := d.queue.WriteBuffer(b.b, off, data); err != nil {
			return err
		}
		// wgpu keeps every write in one pending staging area until the
		// next submit; flushing now and then keeps many small writes fast.
		if d.pendingWrites++; d.pendingWrites >= 16 || len(data) == MaxStaging {
			d.flushWrites()
		}
		return nil
	})
}

func (d *dev) flushWrites() {
	if d.pendingWrites == 0 {
		return
	}
	d.queue.Submit()
	d.pendingWrites = 0
}

func (d *dev) ensureStaging(size uint64) error {
	if d.staging != nil && d.stagingSize >= size {
		return nil
	}
	if d.staging != nil {
		// no recorded run copies into it: RunRepeatable's reads are
		// command buffers of their own (readCmd)
		freeBuffer(d.staging)
		d.staging = nil
	}
	st, err := d.newStage(size)
	if err != nil {
		return err
	}
	d.staging, d.stagingSize = st.b, size
	return nil
}

// freeBuffer destroys a buffer's memory and releases its handle.
func freeBuffer(b *wgpu.Buffer) {
	b.Destroy()
	b.Release()
}

func (d *dev) Read(b *Buffer, off uint64, dst []byte) error {
	d.pendingWrites = 0 // the submit below flushes them
	return inChunks(off, dst, func(off uint64, dst []byte) error {
		n := uint64(len(dst))
		if err := d.ensureStaging(n); err != nil {
			return err
		}
		cmd, err := d.copyCmd(b.b, off, d.staging, n)
		if err != nil {
			return err
		}
		d.queue.Submit(cmd)
		cmd.Release()
		return d.mapRead(d.staging, n, dst)
	})
}

// stageBuf is a MapRead staging buffer and its size.
type stageBuf struct {
	b    *wgpu.Buffer
	size uint64
}

// newStage is a MapRead staging buffer of size bytes.
func (d *dev) newStage(size uint64) (stageBuf, error) {
	b, err := d.device.CreateBuffer(&wgpu.BufferDescriptor{Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst, Size: size})
	return stageBuf{b: b, size: size}, err
}

// startLater submits r's copy and returns without waiting: the host goes
// on building and submitting steps while the device runs the work before
// the read (a lazy step's host work, 50-90 us on an H200 machine,
// otherwise left the GPU idle at every read). finish maps the buffer and
// copies the bytes out. Nothing is mapped until then: a mapping is asked
// for when its bytes are wanted and waited for at once, as read's is.
func (d *dev) startLater(b *Buffer, off uint64, r *laterRead) error {
	cmd, err := d.copyCmd(b.b, off, r.st.b, r.n)
	if err != nil {
		return err
	}
	d.pendingWrites = 0 // the submit flushes them
	d.queue.Submit(cmd)
	cmd.Release()
	r.through = d.runs
	return nil
}

// copyCmd is a command buffer of one copy.
func (d *dev) copyCmd(src *wgpu.Buffer, off uint64, dst *wgpu.Buffer, n uint64) (*wgpu.CommandBuffer, error) {
	enc, err := d.device.CreateCommandEncoder(nil)
	if err != nil {
		return nil, err
	}
	defer enc.Release()
	if err := enc.CopyBufferToBuffer(src, off, dst, 0, n); err != nil {
		return nil, err
	}
	return enc.Finish(nil)
}

func (st stageBuf) destroy() {
	freeBuffer(st.b)
}

// laterRead is a read in flight (ReadLater): its copy is submitted after
// the first through deferred runs.
type laterRead struct {
	laterBase
	through uint64
}

// Await does nothing natively: the mapping is asked for and waited for
// under the backend's lock (finish), as every other use of the device.
func (*laterRead) Await() error { return nil }

// Finish completes the read, unless throttle or close did, and returns
// its error.
func (r *laterRead) Finish(werr error, closed bool) error {
	if !r.complete {
		if closed { // close completes every read in flight; this cannot be
			return errReadClosed
		}
		r.d.completeRead(r)
	}
	return errors.Join(werr, r.err)
}

// completeRead maps r's staging buffer, waiting for that mapping only
// (the runs submitted after the read go on), copies the bytes out and
// gives the buffer back. The runs before the copy are finished then.
func (d *dev) completeRead(r *laterRead) {
	r.complete = true
	if i := slices.Index(d.later, r); i >= 0 {
		d.later = slices.Delete(d.later, i, i+1)
	}
	mp, err := startMap(r.st.b, r.n)
	if err != nil {
		r.err = fmt.Errorf("read: %w", err)
		d.wait(nil) // the copy may still run: the buffer goes after it
		r.st.destroy()
		return
	}
	d.waitFor(mp.done, false)
	if err := d.finishMap(r.st.b, r.n, r.dst, mp.status()); err != nil {
		r.err = fmt.Errorf("read: %w", err)
		r.st.destroy()
		return
	}
	d.done = max(d.done, r.through)
	d.giveStage(r.st)
}

// mapRead maps the first n bytes of a MapRead buffer, copies them into dst
// (the mapped memory is valid only until Unmap) and unmaps.
func (d *dev) mapRead(buf *wgpu.Buffer, n uint64, dst []byte) error {
	mp, err := startMap(buf, n)
	if err != nil {
		return err
	}
	d.waitFor(mp.done, true)
	return d.finishMap(buf, n, dst, mp.status())
}

func (d *dev) finishMap(buf *wgpu.Buffer, n uint64, dst []byte, status wgpu.BufferMapAsyncStatus) error {
	if status != wgpu.BufferMapAsyncStatusSuccess {
		return fmt.Errorf("MapAsync: status %v", status)
	}
	copy(dst, buf.GetMappedRange(0, uint(n)))
	return buf.Unmap()
}

// Bounds of the pause between two polls of a waiting run that does not spin.
const (
	minPollPause = 50 * time.Microsecond
	maxPollPause = 2 * time.Millisecond
)

// wait returns once every submission has completed and, when done is given,
// once *done is set by a callback that polling fires.
//
// It polls without blocking, because wgpu's blocking poll is not a wait:
// wgpu-core (v0.19, in this binding) waits at most 5 s for the fence there
// and then treats the submission as complete anyway: it frees and reuses
// its command buffers and staging memory and maps buffers for reading while
// the device still runs it. One run of a software adapter under load takes
// longer than that (a 40M-element add on lavapipe with both cores busy);
// lavapipe then executed freed command buffers and crashed the process
// ("signal: segmentation fault", issue 10 item 15), and a read could have
// copied a staging buffer before the copy into it had finished. A
// non-blocking poll compares the fence's real value.
func (d *dev) wait(done *bool) {
	d.waitFor(func() bool { return done == nil || *done }, true)
}

// waitFor is wait with the callbacks' condition as a function; without
// empty it returns once done holds, whatever the queue still runs.
func (d *dev) waitFor(done func() bool, empty bool) {
	pause := minPollPause
	for {
		idle := d.device.Poll(false, nil)
		if idle {
			d.done = d.runs // all finished
		}
		if (idle || !empty) && done() {
			return
		}
		if !d.spin {
			time.Sleep(pause)
			pause = min(2*pause, maxPollPause)
		}
	}
}

func (d *dev) NewPipeline(label, src string, readOnly []bool) (*Pipeline, error) {
	mod, err := d.device.CreateShaderModule(&wgpu.ShaderModuleDescriptor{Label: label, WGSLDescriptor: &wgpu.ShaderModuleWGSLDescriptor{Code: src}})
	if err != nil {
		return nil, err
	}
	defer mod.Release()
	entries := make([]wgpu.BindGroupLayoutEntry, len(readOnly))
	for i, ro := range readOnly {
		t := wgpu.BufferBindingTypeStorage
		if ro {
			t = wgpu.BufferBindingTypeReadOnlyStorage
		}
		entries[i] = wgpu.BindGroupLayoutEntry{Binding: uint32(i), Visibility: wgpu.ShaderStageCompute, Buffer: wgpu.BufferBindingLayout{Type: t}}
	}
	bgl, err := d.device.CreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: label, Entries: entries})
	if err != nil {
		return nil, err
	}
	pl, err := d.device.CreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{Label: label, BindGroupLayouts: []*wgpu.BindGroupLayout{bgl}})
	if err != nil {
		bgl.Release()
		return nil, err
	}
	p, err := d.device.CreateComputePipeline(&wgpu.ComputePipelineDescriptor{Label: label, Layout: pl,
		Compute: wgpu.ProgrammableStageDescriptor{Module: mod, EntryPoint: "main"}})
	if err != nil {
		pl.Release()
		bgl.Release()
		return nil, err
	}
	return &Pipeline{p: p, bgl: bgl, pl: pl}, nil
}

func (d *dev) ReleasePipeline(p *Pipeline) {
	p.p.Release()
	p.pl.Release()
	p.bgl.Release()
}

func (d *dev) NewBindGroup(p *Pipeline, entries []BindEntry) (*BindGroup, error) {
	es := make([]wgpu.BindGroupEntry, len(entries))
	for i, e := range entries {
		es[i] = wgpu.BindGroupEntry{Binding: uint32(i), Buffer: e.Buf.b, Offset: e.Off, Size: e.Size}
	}
	g, err := d.device.CreateBindGroup(&wgpu.BindGroupDescriptor{Layout: p.bgl, Entries: es})
	if err != nil {
		return nil, err
	}
	return &BindGroup{g: g}, nil
}

func (d *dev) ReleaseBindGroup(g *BindGroup) { g.g.Release() }

func (d *dev) ensureQueries(n uint32) error {
	if d.qs != nil && d.qCount >= n {
		return nil
	}
	d.releaseQueries()
	qs, err := d.device.CreateQuerySet(&wgpu.QuerySetDescriptor{Type: wgpu.QueryTypeTimestamp, Count: n})
	if err != nil {
		return err
	}
	res, err := d.device.CreateBuffer(&wgpu.BufferDescriptor{Usage: wgpu.BufferUsageQueryResolve | wgpu.BufferUsageCopySrc, Size: 8 * uint64(n)})
	if err != nil {
		qs.Release()
		return err
	}
	out, err := d.device.CreateBuffer(&wgpu.BufferDescriptor{Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst, Size: 8 * uint64(n)})
	if err != nil {
		qs.Release()
		res.Release()
		return err
	}
	d.qs, d.qCount, d.qResolve, d.qReadout = qs, n, res, out
	return nil
}

func (d *dev) releaseQueries() {
	if d.qs == nil {
		return
	}
	d.DropAhead() // a recorded run writes these
	d.qs.Release()
	freeBuffer(d.qResolve)
	freeBuffer(d.qReadout)
	d.qs, d.qCount = nil, 0
}

// RunInside is the browser's timestamps between the dispatches of one pass;
// natively (info.InsideTS false) calibration times a pass per kernel.
func (d *dev) RunInside([]Dispatch, []CopyOp) ([]uint64, error) {
	return nil, errors.New("webgpu: timestamps inside passes are not used natively")
}

// Run records every pass into one command encoder, submits it once and
// waits. With timed it writes a timestamp before the first pass and after
// each pass and returns them (len(passes)+1 ticks, in ns: wgpu-native on
// Vulkan reports raw ticks and the binding does not expose the period;
// NVIDIA's and lavapipe's period is 1 ns).
func (d *dev) Run(passes [][]Dispatch, copies []CopyOp, timed bool) ([]uint64, error) {
	return d.RunRead(passes, copies, timed, nil)
}

// FoldsRead reports whether RunRead can fold a read of n bytes into a run:
// a wait here is a poll, but a second submission and wait per step cost an
// H200's 4x1024 step 0.15-0.4 ms over its device time.
func (d *dev) FoldsRead(n int) bool { return n <= MaxStaging }

// RunRead is run with rb's copy recorded after the run's own and its map
// awaited in the same wait. rb may be nil.
func (d *dev) RunRead(passes [][]Dispatch, copies []CopyOp, timed bool, rb *ReadBack) ([]uint64, error) {
	cmd, err := d.encode(passes, copies, timed, rb, true)
	if err != nil {
		return nil, err
	}
	return d.submitWait(cmd, nil, uint32(len(passes)+1), timed, rb, nil)
}

// encode records passes, copies, the timestamps (timed) and rb's copy into
// one command buffer. grow lets it grow the query set and the staging
// buffer; without, it fails rather than replace what a submitted run uses.
func (d *dev) encode(passes [][]Dispatch, copies []CopyOp, timed bool, rb *ReadBack, grow bool) (*wgpu.CommandBuffer, error) {
	nq := uint32(len(passes) + 1)
	if !grow && (timed && d.qCount < nq || rb != nil && d.stagingSize < uint64(len(rb.Dst))) {
		return nil, errors.New("encode: would replace buffers in use")
	}
	if timed {
		if err := d.ensureQueries(nq); err != nil {
			return nil, err
		}
	}
	if rb != nil {
		if err := d.ensureStaging(uint64(len(rb.Dst))); err != nil {
			return nil, err
		}
	}
	enc, err := d.device.CreateCommandEncoder(nil)
	if err != nil {
		return nil, err
	}
	defer enc.Release()
	if timed {
		if err := enc.WriteTimestamp(d.qs, 0); err != nil {
			return nil, err
		}
	}
	for i, pass := range passes {
		cp := enc.BeginComputePass(nil)
		for _, ds := range pass {
			cp.SetPipeline(ds.Pipe.p)
			cp.SetBindGroup(0, ds.Bind.g, nil)
			cp.DispatchWorkgroups(ds.X, ds.Y, ds.Z)
		}
		err := cp.End()
		cp.Release()
		if err != nil {
			return nil, err
		}
		if timed {
			if err := enc.WriteTimestamp(d.qs, uint32(i+1)); err != nil {
				return nil, err
			}
		}
	}
	for _, c := range copies {
		if err := enc.CopyBufferToBuffer(c.Src.b, c.SrcOff, c.Dst.b, c.DstOff, c.Size); err != nil {
			return nil, err
		}
	}
	if timed {
		if err := enc.ResolveQuerySet(d.qs, 0, nq, d.qResolve, 0); err != nil {
			return nil, err
		}
		if err := enc.CopyBufferToBuffer(d.qResolve, 0, d.qReadout, 0, 8*uint64(nq)); err != nil {
			return nil, err
		}
	}
	if rb != nil {
		if err := enc.CopyBufferToBuffer(rb.Src.b, rb.Off, d.staging, 0, uint64(len(rb.Dst))); err != nil {
			return nil, err
		}
	}
	return enc.Finish(nil)
}

// readCmd is a command buffer of rb's copy into the staging buffer alone,
// submitted after a run's own (see RunRepeatable).
func (d *dev) readCmd(rb *ReadBack) (*wgpu.CommandBuffer, error) {
	return d.encode(nil, nil, false, rb, true)
}

// submitWait submits cmd (made by encode with nq timestamps) and then, when
// given, the read's own command buffer rbCmd; maps the timestamps and the
// read, calls during (when given) while the device runs, waits once and
// copies the results out.
func (d *dev) submitWait(cmd, rbCmd *wgpu.CommandBuffer, nq uint32, timed bool, rb *ReadBack, during func()) ([]uint64, error) {
	d.pendingWrites = 0 // the submit flushes them
	if rbCmd != nil {
		d.queue.Submit(cmd, rbCmd)
		rbCmd.Release()
	} else {
		d.queue.Submit(cmd)
	}
	cmd.Release()
	// Map the timestamps and the read now: the mappings complete with the
	// submission, so the one wait covers all.
	var tsMap, rbMap mapping
	n := uint64(0)
	if rb != nil {
		n = uint64(len(rb.Dst))
		var err error
		if rbMap, err = startMap(d.staging, n); err != nil {
			d.wait(nil)
			return nil, fmt.Errorf("read: %w", err)
		}
	}
	if timed {
		var err error
		if tsMap, err = startMap(d.qReadout, 8*uint64(nq)); err != nil {
			if rb != nil {
				// finish the read's mapping, so the staging buffer is unmapped
				d.waitFor(rbMap.done, true)
				err = errors.Join(err, d.finishMap(d.staging, n, rb.Dst, rbMap.status()))
			}
			return nil, fmt.Errorf("timestamps: %w", err)
		}
	}
	if during != nil {
		during()
	}
	d.waitFor(func() bool { return (!timed || tsMap.done()) && (rb == nil || rbMap.done()) }, true)
	var raw []uint64
	var tsErr error
	if timed {
		raw = make([]uint64, nq)
		if err := d.finishMap(d.qReadout, 8*uint64(nq), BytesOf(raw), tsMap.status()); err != nil {
			tsErr = fmt.Errorf("timestamps: %w", err)
		}
	}
	if rb != nil {
		if err := d.finishMap(d.staging, n, rb.Dst, rbMap.status()); err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
	}
	if tsErr != nil {
		return nil, tsErr
	}
	return raw, nil
}

// RunRepeatable is RunRead for a plain run of one pass, which build
// returns; ahead reports that it submitted a command recorded ahead. A run that repeats the one before (the same key: a captured
// step's replays, a lazy step over the same buffers) records its successor
// while the device runs it, and the successor submits that command buffer
// instead of recording its own: recording 40 dispatches took 0.1-0.2 ms on
// the 2-core machine, time the GPU otherwise sits idle before each step.
// Queue writes between the two runs still come first (WebGPU orders a
// write before every later submit, whenever its command buffer was
// recorded); a buffer destroyed, or the query set replaced, in between
// makes the recorded one stale (aheadGen). A read folded into the run
// (rb) is a command buffer of its own submitted with it, so that a run
// and a run that reads share what was recorded ahead: a loop reading its
// loss every tenth step lost three of ten recordings (0.29 against 0.25
// ms a step at 4x1024 batch 64 on an H200) when the read was part of the
// key.
func (d *dev) RunRepeatable(key RunKey, build func() ([]Dispatch, []CopyOp, error), timed bool, rb *ReadBack) ([]uint64, bool, error) {
	cmd, ahead, repeat, err := d.command(key, build, timed)
	if err != nil {
		return nil, false, err
	}
	var rbCmd *wgpu.CommandBuffer
	if rb != nil {
		if rbCmd, err = d.readCmd(rb); err != nil {
			cmd.Release()
			return nil, false, err
		}
	}
	var next func()
	if repeat {
		next = func() { d.recordAhead(build, timed) }
	}
	ticks, err := d.submitWait(cmd, rbCmd, 2, timed, rb, next)
	return ticks, ahead, err
}

// command returns the command buffer of the run of key: the one recorded
// ahead when it is that run's (ahead), else recorded now; repeat reports
// that the run repeats the one before, whose successor is then worth
// recording ahead.
func (d *dev) command(key RunKey, build func() ([]Dispatch, []CopyOp, error), timed bool) (cmd *wgpu.CommandBuffer, ahead, repeat bool, err error) {
	if a := d.ahead; a != nil {
		d.ahead = nil
		if a.gen == d.aheadGen && a.key.Same(key) {
			cmd = a.cmd
			d.counters.Ahead++
		} else {
			a.cmd.Release()
		}
	}
	ahead = cmd != nil
	repeat = ahead || key.Same(d.lastKey)
	d.lastKey = key.Clone()
	if cmd == nil {
		ds, copies, err := build()
		if err != nil {
			return nil, false, false, err
		}
		if cmd, err = d.encode([][]Dispatch{ds}, copies, timed, nil, true); err != nil {
			return nil, false, false, err
		}
	}
	return cmd, ahead, repeat, nil
}

// recordAhead records the next run of the last key, assumed to repeat it.
// A failure records nothing: the next run builds again and reports it.
func (d *dev) recordAhead(build func() ([]Dispatch, []CopyOp, error), timed bool) {
	ds, copies, err := build()
	if err != nil {
		return
	}
	if c, err := d.encode([][]Dispatch{ds}, copies, timed, nil, false); err == nil {
		d.ahead = &aheadCmd{key: d.lastKey, cmd: c, gen: d.aheadGen}
	}
}

// aheadCmd is a run's command buffer recorded during the run before.
type aheadCmd struct {
	key RunKey
	cmd *wgpu.CommandBuffer
	gen uint64
}

// DropAhead releases a command buffer recorded ahead and makes any other
// stale: called when what one may use goes away.
func (d *dev) DropAhead() {
	d.aheadGen++
	if d.ahead != nil {
		d.ahead.cmd.Release()
		d.ahead = nil
	}
}

// DefersRuns reports whether plain runs are submitted without waiting
// (AG_WEBGPU_DEFER=off: every run waits, as before).
func (d *dev) DefersRuns() bool { return d.deferRuns }

// DeferRun submits a plain run and returns without waiting for it, so that
// the host builds the next step while the GPU runs this one: a loop that
// reads its loss every tenth step waits once in ten. Reads, and runs that
// read, wait for everything submitted before (queue order). After
// MaxInFlight deferred runs the next waits for the queue to drain (see
// throttle). Like RunRepeatable it submits a command recorded ahead when
// the run repeats the one before (ahead reports it), and records the next
// one after submitting; a deferred run writes the same timestamps as a
// waited one (unread) so that both share recordings.
func (d *dev) DeferRun(key RunKey, build func() ([]Dispatch, []CopyOp, error)) (bool, error) {
	d.throttle()
	cmd, ahead, repeat, err := d.command(key, build, d.info.Timestamps)
	if err != nil {
		return false, err
	}
	d.pendingWrites = 0 // the submit flushes them
	d.runs++
	d.queue.Submit(cmd)
	cmd.Release()
	if repeat {
		d.recordAhead(build, d.info.Timestamps)
	}
	return ahead, nil
}

// SetDefer turns DeferRun on or off and returns what it was (tests that
// read each run's device time turn it off).
func (d *dev) SetDefer(on bool) bool {
	was := d.deferRuns
	if was && !on {
		d.wait(nil)
	}
	d.deferRuns = on
	return was
}

// Unfinished is the number of deferred runs not known finished.
func (d *dev) Unfinished() uint64 { return d.runs - d.done }

// DrainDeferred waits for the deferred runs not yet seen finished.
func (d *dev) DrainDeferred() {
	if d.runs > d.done {
		d.wait(nil)
	}
}

// WaitIdle waits until everything submitted has finished.
func (d *dev) WaitIdle() error {
	d.wait(nil)
	return nil
}

// throttle waits once MaxInFlight deferred runs are not known finished:
// for the oldest later read whose copy follows enough of them (the runs
// after it go on, as a pipelined loop wants), else for the queue to drain.
func (d *dev) throttle() {
	for d.runs-d.done >= MaxInFlight {
		i := slices.IndexFunc(d.later, func(r *laterRead) bool { return r.through > d.done })
		if i < 0 {
			d.counters.Drains++
			d.wait(nil) // all finished
			return
		}
		d.completeRead(d.later[i])
	}
}

func (d *dev) Close() {
	d.DrainDeferred() // deferred runs finish before the device goes
	// reads in flight complete: their waits give the values, as a read
	// waited for before the close would have
	for len(d.later) > 0 {
		d.completeRead(d.later[0])
	}
	d.dropStages()
	d.DropAhead()
	d.releaseQueries()
	if d.staging != nil {
		freeBuffer(d.staging)
		d.staging = nil
	}
	d.queue.Release()
	d.device.Release()
	d.adapter.Release() // the instance is the process's (see instances)
}

// SetSpin sets whether the native device d waits by polling without pause
// (AG_WEBGPU_WAIT) and returns what it was: benchmarks compare both.
func SetSpin(d Device, on bool) (was bool) {
	nd := d.(*dev)
	was, nd.spin = nd.spin, on
	return was
}

// QueueEmpty reports whether the native device d's queue has nothing left
// to run (one non-blocking poll; tests).
func QueueEmpty(d Device) bool { return d.(*dev).device.Poll(false, nil) }

// EncodeOnly records ds into a compute pass of the native device d and
// finishes the command buffer without submitting it: the host's share of
// a run (benchmarks).
func EncodeOnly(d Device, ds []Dispatch) error {
	cmd, err := d.(*dev).encode([][]Dispatch{ds}, nil, false, nil, true)
	if err != nil {
		return err
	}
	cmd.Release()
	return nil
}
