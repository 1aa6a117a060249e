package profile

import "strconv"

// Stage is one step of executing work on a device. The names are the seed's
// (ag_fwd_profile.R), so reports read the same as ggmlR's.
type Stage uint8

// The stages, in the order the seed's per-op executor runs them.
const (
	StageCtx      Stage = iota // getting a context / graph builder with room
	StageCreate                // building the op's node (recorded per op)
	StageFlush                 // allocating backend buffers
	StageUpload                // sending host data to the device
	StageGraph                 // building or compiling the program
	StageCompute               // the arithmetic
	StageDownload              // reading results back to the host
	numStages
)

var stageNames = [numStages]string{"ctx", "create", "flush", "upload", "graph", "compute", "download"}

// stageDocs say what each stage is, for people: the page's legend and
// tooltips read them from here (StageInfos), so the names and their
// meanings exist once.
var stageDocs = [numStages]string{
	StageCtx:      "getting a graph builder: program-cache lookup, reopening the device",
	StageCreate:   "building op nodes (and a backward's walk of the graph)",
	StageFlush:    "allocating device memory for the values a run keeps",
	StageUpload:   "host → device transfers",
	StageGraph:    "lowering to the backend IR and compiling on a cache miss; waiting for the device: the submit and wait around compute on devices that time themselves, and a read's round trip (what the smallest read pays)",
	StageCompute:  "the arithmetic (device time where the device has timestamp queries)",
	StageDownload: "device → host transfers: moving the bytes (a read's round trip is graph)",
}

// Doc says what the stage is.
func (s Stage) Doc() string {
	if s < numStages {
		return stageDocs[s]
	}
	return ""
}

// StageInfo is a stage's name and meaning, as the page shows them.
type StageInfo struct {
	Stage string `json:"stage"`
	Doc   string `json:"doc"`
}

// StageInfos lists every stage in execution order with its meaning.
func StageInfos() []StageInfo {
	out := make([]StageInfo, numStages)
	for i := range out {
		s := Stage(i)
		out[i] = StageInfo{s.String(), s.Doc()}
	}
	return out
}

// String returns the seed's stage name ("ctx", "create", ...).
func (s Stage) String() string {
	if s < numStages {
		return stageNames[s]
	}
	return "stage(" + strconv.Itoa(int(s)) + ")"
}

// Stages lists every stage in execution order.
func Stages() []Stage {
	s := make([]Stage, numStages)
	for i := range s {
		s[i] = Stage(i)
	}
	return s
}

// Pass is the part of a training step a node or op belongs to. Each pass has
// its own profiler switch and report.
//
// The constants carry a Pass prefix because Forward and Backward are the
// switch functions, mirroring ag_forward_profile / ag_backward_profile.
type Pass uint8

// The passes of a training step.
const (
	PassForward  Pass = iota // the model and the loss
	PassBackward             // gradient nodes
	PassUpdate               // optimizer update nodes
	numPasses
)

var passNames = [numPasses]string{"forward", "backward", "update"}

// String returns "forward", "backward" or "update".
func (p Pass) String() string {
	if p < numPasses {
		return passNames[p]
	}
	return "pass(" + strconv.Itoa(int(p)) + ")"
}

// Passes lists every pass.
func Passes() []Pass { return []Pass{PassForward, PassBackward, PassUpdate} }

// Dir is the direction of a host<->device transfer.
type Dir uint8

// Transfer directions.
const (
	Up   Dir = iota // host to device
	Down            // device to host
)

// String returns "up" or "down", the seed's names.
func (d Dir) String() string {
	switch d {
	case Up:
		return "up"
	case Down:
		return "down"
	}
	return "dir(" + strconv.Itoa(int(d)) + ")"
}
