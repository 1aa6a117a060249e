//go:build !js

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ag-go/ag/app"
)

// The MLP runs natively as the other examples do (app.RunArgs), and the
// refusal reaches the command line.
func TestRunArgs(t *testing.T) {
	var out bytes.Buffer
	if err := app.RunArgs(Spec, []string{"-device", "cpu", "-steps", "20", "-width", "16", "-profile-json", t.TempDir() + "/p.json"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mlp on cpu", "width=16 depth=2 batch=16 lr=0.01", "544 parameters", "step     20", "profile (captured mode, 5 steps)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	err := app.RunArgs(Spec, []string{"-device", "cpu", "-width", "4096", "-depth", "64"}, &bytes.Buffer{})
	if err == nil || !strings.HasPrefix(err.Error(), "build mlp on cpu") || !strings.Contains(err.Error(), ": an MLP of width 4096, depth 64, batch 16 needs about") {
		t.Errorf("-width 4096 -depth 64: %v, want the refusal", err)
	}
}
