// Package backend defines what a device must do for ag: hold f32 memory and
// run compiled graphs of a small op IR over it. A backend knows nothing of
// autograd; core lowers forward, backward and optimizer updates to the IR.
//
// Backends register a Driver by name in init(), like database/sql drivers;
// core.Open("auto") asks each registered driver in order of Priority.
// See doc.go for how to add an op or a backend.
package backend

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// Buffer is a block of device memory holding Len() float32 values. Its
// concrete type belongs to the backend that allocated it.
type Buffer interface {
	Len() int
}

// Caps describes a backend instance.
type Caps struct {
	// Name is the registry name ("cpu", "webgpu", "ggml-vulkan", ...).
	Name string
	// Device is a human description of the hardware ("SwiftShader", "NVIDIA H200").
	Device string
	// MaxBufferElems is the largest buffer Alloc accepts, in float32s (0: no limit).
	MaxBufferElems int
	// DeviceTimer is true when RunInfo.DeviceTime is measured by the device
	// (timestamp queries) rather than by the host clock around the run.
	DeviceTimer bool
	// Unsupported lists ops the backend cannot run; Compile fails on them.
	Unsupported []Op
	// Composites lists the composite ops (ClassComposite) it lowers
	// natively, with a fused kernel; plan.Expand decomposes every other
	// composite into primitives before Compile, and Compile fails on one.
	Composites []Op
	// Timer says how its NodeTimer times nodes, for people reading a
	// profile ("timestamp queries per kernel"); "" when it has none.
	Timer string
	// KernelRank is the largest rank its kernels take (0: NativeRank);
	// plan.Expand lowers the nodes above it. Only the float64 reference
	// takes MaxRank: one lowering for every device keeps them identical.
	KernelRank int
	// LaterReads is true when its LaterReader returns before the values
	// are in (WebGPU in the browser); elsewhere core reads when asked,
	// folding the read into the run where the program can (RunReader).
	LaterReads bool
}

// Supports reports whether op is runnable.
func (c Caps) Supports(op Op) bool {
	for _, u := range c.Unsupported {
		if u == op {
			return false
		}
	}
	return true
}

// Native reports whether the composite op runs natively (Composites).
func (c Caps) Native(op Op) bool { return slices.Contains(c.Composites, op) }

// Rank is KernelRank, NativeRank when unset.
func (c Caps) Rank() int {
	if c.KernelRank > 0 {
		return c.KernelRank
	}
	return NativeRank
}

// RunInfo is what one Program.Run measured.
type RunInfo struct {
	// DeviceTime is the compute time of the run: device-measured when
	// Caps.DeviceTimer, else the host time of the run itself; 0 when
	// Pending.
	DeviceTime time.Duration
	// Pending: Run submitted the work and returned without waiting for it
	// (WebGPU: in the browser a wait is a round trip to the GPU process,
	// about a millisecond each; natively the host builds the next step
	// while the GPU runs this one). Reads and later runs are ordered
	// after it, so reading the results is still safe; the run's time is
	// not measured, and a device error it meets is returned by the next
	// read or run. RunTimed always waits.
	Pending bool
	// Launches counts submissions to the device (kernel launches on a
	// per-op executor, command buffers / graph computes on a GPU).
	Launches int
	// Ahead: the run submitted commands recorded during the run before
	// (the same program over the same buffers again), so it recorded
	// nothing itself. Only webgpu records ahead, natively.
	Ahead bool
}

// Program is a compiled Graph, run many times with different bound args.
type Program interface {
	// Run executes the graph once. len(args) must be Graph.NumArgs; each
	// args[i] must come from the same backend and hold at least as many
	// elements as the nodes that read or write it. Run returns when reading
	// the results is safe: they are in the output buffers, or (RunInfo.
	// Pending) every read waits for them.
	Run(args []Buffer) (RunInfo, error)
	// Release frees what Compile made. The program must not run afterwards.
	Release()
}

// RunReader is implemented by programs that can read a buffer back within
// the run's own submission: a step whose result is read at once (a training
// step's loss) then waits for the device once, not twice (the run, then the
// read's own copy and wait). core uses it when it runs pending work to read
// one of the results, unless it is profiling.
type RunReader interface {
	// RunRead is Run(args) followed by Read(src, off, dst), with one wait
	// where the device allows it (RunInfo describes the run). src is
	// usually one of args. A run that fails reads nothing.
	RunRead(args []Buffer, src Buffer, off int, dst []float32) (RunInfo, error)
}

// ErrMemoryUnknown is wrapped by Memory's error on a device whose memory
// cannot be queried (WebGPU on a hardware GPU).
var ErrMemoryUnknown = errors.New("device memory unknown")

// Waiter is implemented by backends whose runs may return before their
// work is done (RunInfo.Pending): Wait returns when everything submitted
// so far has finished on the device, with the error a deferred run met if
// one did. core.Device.Sync calls it, so that Sync is a barrier to time
// work by; a backend that always waits need not implement it.
type Waiter interface {
	Wait() error
}

// LaterReader is implemented by backends that can start a read without
// waiting for it, so that a training loop asking for step k's loss and
// waiting for it a few steps later keeps the device busy meanwhile: in
// the browser a read waits a round trip to the GPU process (1-3 ms on a
// GPU, whatever its size), and natively the host's work on the next steps
// overlaps the device's (webgpu).
// core.Tensor.ReadLater and core.Capture.CallLater use it where
// Caps.LaterReads; elsewhere they read at once.
type LaterReader interface {
	// ReadLater copies len(dst) elements of b starting at off, after the
	// work submitted before it, and returns without waiting: wait blocks
	// until they are in dst (or returns the error of the read, or of a run
	// before it that failed). A nil wait means dst is filled already.
	// Work submitted afterwards does not change what is read; every wait
	// must be called, once.
	ReadLater(b Buffer, off int, dst []float32) (wait func() error, err error)
}

// HostTaker is implemented by backends whose buffers are host memory
// (backend/cpu): core.Device.Close moves each value to the host by taking
// its buffer's memory instead of copying it, which held every value twice
// at once (GPT-2 small's weights, gradients and Adam state: 1.9 GB more).
type HostTaker interface {
	// TakeHost frees b and returns its first n elements, the memory b
	// held, now the caller's; ok is false (and b untouched) where b is not
	// the backend's or holds fewer than n.
	TakeHost(b Buffer, n int) (data []float32, ok bool)
}

// Backend is one opened device.
type Backend interface {
	Caps() Caps
	// Alloc returns a zero-filled buffer of n float32s.
	Alloc(n int) (Buffer, error)
	// Free releases a buffer; using it afterwards is an error of the caller.
	Free(b Buffer)
	// Write copies src into b starting at element off.
	Write(b Buffer, off int, src []float32) error
	// Read copies len(dst) elements of b starting at off into dst.
	Read(b Buffer, off int, dst []float32) error
	// Memory reports free and total device memory in bytes (estimates where
	// the API has no query; the backend documents which), or an error
	// wrapping ErrMemoryUnknown where it cannot say: callers then check
	// nothing against it and let allocations report what fails.
	Memory() (free, total uint64, err error)
	// Compile turns a graph into a reusable program.
	Compile(g *Graph) (Program, error)
	// Close releases the device. Buffers and programs must be freed first.
	Close() error
}

// NodeTimer is implemented by programs that can time each node of a run;
// the profiler uses it. Each backend times as precisely as its device lets
// it and says how, per node, in NodeTimes.How (Caps.Timer describes it).
type NodeTimer interface {
	// RunTimed is Run with each node's compute time in t.Dur and how it
	// was obtained in t.How (both of the graph's length, given by the
	// caller). Its results are Run's.
	RunTimed(args []Buffer, t *NodeTimes) (RunInfo, error)
}

// NodeTimes are a timed run's per-node times.
type NodeTimes struct {
	Dur []time.Duration
	How []TimeKind
}

// NewNodeTimes makes NodeTimes for a graph of n nodes.
func NewNodeTimes(n int) *NodeTimes {
	return &NodeTimes{Dur: make([]time.Duration, n), How: make([]TimeKind, n)}
}

// Check reports whether t fits a graph of n nodes, naming fn.
func (t *NodeTimes) Check(fn string, n int) error {
	if t == nil || len(t.Dur) != n || len(t.How) != n {
		return fmt.Errorf("%s: node times for a graph of %d nodes, want %d of each", fn, n, n)
	}
	clear(t.Dur)
	clear(t.How)
	return nil
}

// TimeKind says how a node's time was obtained.
type TimeKind uint8

// The kinds of node time.
const (
	// TimeNone: the node ran no kernel (an arg, a view, a dead node).
	TimeNone TimeKind = iota
	// TimeMeasured: its own kernel was timed.
	TimeMeasured
	// TimeSplit: its share, by NodeCost, of a timed kernel it was fused
	// into with other nodes.
	TimeSplit
	// TimeEstimated: its share of a timed run by proportions measured
	// per kernel earlier (a calibration) or by NodeCost.
	TimeEstimated
)

// Availability is a driver's answer to "can you run here?".
type Availability struct {
	// OK: Open can succeed on this machine.
	OK bool
	// Auto: "auto" may pick this driver. False for a device that works but
	// should not be a default, such as a software Vulkan (lavapipe) adapter,
	// which is far slower than the CPU backends.
	Auto bool
	// Why says what was found ("NVIDIA H200 (Vulkan)") or why not
	// ("no Vulkan driver: install mesa-vulkan-drivers").
	Why string
}

// Driver opens backend instances. Available probes, without side effects
// that last, whether Open can succeed here (shown by `ag devices`).
type Driver interface {
	Open() (Backend, error)
	Available() Availability
}

type entry struct {
	name     string
	priority int
	drv      Driver
}

var (
	regMu sync.Mutex
	reg   = map[string]entry{}
)

// The "auto" priorities of ag's own drivers, in the order of the measured
// training-step speeds (bench/results, bench/side_by_side.sh): WebGPU trained
// the 4x1024 MLP 1.6-1.8x faster than ggml-vulkan on an H200, and the pure-Go
// cpu backend with its assembly kernels 1.7x faster than ggml-cpu on a
// 2-core EPYC; with its portable Go kernel it ranks last. The backends
// register with these names, so documentation names them rather than
// repeating numbers (TestBuiltinPriorities checks the registry against them).
const (
	PriorityWebGPU      = 40
	PriorityGGMLVulkan  = 35
	PriorityCPUAssembly = 25
	PriorityGGMLCPU     = 20
	PriorityCPUPortable = 10
)

// Register makes a driver available under name. Higher priority wins in
// "auto" selection (see PriorityWebGPU and the others). Drivers that work
// but should not be a default (software GPUs) say so in Availability.Auto.
// It panics on a duplicate name, like database/sql.Register.
func Register(name string, priority int, d Driver) {
	regMu.Lock()
	defer regMu.Unlock()
	if d == nil {
		panic("backend.Register: driver " + name + " is nil")
	}
	if _, dup := reg[name]; dup {
		panic("backend.Register: driver " + name + " registered twice")
	}
	reg[name] = entry{name, priority, d}
}

// DriverInfo describes a registered driver.
type DriverInfo struct {
	Name     string
	Priority int
	Availability
}

// Drivers lists the registered drivers, best first.
func Drivers() []DriverInfo {
	regMu.Lock()
	es := make([]entry, 0, len(reg))
	for _, e := range reg {
		es = append(es, e)
	}
	regMu.Unlock()
	sort.Slice(es, func(i, j int) bool {
		if es[i].priority != es[j].priority {
			return es[i].priority > es[j].priority
		}
		return es[i].name < es[j].name
	})
	out := make([]DriverInfo, len(es))
	for i, e := range es {
		out[i] = DriverInfo{e.name, e.priority, e.drv.Available()}
	}
	return out
}

// driverImports names the package whose import registers each of ag's own
// drivers: a driver registers in its package's init, so a program that never
// imports the package has only cpu (which core imports).
var driverImports = map[string]string{
	"cpu":         "github.com/ag-go/ag/backend/cpu",
	"webgpu":      "github.com/ag-go/ag/backend/webgpu",
	"ggml-cpu":    "github.com/ag-go/ag/backend/native",
	"ggml-vulkan": "github.com/ag-go/ag/backend/native",
}

// registerHint says, for a name Open does not know, which blank import
// registers it: the error a user's own module meets first, since only
// core's cpu is registered without one.
func registerHint(name string) string {
	pkg, ok := driverImports[name]
	if !ok {
		return ""
	}
	h := fmt.Sprintf(`; %q registers in package %s: add import _ "github.com/ag-go/ag/backend/all" (every backend) or _ %q`, name, pkg, pkg)
	if pkg == driverImports["ggml-cpu"] {
		h += " and build with -tags ggml and ggml's cgo flags (go run github.com/ag-go/ag/cmd/ag ggml prints them)"
	}
	return h
}

// ErrNoDriver is returned by Open for a name nobody registered.
var ErrNoDriver = errors.New("backend: no such driver")

// Open opens the named driver, or with "auto" the best available one
// (falling through to the next when one fails to open).
func Open(name string) (Backend, error) {
	if name == "auto" || name == "" {
		var errs []error
		for _, d := range Drivers() {
			if !d.OK || !d.Auto {
				continue
			}
			b, err := openNamed(d.Name)
			if err == nil {
				return b, nil
			}
			errs = append(errs, err)
		}
		return nil, fmt.Errorf("backend.Open(auto): no driver could be opened: %w", errors.Join(errs...))
	}
	return openNamed(name)
}

func openNamed(name string) (Backend, error) {
	regMu.Lock()
	e, ok := reg[name]
	regMu.Unlock()
	if !ok {
		names := []string{}
		for _, d := range Drivers() {
			names = append(names, d.Name)
		}
		return nil, fmt.Errorf("backend.Open(%q): %w (registered: %v)%s", name, ErrNoDriver, names, registerHint(name))
	}
	b, err := e.drv.Open()
	if err != nil {
		return nil, fmt.Errorf("backend.Open(%q): %w", name, err)
	}
	return b, nil
}

// ProgramSizer is implemented by programs that know how much device memory
// they hold (intermediates, constants, parameters): core's program cache
// bounds the memory of the programs it keeps with it.
type ProgramSizer interface {
	MemoryBytes() int64
}
