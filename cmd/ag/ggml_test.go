package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend/native/ggml"
)

// `ag ggml` prints exports a shell can eval: the cgo flags of the prefix
// (quoted, so a path with a quote survives) and the ggml tag.
func TestPrintGGMLEnv(t *testing.T) {
	var b strings.Builder
	printGGMLEnv(&b, ggml.Build{Prefix: "/cache/it's ggml", Built: true})
	out, err := exec.Command("bash", "-c", b.String()+`
echo "$CGO_CFLAGS|$CGO_LDFLAGS|$GOFLAGS"`).Output()
	if err != nil {
		t.Fatalf("bash on\n%s: %v", b.String(), err)
	}
	if want := "-I/cache/it's ggml/include|-L/cache/it's ggml/lib|-tags=ggml\n"; string(out) != want {
		t.Errorf("eval of ag ggml's exports gave %q, want %q; printed:\n%s", out, want, b.String())
	}
}
