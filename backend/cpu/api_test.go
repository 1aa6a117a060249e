package cpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

func TestRegisteredAndCaps(t *testing.T) {
	found := false
	for _, d := range backend.Drivers() {
		if d.Name == "cpu" {
			found = true
			if !d.OK || !d.Auto || d.Priority != priority() || !strings.Contains(d.Why, "pure Go") {
				t.Errorf("cpu driver info %+v", d)
			}
		}
	}
	if !found {
		t.Fatal("driver cpu not registered")
	}
	be, err := backend.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	caps := be.Caps()
	if caps.Name != "cpu" || caps.DeviceTimer || !strings.HasPrefix(caps.Device, "pure Go (") {
		t.Errorf("caps %+v", caps)
	}
	for _, op := range backend.Ops() {
		if !caps.Supports(op) {
			t.Errorf("op %v unsupported", op)
		}
	}
	free, total, err := be.Memory()
	if err != nil || total == 0 || free == 0 || free > total {
		t.Errorf("Memory() = %d, %d, %v", free, total, err)
	}
}

func TestBufferReadWrite(t *testing.T) {
	c := New()
	b, err := c.Alloc(10)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 10)
	if err := c.Read(b, 0, got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 0 {
			t.Fatalf("fresh buffer [%d] = %v, want 0", i, v)
		}
	}
	if err := c.Write(b, 7, []float32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := c.Read(b, 6, got[:4]); err != nil || got[0] != 0 || got[1] != 1 || got[3] != 3 {
		t.Fatalf("read back %v, %v", got[:4], err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"write past end", c.Write(b, 8, []float32{1, 2, 3}), "cpu.Write: 3 values at offset 8 outside buffer of 10"},
		{"write negative", c.Write(b, -1, []float32{1}), "cpu.Write: 1 values at offset -1"},
		{"read past end", c.Read(b, 5, make([]float32, 6)), "cpu.Read: 6 values at offset 5 outside buffer of 10"},
		{"read offset past end", c.Read(b, 11, nil), "cpu.Read: 0 values at offset 11"},
		{"alloc negative", func() error { _, err := c.Alloc(-1); return err }(), "cpu.Alloc(-1)"},
		{"foreign buffer", c.Write(fakeBuf{}, 0, nil), "is not a cpu buffer"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, tc.err, tc.want)
		}
	}
	if _, err := c.Alloc(1 << 62); !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("Alloc(1<<62): %v, want ErrOutOfMemory", err)
	}
	if err := c.Write(b, 10, nil); err != nil { // empty write at the end is fine
		t.Errorf("empty write at end: %v", err)
	}
	c.Free(b)
	if b.Len() != 0 {
		t.Errorf("freed buffer Len %d", b.Len())
	}
	if err := c.Read(b, 0, got[:1]); !errors.Is(err, ErrFreed) {
		t.Errorf("read of a freed buffer: %v, want ErrFreed", err)
	}
}

type fakeBuf struct{}

func (fakeBuf) Len() int { return 0 }

// TakeHost hands over a buffer's first n values and frees it; a freed
// buffer, a short one or another's are refused, untouched.
func TestTakeHost(t *testing.T) {
	c := New()
	var _ backend.HostTaker = c
	b, err := c.Alloc(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(b, 0, []float32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.TakeHost(b, 5); ok {
		t.Errorf("took 5 values of a buffer of 4")
	}
	if _, ok := c.TakeHost(nil, 1); ok {
		t.Errorf("took a nil buffer")
	}
	got, ok := c.TakeHost(b, 3)
	if !ok || len(got) != 3 || cap(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Errorf("TakeHost(b, 3) = %v (cap %d), %v; want [1 2 3]", got, cap(got), ok)
	}
	if _, ok := c.TakeHost(b, 1); ok {
		t.Errorf("took a buffer twice")
	}
	if err := c.Read(b, 0, make([]float32, 1)); err == nil {
		t.Errorf("read of a taken buffer: no error")
	}
}

func TestRunErrors(t *testing.T) {
	c := New()
	b := &gb{}
	b.out(b.op(backend.OpExp, []int{4}, b.arg(4)))
	prog, err := c.Compile(&b.g)
	if err != nil {
		t.Fatal(err)
	}
	small, _ := c.Alloc(3)
	ok4, _ := c.Alloc(4)
	freed, _ := c.Alloc(4)
	c.Free(freed)
	for _, tc := range []struct {
		args []backend.Buffer
		want string
	}{
		{[]backend.Buffer{ok4}, "1 args, graph takes 2"},
		{[]backend.Buffer{small, ok4}, "arg 0 holds 3 values, graph uses 4"},
		{[]backend.Buffer{ok4, small}, "arg 1 holds 3 values, graph uses 4"},
		{[]backend.Buffer{ok4, freed}, "arg 1: cpu.Run: cpu: buffer freed"},
		{[]backend.Buffer{ok4, nil}, "arg 1: cpu.Run: buffer <nil> is not a cpu buffer"},
	} {
		if _, err := prog.Run(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run: error %v, want %q", err, tc.want)
		}
	}
	if _, err := prog.(backend.NodeTimer).RunTimed([]backend.Buffer{ok4, ok4}, backend.NewNodeTimes(1)); err == nil {
		t.Error("RunTimed with a short times slice succeeded")
	}
	times := backend.NewNodeTimes(2)
	info, err := prog.(backend.NodeTimer).RunTimed([]backend.Buffer{ok4, ok4}, times)
	if err != nil || info.Launches != 1 || info.DeviceTime <= 0 || times.Dur[1] <= 0 || times.Dur[0] != 0 ||
		times.How[1] != backend.TimeMeasured || times.How[0] != backend.TimeNone {
		t.Errorf("RunTimed: %+v %v, times %+v", info, err, times)
	}
	prog.Release()
	if _, err := prog.Run([]backend.Buffer{ok4, ok4}); !errors.Is(err, ErrReleased) {
		t.Errorf("Run after Release: %v", err)
	}
	bad := &backend.Graph{Nodes: []backend.Node{{Op: backend.OpExp, In: []int{0}, Shape: []int{1}}}}
	if _, err := c.Compile(bad); err == nil || !strings.Contains(err.Error(), "cpu.Compile") {
		t.Errorf("Compile of an invalid graph: %v", err)
	}
}
