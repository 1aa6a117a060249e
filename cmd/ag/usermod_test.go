package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/web"
)

// TestUserModule is issue 38's "a fresh module outside the repository":
// a temporary module that requires ag through a replace directive runs the
// README's "A model in Go" as pasted (cpu, and webgpu where it runs), is
// told the import that registers webgpu when it lacks it, and serves a
// package of its own (the README's app.Run snippet) with `ag serve -app`,
// both from the user's module and from the repository.
//
// SLOW (about 1-2 min cold, seconds warm: go builds in the temporary
// module, two of them for GOOS=js); skipped with -short. It needs ag's
// dependencies in the module cache or GOPROXY (the module's go.sum is
// ag's, and GOFLAGS=-mod=mod lets go add what the temporary module lacks).
func TestUserModule(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: builds a temporary module (see the doc comment)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	example := readmeBlock(t, string(readme), "## A model in Go", "```go\n")
	snippet := readmeBlock(t, string(readme), "## Your model in the browser", "   ```go\n")
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/usermod\n\ngo 1.26\n\nrequire github.com/ag-go/ag v0.0.0\n\nreplace github.com/ag-go/ag => "+root+"\n")
	write("go.sum", string(sum))
	write("readme/main.go", example)
	onWebGPU := strings.Replace(example, `core.Open("auto")`, `core.Open("webgpu")`, 1)
	write("webgpu/main.go", onWebGPU)
	var noImport []string
	for _, l := range strings.Split(onWebGPU, "\n") {
		if !strings.Contains(l, "backend/all") {
			noImport = append(noImport, l)
		}
	}
	write("noimport/main.go", strings.Join(noImport, "\n"))
	write("mine/main.go", mineApp+snippet)

	gocmd := func(dir string, args ...string) *exec.Cmd {
		c := exec.Command("go", args...)
		c.Dir = dir
		c.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		return c
	}
	// The loss printed at steps 0, 50, 100, 150 falls.
	checkLoss := func(t *testing.T, out string) {
		t.Helper()
		lines := regexp.MustCompile(`(?m)^(0|50|100|150) \S+$`).FindAllString(out, -1)
		if len(lines) != 4 {
			t.Fatalf("the README's example printed %q, want the loss at steps 0, 50, 100 and 150", out)
		}
		first, err1 := strconv.ParseFloat(strings.Fields(lines[0])[1], 64)
		last, err2 := strconv.ParseFloat(strings.Fields(lines[3])[1], 64)
		// The targets' variance is 2, so a loss from 1 up is an untrained
		// model's; below 0.01 it has fit the line.
		if err1 != nil || err2 != nil || !(first > 1) || !(last < 0.01) {
			t.Errorf("the README's example's loss went %v -> %v, want from above 1 to below 0.01", first, last)
		}
	}
	t.Run("readme-cpu", func(t *testing.T) {
		out, err := gocmd(mod, "run", "./readme").CombinedOutput()
		if err != nil {
			t.Fatalf("go run ./readme in a fresh module: %v\n%s", err, out)
		}
		checkLoss(t, string(out))
	})
	t.Run("readme-webgpu", func(t *testing.T) {
		for _, d := range backend.Drivers() {
			if d.Name == "webgpu" && !d.OK {
				testenv.SkipDevice(t, "webgpu", d.Why)
			}
		}
		out, err := gocmd(mod, "run", "./webgpu").CombinedOutput()
		if err != nil {
			t.Fatalf("go run ./webgpu (the README's example on webgpu) in a fresh module: %v\n%s", err, out)
		}
		checkLoss(t, string(out))
	})
	t.Run("no-import", func(t *testing.T) {
		out, err := gocmd(mod, "run", "./noimport").CombinedOutput()
		if err == nil || !strings.Contains(string(out), `import _ "github.com/ag-go/ag/backend/all"`) {
			t.Errorf("core.Open(webgpu) without backend/all: %v\n%s\nwant a failure naming the import", err, out)
		}
	})
	t.Run("serve-app-from-repository", func(t *testing.T) {
		// This test runs in cmd/ag, inside ag's module.
		if err := web.BuildApp(filepath.Join(mod, "mine"), t.TempDir()); err != nil {
			t.Fatalf("ag serve -app %s/mine run from the repository: %v", mod, err)
		}
	})
	t.Run("serve-app-from-user-module", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "ag")
		if out, err := gocmd(mod, "build", "-o", bin, "github.com/ag-go/ag/cmd/ag").CombinedOutput(); err != nil {
			t.Fatalf("go build github.com/ag-go/ag/cmd/ag in the user's module: %v\n%s", err, out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, bin, "serve", "-addr", "127.0.0.1:0", "-app", "./mine")
		c.Dir, c.Env = mod, append(os.Environ(), "GOFLAGS=-mod=mod")
		var stderr bytes.Buffer
		stdout, _ := c.StdoutPipe()
		c.Stderr = &stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			c.Process.Signal(os.Interrupt)
			c.Wait()
		}()
		url := ""
		for sc := bufio.NewScanner(stdout); sc.Scan(); {
			if m := regexp.MustCompile(`ag profile page: (http://\S+/)`).FindStringSubmatch(sc.Text()); m != nil {
				url = m[1]
				go io.Copy(io.Discard, stdout)
				break
			}
		}
		if url == "" {
			c.Wait()
			t.Fatalf("ag serve -app ./mine from the user's module served nothing:\n%s", stderr.String())
		}
		resp, err := http.Get(url + "ag.wasm")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		magic := make([]byte, 4)
		io.ReadFull(resp.Body, magic)
		if resp.StatusCode != 200 || string(magic) != "\x00asm" {
			t.Errorf("GET %sag.wasm: %s, starts %q; want the built module", url, resp.Status, magic)
		}
	})
}

// mineApp is what the README's app.Run snippet leaves to the user: the
// package clause, imports and newMine (the README's first example's model).
const mineApp = `package main

import (
	"math/rand/v2"

	"github.com/ag-go/ag/app"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

type mine struct {
	model nn.Sequential
	opt   *nn.Adam
	x, y  *core.Tensor
}

func newMine(dev *core.Device, lr float32) (*mine, error) {
	m := &mine{model: nn.MLP(dev, []int{1, 16, 1}, core.Tanh, rand.New(rand.NewPCG(1, 1)))}
	m.opt = nn.NewAdam(m.model.Params(), lr)
	m.x = dev.Tensor([]float32{-1, -0.5, 0, 0.5, 1}, 5, 1)
	m.y = dev.Tensor([]float32{-3, -2, -1, 0, 1}, 5, 1)
	return m, nil
}

func (m *mine) Step() (float32, error) {
	m.opt.ZeroGrad()
	loss := nn.MSELoss(m.model.Forward(m.x), m.y)
	if err := loss.Backward(); err != nil {
		return 0, err
	}
	if err := m.opt.Step(); err != nil {
		return 0, err
	}
	return loss.Item()
}

`

// readmeBlock returns the first code block opened by fence after the
// heading, its lines unindented by the fence's indent.
func readmeBlock(t *testing.T, readme, heading, fence string) string {
	t.Helper()
	_, after, ok := strings.Cut(readme, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no %q", heading)
	}
	_, after, ok = strings.Cut(after, "\n"+fence)
	if !ok {
		t.Fatalf("README's %q has no code block", heading)
	}
	indent := strings.TrimSuffix(fence, strings.TrimLeft(fence, " "))
	block, _, ok := strings.Cut(after, "\n"+indent+"```\n")
	if !ok {
		t.Fatalf("README's %q: code block not closed", heading)
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		lines = append(lines, strings.TrimPrefix(l, indent))
	}
	return strings.Join(lines, "\n") + "\n"
}
