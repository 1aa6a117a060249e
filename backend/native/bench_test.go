//go:build ggml

package native

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// BenchmarkMatMul times one [n,n] x [n,n] program run per iteration (upload
// excluded, synchronous result) and reports GFLOP/s. 2048 and 4096 run only
// on a GPU-type Vulkan device.
func BenchmarkMatMul(b *testing.B) {
	for _, name := range []string{CPUName, VulkanName} {
		if a := driverAvailability(name); !a.OK {
			b.Logf("%s unavailable: %s", name, a.Why)
			continue
		}
		sizes := []int{256, 512, 1024}
		if name == VulkanName && !softwareVulkan {
			sizes = append(sizes, 2048, 4096)
		}
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				be := open(b, name)
				g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{arg(0, n, n), arg(1, n, n),
					{Op: backend.OpMatMul, In: []int{0, 1}, Shape: []int{n, n}}},
					Outputs: []backend.Output{{Node: 2, Arg: 2}}}
				r := rand.New(rand.NewPCG(7, 8))
				args := make([]backend.Buffer, 3)
				for i := range args {
					buf, err := be.Alloc(n * n)
					if err != nil {
						b.Fatal(err)
					}
					defer be.Free(buf)
					if err := be.Write(buf, 0, randVals(r, n*n)); err != nil {
						b.Fatal(err)
					}
					args[i] = buf
				}
				p, err := be.Compile(g)
				if err != nil {
					b.Fatal(err)
				}
				defer p.Release()
				if _, err := p.Run(args); err != nil { // warm-up: pipelines, thread pool
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := p.Run(args); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
