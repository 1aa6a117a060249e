package webgpu

import (
	"fmt"
	"os"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/workload"
)

type dumpDrv struct{}
type dumpBe struct{ backend.Backend }

func (dumpDrv) Open() (backend.Backend, error) { b, err := driver{}.Open(); return dumpBe{b}, err }
func (dumpDrv) Available() backend.Availability { return driver{}.Available() }
func (d dumpBe) Compile(g *backend.Graph) (backend.Program, error) {
	if len(g.Nodes) > 20 {
		fmt.Fprint(os.Stderr, "GRAPH\n", g.String())
	}
	return d.Backend.Compile(g)
}

func TestZZDump(t *testing.T) {
	if os.Getenv("DUMP") == "" { t.Skip() }
	backend.Register("dump", 0, dumpDrv{})
	dev, err := core.Open("dump")
	if err != nil { t.Fatal(err) }
	m, err := workload.New(dev, workload.Config{Width: 64, Depth: 4, Batch: 16, Seed: 1})
	if err != nil { t.Fatal(err) }
	if _, _, err := m.Timed(workload.Mode(os.Getenv("DUMP")), 1); err != nil { t.Fatal(err) }
}
