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
)

//go:embed static
var static embed.FS

// tfjsMarker is a file every complete install of the pinned packages has.
var tfjsMarker = []string{
	"node_modules/@tensorflow/tfjs/dist/tf.min.js",
	"node_modules/@tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.min.js",
	"node_modules/@tensorflow/tfjs-backend-wasm/dist/tf-backend-wasm.min.js",
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

// ensureTfjs installs the pinned npm packages into dir/node_modules when
// they are missing (npm ci from package-lock.json).
func ensureTfjs(dir string, install bool, log func(string, ...any)) error {
	missing := ""
	for _, m := range tfjsMarker {
		if _, err := os.Stat(filepath.Join(dir, m)); err != nil {
			missing = m
			break
		}
	}
	if missing == "" {
		return nil
	}
	how := fmt.Sprintf("(cd %s && npm ci)", dir)
	if !install {
		return fmt.Errorf("ensureTfjs: %s is missing: install the tfjs peer with %s", missing, how)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("ensureTfjs: %s is missing and there is no npm (install Node.js, then %s): %w", missing, how, err)
	}
	log("installing the tfjs packages: npm ci in %s", dir)
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ensureTfjs: npm ci in %s: %w\n%s", dir, err, out)
	}
	return nil
}

// buildWasm builds ag.wasm and wasm_exec.js into dir with web/build.sh.
func buildWasm(root, dir string) error {
	cmd := exec.Command("bash", filepath.Join(root, "web", "build.sh"), dir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("buildWasm: bash web/build.sh %s: %w\n%s", dir, err, out)
	}
	for _, f := range []string{"ag.wasm", "wasm_exec.js"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("buildWasm: web/build.sh wrote no %s: %w", f, err)
		}
	}
	return nil
}

// handler serves the pages at /, the wasm build at /build/ and the npm
// packages at /node_modules/. Every answer is cross-origin isolated
// (COOP/COEP), which tfjs's wasm backend needs for its threads; ag's page
// gets the same headers so both run under the same conditions.
func handler(buildDir, nodeModules string) http.Handler {
	pages, err := fs.Sub(static, "static")
	if err != nil {
		panic(fmt.Sprintf("handler: embedded static/: %v", err)) // cannot happen: the folder is embedded
	}
	mux := http.NewServeMux()
	mux.Handle("/build/", http.StripPrefix("/build/", http.FileServer(http.Dir(buildDir))))
	mux.Handle("/node_modules/", http.StripPrefix("/node_modules/", http.FileServer(http.Dir(nodeModules))))
	mux.Handle("/", http.FileServerFS(pages))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Embedder-Policy", "require-corp")
		h.Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
	})
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
