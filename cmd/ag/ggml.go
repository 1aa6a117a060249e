package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ag-go/ag/backend/native/ggml"
)

// ggmlCmd prints what the go command needs to link the ggml backends into a
// program of any module (the Makefile does this for the repository itself):
//
//	eval "$(go run github.com/ag-go/ag/cmd/ag ggml -build)"
//	go run .    # core.Open("ggml-vulkan") now opens
func ggmlCmd(args []string) error {
	fs := flag.NewFlagSet("ggml", flag.ExitOnError)
	build := fs.Bool("build", false, "build ggml first when it is not built (cold: about 5 min on 2 cores; needs cmake g++ patch libvulkan-dev glslc glslang-tools spirv-headers)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ag ggml [-build]\n\nprints, as shell exports, the cgo flags and build tag that link ag's ggml backends\n(ggml-cpu, ggml-vulkan) from the cached build: eval \"$(go run github.com/ag-go/ag/cmd/ag ggml)\"")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	b, err := ggml.Find()
	if err != nil {
		return err
	}
	if !b.Built {
		if !*build {
			return fmt.Errorf("ggml is not built (want it in %s): run `ag ggml -build` (about 5 min, once) or `make vulkan` in ag's repository", b.Prefix)
		}
		// The build's progress goes to stderr, so that stdout stays the
		// exports for eval.
		if b, err = ggml.Make(os.Stderr); err != nil {
			return err
		}
	}
	return printGGMLEnv(os.Stdout, b)
}

// printGGMLEnv writes b's environment as shell exports, with a line on how
// to use them.
func printGGMLEnv(w io.Writer, b ggml.Build) error {
	fmt.Fprintf(w, "# ggml built in %s: these exports link ag's ggml-cpu and ggml-vulkan backends\n", b.Prefix)
	fmt.Fprintln(w, `# (import _ "github.com/ag-go/ag/backend/all"); on a software Vulkan (lavapipe) also GGML_VK_VISIBLE_DEVICES=0.`)
	fmt.Fprintln(w, "# GOFLAGS replaces yours: with other flags of your own, pass -tags ggml on the go command line instead.")
	for _, kv := range b.Env() {
		name, val, _ := strings.Cut(kv, "=")
		fmt.Fprintf(w, "export %s='%s'\n", name, strings.ReplaceAll(val, "'", `'\''`))
	}
	return nil
}
