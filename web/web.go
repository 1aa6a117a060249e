// Package web is ag's profile page and its HTTP handler, served by
// `ag serve`: a page that trains a model in the browser (on WebGPU or the
// CPU backend compiled to wasm), draws the loss and the profile breakdown
// per execution mode, and opens profile JSON files written by native runs
// (`ag demo -profile-json FILE`). The model is a main package calling
// app.Run, compiled for the browser: by default examples/mlp, the MLP
// workload, whose form and description are the page's own; another one
// (BuildApp, `ag serve -app PKG`) turns the page to its model: its
// parameters, metrics, samples and profile modes.
//
// The page (static/) is embedded. The wasm binary is a build product:
// `make wasm` (web/build.sh) writes ag.wasm and wasm_exec.js into dist/,
// which is embedded too, or Options.WasmDir names a folder read at request
// time. When ag.wasm is missing the handler answers 503 with how to build
// it, so the package builds and vets without it.
package web

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/ag-go/ag/profile"
)

//go:embed static
var static embed.FS

// dist holds the committed README.md and, after `make wasm`, the build.
//
//go:embed dist
var dist embed.FS

// Options configure Handler.
type Options struct {
	// WasmDir, when set, is the folder ag.wasm and wasm_exec.js are read
	// from on each request (tests build into a temporary folder); else
	// they come from the embedded dist/.
	WasmDir string
	// Hosts are the values a request's Host header may take: "name:port",
	// or "name" for any port (IPv6 literals in brackets when a port is
	// given). Names compare without case and without a trailing dot. Empty
	// means LoopbackHosts. Any other Host gets 421: a page of another site
	// whose name was rebound to this machine's address (DNS rebinding)
	// must not read this one.
	Hosts []string
}

// LoopbackHosts are the Host names Handler admits by default, on any port.
var LoopbackHosts = []string{"localhost", "127.0.0.1", "[::1]"}

// buildFiles are the files of the wasm build; everything else is static.
var buildFiles = map[string]string{
	"ag.wasm":      "application/wasm",
	"wasm_exec.js": "text/javascript; charset=utf-8",
}

// NotBuilt is the 503 body for a missing wasm build.
const NotBuilt = "ag.wasm is not built: run `make wasm` (bash web/build.sh), then restart `ag serve`"

// Handler serves the page at / and its files.
func Handler(o Options) http.Handler {
	page, err := fs.Sub(static, "static")
	if err != nil {
		panic(fmt.Sprintf("web.Handler: embedded static/: %v", err)) // cannot happen: the folder is embedded
	}
	var build fs.FS
	if o.WasmDir != "" {
		build = os.DirFS(o.WasmDir)
	} else if build, err = fs.Sub(dist, "dist"); err != nil {
		panic(fmt.Sprintf("web.Handler: embedded dist/: %v", err))
	}
	files := http.FileServerFS(page)
	started := time.Now()
	hosts := o.Hosts
	if len(hosts) == 0 {
		hosts = LoopbackHosts
	}
	allow := make([]hostPort, len(hosts))
	for i, h := range hosts {
		allow[i] = splitHost(h)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(allow, r.Host) {
			// text/plain with nosniff (http.Error), so echoing the Host is inert.
			http.Error(w, fmt.Sprintf("ag serve: Host %q is not a name of this server (allowed: %s); `ag serve -allow-host NAME` admits another name", r.Host, strings.Join(hosts, ", ")), http.StatusMisdirectedRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		// The page is small and rebuilt often: always revalidate.
		w.Header().Set("Cache-Control", "no-cache")
		name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		if name == "stages.json" {
			// The stage names and meanings come from package profile, the
			// one place they are written.
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(profile.StageInfos())
			return
		}
		ctype, isBuild := buildFiles[name]
		if !isBuild {
			files.ServeHTTP(w, r)
			return
		}
		f, err := build.Open(name)
		if errors.Is(err, fs.ErrNotExist) {
			http.Error(w, NotBuilt, http.StatusServiceUnavailable)
			return
		}
		if err != nil {
			http.Error(w, fmt.Sprintf("web: opening %s: %v", filepath.Join(o.WasmDir, name), err), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		mod := started
		st, err := f.Stat()
		if err == nil && st.IsDir() { // read as an empty file, served as 200
			http.Error(w, fmt.Sprintf("web: %s is a folder, want the file the build writes", filepath.Join(o.WasmDir, name)), http.StatusInternalServerError)
			return
		}
		if err == nil && !st.ModTime().IsZero() {
			mod = st.ModTime() // embedded files have none
		}
		rs, ok := f.(interface {
			Read([]byte) (int, error)
			Seek(int64, int) (int64, error)
		})
		if !ok {
			http.Error(w, "web: "+name+" is not seekable", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ctype)
		http.ServeContent(w, r, name, mod, rs)
	})
}

// hostPort is a Host value split for comparison; port "" matches any port
// in an allowed entry and means the scheme's default in a request.
type hostPort struct{ host, port string }

// splitHost splits "name", "name:port", "[v6]" or "[v6]:port" and
// normalizes the name (lower case, no trailing dot, no brackets).
func splitHost(s string) hostPort {
	h, p, err := net.SplitHostPort(s)
	if err != nil { // no port (or a bare IPv6 literal)
		h, p = s, ""
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return hostPort{strings.TrimSuffix(strings.ToLower(h), "."), p}
}

// hostAllowed reports whether a request's Host names this server. A Host
// without a port means port 80 (the page is served over http), so it
// matches only entries without a port or with port 80.
func hostAllowed(allow []hostPort, host string) bool {
	if host == "" {
		return false
	}
	req := splitHost(host)
	if req.port == "" {
		req.port = "80"
	}
	for _, a := range allow {
		if a.host == req.host && (a.port == "" || a.port == req.port) {
			return true
		}
	}
	return false
}

// Built reports whether the embedded dist/ holds a wasm build.
func Built() bool {
	_, err := fs.Stat(dist, "dist/ag.wasm")
	return err == nil
}
