package web

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildApp compiles the main package pkg (an import path or a directory
// such as ./examples/spiral, as `go build` reads it from the current
// directory) for the browser - GOOS=js GOARCH=wasm - into dir/ag.wasm, and
// copies the wasm_exec.js of the same Go next to it: what web/build.sh does
// for ./examples/mlp (the page's default model), for any package whose main
// calls app.Run. The error holds the compiler's output.
func BuildApp(pkg, dir string) error {
	goBin, err := goCommand()
	if err != nil {
		return fmt.Errorf("web.BuildApp %s: %w", pkg, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("web.BuildApp %s: %w", pkg, err)
	}
	out, err := filepath.Abs(filepath.Join(dir, "ag.wasm"))
	if err != nil {
		return fmt.Errorf("web.BuildApp %s: %w", pkg, err)
	}
	cmd := exec.Command(goBin, "build", "-trimpath", "-o", out, pkg)
	// A package given as a folder is built from inside it, so that its own
	// module's go.mod applies: a package of the user's module named from
	// ag's repository (`go run ./cmd/ag serve -app ~/mine/app`) is outside
	// the repository's module, and go build refuses it there.
	if isDir(pkg) {
		cmd.Dir, cmd.Args[len(cmd.Args)-1] = pkg, "."
	}
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("GOOS=js GOARCH=wasm go build %s: %w\n%s", pkg, err, strings.TrimSpace(string(out)))
	}
	root, err := exec.Command(goBin, "env", "GOROOT").Output()
	if err != nil {
		return fmt.Errorf("web.BuildApp %s: go env GOROOT: %w", pkg, err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(root)), "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		return fmt.Errorf("web.BuildApp %s: reading wasm_exec.js: %w", pkg, err)
	}
	return os.WriteFile(filepath.Join(dir, "wasm_exec.js"), src, 0o644)
}

// goCommand finds the go command: $GOROOT/bin/go, else go on PATH.
func goCommand() (string, error) {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command on PATH to build the wasm module: %w", err)
	}
	return p, nil
}

// isDir reports whether pkg names a folder (./x, ../x, /x or an existing
// folder) rather than an import path.
func isDir(pkg string) bool {
	if filepath.IsAbs(pkg) || pkg == "." || pkg == ".." || strings.HasPrefix(pkg, "./") || strings.HasPrefix(pkg, "../") {
		return true
	}
	st, err := os.Stat(pkg)
	return err == nil && st.IsDir()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
