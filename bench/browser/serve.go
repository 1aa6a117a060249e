package main

import (
	"bufio"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

//go:embed static
var static embed.FS

// tfjsFiles are the files of the pinned npm packages the pages load
// (static/tfjs.html, tfjs.js: the scripts, and the wasm backend's binaries,
// which it picks by SIMD and thread support), relative to node_modules.
// pack.sh copies the same list.
var tfjsFiles = []string{
	"@tensorflow/tfjs/dist/tf.min.js",
	"@tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.min.js",
	"@tensorflow/tfjs-backend-wasm/dist/tf-backend-wasm.min.js",
	"@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm",
	"@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-simd.wasm",
	"@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-threaded-simd.wasm",
}

// repoRoot finds the module root of github.com/ag-go/ag from the working
// directory upwards (`go run ./bench/browser` runs in the root).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repoRoot: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if f, err := os.Open(filepath.Join(d, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			mod := ""
			if sc.Scan() {
				mod = strings.TrimSpace(sc.Text())
			}
			f.Close()
			if mod == "module github.com/ag-go/ag" {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("repoRoot: no go.mod of github.com/ag-go/ag above %s: run from the ag checkout", dir)
		}
	}
}

// ensureTfjs checks that nodeModules has the tfjs files the pages load.
// When they are missing and installDir is not "" (nodeModules is
// installDir/node_modules, the default), it installs the pinned packages
// there (npm ci from package-lock.json) if install is set.
func ensureTfjs(nodeModules, installDir string, install bool, log func(string, ...any)) error {
	missing := func() string {
		for _, f := range tfjsFiles {
			if _, err := os.Stat(filepath.Join(nodeModules, f)); err != nil {
				return f
			}
		}
		return ""
	}
	m := missing()
	if m == "" {
		return nil
	}
	if installDir == "" {
		return fmt.Errorf("ensureTfjs: %s is missing in -node-modules %s (bench/browser/pack.sh copies them)", m, nodeModules)
	}
	how := fmt.Sprintf("(cd %s && npm ci)", installDir)
	if !install {
		return fmt.Errorf("ensureTfjs: %s is missing in %s: install the tfjs peer with %s, or pass -node-modules", m, nodeModules, how)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("ensureTfjs: %s is missing and there is no npm (install Node.js, then %s): %w", m, how, err)
	}
	log("installing the tfjs packages: npm ci in %s", installDir)
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = installDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ensureTfjs: npm ci in %s: %w\n%s", installDir, err, out)
	}
	if m := missing(); m != "" {
		return fmt.Errorf("ensureTfjs: npm ci in %s installed no %s", installDir, m)
	}
	return nil
}

// wasmFiles are what ag.html loads from /build/ (web/build.sh writes both).
var wasmFiles = []string{"ag.wasm", "wasm_exec.js"}

// buildWasm builds ag.wasm and wasm_exec.js into dir with web/build.sh.
func buildWasm(root, dir string) error {
	cmd := exec.Command("bash", filepath.Join(root, "web", "build.sh"), dir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("buildWasm: bash web/build.sh %s: %w\n%s", dir, err, out)
	}
	return checkWasmDir(dir, "web/build.sh wrote")
}

// checkWasmDir checks that dir has the files ag.html loads.
func checkWasmDir(dir, what string) error {
	for _, f := range wasmFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("%s no %s in %s (web/build.sh DIR, or bench/browser/pack.sh, writes it): %w", what, f, dir, err)
		}
	}
	return nil
}

// agRevFile is the file of a packed web dist (pack.sh) that names the ag
// commit ag.wasm was built from.
const agRevFile = "ag-rev.txt"

// handler serves the pages at /, the wasm build at /build/, the npm
// packages at /node_modules/ and, when text is not "", that file at /text
// (the -gpt2 mode's training text). Every answer is cross-origin isolated
// (COOP/COEP), which tfjs's wasm backend needs for its threads; ag's page
// gets the same headers so both run under the same conditions.
func handler(buildDir, nodeModules, text string) http.Handler {
	pages, err := fs.Sub(static, "static")
	if err != nil {
		panic(fmt.Sprintf("handler: embedded static/: %v", err)) // cannot happen: the folder is embedded
	}
	mux := http.NewServeMux()
	mux.Handle("/build/", http.StripPrefix("/build/", http.FileServer(http.Dir(buildDir))))
	mux.Handle("/node_modules/", http.StripPrefix("/node_modules/", http.FileServer(http.Dir(nodeModules))))
	mux.Handle("/", http.FileServerFS(pages))
	if text != "" {
		mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, text) })
	}
	var mu sync.Mutex
	reported := map[string]bool{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Embedder-Policy", "require-corp")
		h.Set("Cache-Control", "no-store")
		sw := &statusWriter{ResponseWriter: w}
		mux.ServeHTTP(sw, r)
		// A file a page asked for and did not get (a packed folder that
		// lacks one): say so once, source maps aside (the pages work
		// without them).
		if sw.status == http.StatusNotFound && !strings.HasSuffix(r.URL.Path, ".map") {
			mu.Lock()
			first := !reported[r.URL.Path]
			reported[r.URL.Path] = true
			mu.Unlock()
			if first {
				fmt.Fprintf(os.Stderr, "bench/browser: server: 404 for %s\n", r.URL.Path)
			}
		}
	})
}

// statusWriter remembers the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// serve listens on 127.0.0.1 at a random port and returns the base URL and
// a function that stops the server.
func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("serve: listening on 127.0.0.1: %w", err)
	}
	srv := &http.Server{Handler: h}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "bench/browser: server: %v\n", err)
		}
	}()
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}
