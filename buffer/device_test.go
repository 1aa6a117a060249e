package buffer

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ag-go/ag/backend"
	_ "github.com/ag-go/ag/backend/all" // every driver AG_TEST_DEVICE may name
	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/core"
)

// testDevice lets the same tests run on another backend:
// AG_TEST_DEVICE=webgpu go test ./buffer/. A device named there that cannot
// open fails the tests: it never falls back to cpu.
func testDevice() string { return testenv.Device() }

// open opens the test device, closed when the test ends.
func open(t testing.TB) *core.Device {
	t.Helper()
	dev, err := core.Open(testDevice())
	if err != nil {
		t.Fatalf("%s=%s: %v", testenv.DeviceEnv, testDevice(), err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// faultyName is a test-only driver wrapping the test device's backend: it
// fails reads on demand and can report made-up memory figures, so the
// failure paths of Device.Close and buffer.New can be exercised.
const faultyName = "buffer-test-faulty"

func init() { backend.Register(faultyName, -1, faultyDriver{}) }

// faults are the knobs of every faulty backend (tests using it do not run in
// parallel).
var faults struct {
	mu           sync.Mutex
	failReadFrom int    // fail Read at element offsets >= this; < 0: never
	free         uint64 // reported free bytes; 0: the wrapped backend's
	maxElems     int    // reported Caps.MaxBufferElems; 0: the wrapped backend's
	reads        []int  // lengths of the reads so far
}

// openFaulty resets the knobs, sets the reported free memory and largest
// buffer (0: the wrapped backend's) and opens a device on the faulty driver.
func openFaulty(t *testing.T, free uint64, maxElems int) *core.Device {
	t.Helper()
	faults.mu.Lock()
	faults.failReadFrom, faults.free, faults.maxElems, faults.reads = -1, free, maxElems, nil
	faults.mu.Unlock()
	dev, err := core.Open(faultyName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		faults.mu.Lock()
		faults.failReadFrom = -1
		faults.mu.Unlock()
		dev.Close()
	})
	return dev
}

type faultyDriver struct{}

func (faultyDriver) Open() (backend.Backend, error) {
	in, err := backend.Open(testDevice())
	if err != nil {
		return nil, err
	}
	return &faulty{Backend: in}, nil
}

func (faultyDriver) Available() backend.Availability {
	return backend.Availability{OK: true, Why: "test wrapper of " + testDevice()}
}

// errInjected is the error a faulty read returns.
var errInjected = errors.New("injected read failure")

type faulty struct{ backend.Backend }

// Caps renames the backend, so that core reopens this driver after Close.
func (f *faulty) Caps() backend.Caps {
	c := f.Backend.Caps()
	c.Name = faultyName
	faults.mu.Lock()
	if faults.maxElems > 0 {
		c.MaxBufferElems = faults.maxElems
	}
	faults.mu.Unlock()
	return c
}

func (f *faulty) Read(b backend.Buffer, off int, dst []float32) error {
	faults.mu.Lock()
	fail := faults.failReadFrom >= 0 && off >= faults.failReadFrom
	faults.reads = append(faults.reads, len(dst))
	faults.mu.Unlock()
	if fail {
		return fmt.Errorf("faulty.Read(off %d, %d values): %w", off, len(dst), errInjected)
	}
	return f.Backend.Read(b, off, dst)
}

func (f *faulty) Memory() (free, total uint64, err error) {
	faults.mu.Lock()
	fake := faults.free
	faults.mu.Unlock()
	if fake > 0 {
		return fake, 2 * fake, nil
	}
	return f.Backend.Memory()
}
