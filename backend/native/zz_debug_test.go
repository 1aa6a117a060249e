//go:build ggml

package native

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

func mmCheck(t *testing.T, be backend.Backend, m, k, n int) float64 {
	r := rand.New(rand.NewPCG(uint64(m), uint64(n)))
	g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{arg(0, m, k), arg(1, k, n),
		{Op: backend.OpMatMul, In: []int{0, 1}, Shape: []int{m, n}}}, Outputs: []backend.Output{{Node: 2, Arg: 2}}}
	a, b := randVals(r, m*k), randVals(r, k*n)
	args := []backend.Buffer{upload(t, be, a), upload(t, be, b), upload(t, be, make([]float32, m*n))}
	p, err := be.Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(args); err != nil {
		t.Fatal(err)
	}
	got := download(t, be, args[2])
	worst := 0.0
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var w float64
			for q := 0; q < k; q++ {
				w += float64(a[i*k+q]) * float64(b[q*n+j])
			}
			worst = math.Max(worst, math.Abs(float64(got[i*n+j])-w))
		}
	}
	return worst
}

func TestZZDebug(t *testing.T) {
	be := open(t, VulkanName)
	for _, s := range strings.Split(os.Getenv("SEQ"), ";") {
		f := strings.Split(s, "x")
		m, _ := strconv.Atoi(f[0])
		k, _ := strconv.Atoi(f[1])
		n, _ := strconv.Atoi(f[2])
		fmt.Println(s, mmCheck(t, be, m, k, n))
	}
}
