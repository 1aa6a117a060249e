// Package ggml carries the recipe that builds ggml for backend/native -
// build.sh, its CMake file and patches - inside the Go module, so that the
// ag command can build ggml and print the flags that link it from any
// module, wherever ag's source lies (a module cache is read-only and has no
// Makefile): `go run github.com/ag-go/ag/cmd/ag ggml`.
package ggml

import (
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed build.sh glslc.sh CMakeLists.txt patches
var recipe embed.FS

// Build describes ggml's build in the cache (AG_CACHE, default ~/.cache/ag).
type Build struct {
	Prefix string // the install prefix: include/ and lib/
	Built  bool   // the build finished (its stamp file exists)
}

// Env is what the go command needs to link backend/native against the
// build, as NAME=value: the cgo flags of the prefix and the ggml tag.
func (b Build) Env() []string {
	return []string{
		"CGO_CFLAGS=-I" + filepath.Join(b.Prefix, "include"),
		"CGO_LDFLAGS=-L" + filepath.Join(b.Prefix, "lib"),
		"GOFLAGS=-tags=ggml",
	}
}

// Find says where build.sh installs ggml and whether it has: the same
// prefix as `make vulkan` (the folder's name hashes the recipe's files,
// which are these).
func Find() (Build, error) {
	out, err := run(io.Discard, "--print-prefix")
	if err != nil {
		return Build{}, fmt.Errorf("ggml.Find: %w", err)
	}
	b := Build{Prefix: strings.TrimSpace(out)}
	_, err = os.Stat(filepath.Join(b.Prefix, ".built"))
	b.Built = err == nil
	return b, nil
}

// Make builds ggml when it is not built yet (cold: about 5 minutes on two
// cores; build.sh lists the Debian packages it needs when one is missing),
// writing its progress to progress.
func Make(progress io.Writer) (Build, error) {
	out, err := run(progress, "")
	if err != nil {
		return Build{}, fmt.Errorf("ggml.Make: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return Build{Prefix: lines[len(lines)-1], Built: true}, nil
}

// run unpacks the recipe into a temporary folder and runs its build.sh
// with arg (none when empty), its stderr to stderr; it returns stdout.
func run(stderr io.Writer, arg string) (string, error) {
	dir, err := os.MkdirTemp("", "ag-ggml-recipe-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := os.CopyFS(dir, recipe); err != nil {
		return "", fmt.Errorf("unpacking the recipe: %w", err)
	}
	args := []string{filepath.Join(dir, "build.sh")}
	if arg != "" {
		args = append(args, arg)
	}
	cmd := exec.Command("bash", args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("bash build.sh %s: %w", arg, err)
	}
	return out.String(), nil
}

// files lists the recipe's files (for its test).
func files() ([]string, error) {
	var names []string
	err := fs.WalkDir(recipe, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	return names, err
}
