//go:build !js

package app

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
)

// echo is a Trainer built from every kind of input; its checkpoint is its
// step count.
type echo struct {
	in Input
	n  int
}

func (e *echo) Step() (float32, error) { e.n++; return float32(e.n), nil }
func (e *echo) Sample() (string, error) {
	return fmt.Sprintf("size=%s prompt=%s text=%s(%s) n=%d", e.in.Choice("size"), e.in.String("prompt"), e.in.File("text").Data, e.in.File("text").Name, e.n), nil
}
func (e *echo) Built() string          { return "built: " + e.in.Choice("size") }
func (e *echo) Save(w io.Writer) error { _, err := fmt.Fprint(w, e.n); return err }
func (e *echo) Load(r io.Reader) error { _, err := fmt.Fscan(r, &e.n); return err }

var echoSpec = Spec{
	Name: "echo", Steps: 3, Checkpoint: true,
	Params:  []Param{ChoiceParam("size", "tiny", "how big", "tiny", "mini")},
	Strings: []StringParam{{Name: "prompt", Default: "The", Doc: "start"}},
	Files:   []FileParam{{Name: "text", Doc: "training text"}},
	BuildInput: func(dev *core.Device, in Input) (Trainer, error) {
		return &echo{in: in}, nil
	},
}

// TestRunArgsInputs: a choice by its word, a string, a file's contents
// and name reach BuildInput; -save writes the checkpoint after training
// and -load reads it before; a word not among the choices is refused
// naming them.
func TestRunArgsInputs(t *testing.T) {
	dir := t.TempDir()
	text, ckpt := filepath.Join(dir, "t.txt"), filepath.Join(dir, "c.ckpt")
	if err := os.WriteFile(text, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := RunArgs(echoSpec, []string{"-device", "cpu", "-size", "mini", "-prompt", "Once", "-text", text, "-save", ckpt}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{": size=mini\nbuilt: mini\n", "size=mini prompt=Once text=hello(" + text + ") n=3", "saved " + ckpt} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := RunArgs(echoSpec, []string{"-device", "cpu", "-load", ckpt, "-steps", "2"}, &out); err != nil {
		t.Fatal(err)
	}
	if want := "size=tiny prompt=The text=() n=5"; !strings.Contains(out.String(), want) {
		t.Errorf("after -load of 3 steps and 2 more: output lacks %q:\n%s", want, out.String())
	}
	err := RunArgs(echoSpec, []string{"-device", "cpu", "-size", "huge"}, &out)
	if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), `-size "huge": want one of tiny, mini`) {
		t.Errorf("-size huge: %v, want a usage error naming the choices", err)
	}
	bad := echoSpec
	bad.Build = func(*core.Device, Config) (Trainer, error) { return nil, nil }
	if err := RunArgs(bad, nil, &out); err == nil || !strings.Contains(err.Error(), "one of Build and BuildInput") {
		t.Errorf("Spec with Build and BuildInput: %v", err)
	}
}
