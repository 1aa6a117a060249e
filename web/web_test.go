package web

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// get requests path with Host localhost:8080 (httptest's default Host,
// example.com, is refused).
func get(t *testing.T, h http.Handler, method, path string) (int, string, string) {
	t.Helper()
	return getHost(t, h, method, path, "localhost:8080")
}

func getHost(t *testing.T, h http.Handler, method, path, host string) (int, string, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, nil)
	req.Host = host
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, rec.Header().Get("Content-Type"), string(body)
}

func TestHandler(t *testing.T) {
	built := t.TempDir()
	if err := os.WriteFile(filepath.Join(built, "ag.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(built, "wasm_exec.js"), []byte("// go"), 0o644); err != nil {
		t.Fatal(err)
	}
	withBuild := Handler(Options{WasmDir: built})
	noBuild := Handler(Options{WasmDir: t.TempDir()})
	folders := t.TempDir() // ag.wasm a folder: it was served as an empty 200
	if err := os.Mkdir(filepath.Join(folders, "ag.wasm"), 0o755); err != nil {
		t.Fatal(err)
	}
	folderBuild := Handler(Options{WasmDir: folders})
	tests := []struct {
		name       string
		h          http.Handler
		method     string
		path       string
		code       int
		ctype      string
		bodyPrefix string
	}{
		{"index", withBuild, "GET", "/", 200, "text/html; charset=utf-8", "<!doctype html>"},
		{"script", withBuild, "GET", "/app.js", 200, "text/javascript; charset=utf-8", "// The ag profile page"},
		{"style", withBuild, "GET", "/style.css", 200, "text/css; charset=utf-8", "/* ag profile page"},
		{"wasm", withBuild, "GET", "/ag.wasm", 200, "application/wasm", "\x00asm"},
		{"exec", withBuild, "GET", "/wasm_exec.js", 200, "text/javascript; charset=utf-8", "// go"},
		{"head", withBuild, "HEAD", "/ag.wasm", 200, "application/wasm", ""},
		{"missing wasm", noBuild, "GET", "/ag.wasm", 503, "text/plain; charset=utf-8", NotBuilt},
		{"missing exec", noBuild, "GET", "/wasm_exec.js", 503, "text/plain; charset=utf-8", NotBuilt},
		{"page without build", noBuild, "GET", "/", 200, "text/html; charset=utf-8", "<!doctype html>"},
		{"wasm a folder", folderBuild, "GET", "/ag.wasm", 500, "text/plain; charset=utf-8", "web: " + filepath.Join(folders, "ag.wasm") + " is a folder"},
		{"not found", withBuild, "GET", "/nope.txt", 404, "text/plain; charset=utf-8", "404"},
		{"post", withBuild, "POST", "/", 405, "text/plain; charset=utf-8", "method not allowed"},
		{"stages", withBuild, "GET", "/stages.json", 200, "application/json", `[{"stage":"ctx","doc":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, ctype, body := get(t, tt.h, tt.method, tt.path)
			if code != tt.code || ctype != tt.ctype || !strings.HasPrefix(body, tt.bodyPrefix) {
				t.Errorf("%s %s: %d %q %.40q, want %d %q %.40q", tt.method, tt.path, code, ctype, body, tt.code, tt.ctype, tt.bodyPrefix)
			}
		})
	}
}

// The page takes the stage names from /stages.json: nothing else in it
// may spell them out.
func TestPageHasNoStageList(t *testing.T) {
	_, _, body := get(t, Handler(Options{}), "GET", "/app.js")
	for _, name := range []string{`"ctx"`, `"flush"`, `"download"`} {
		if strings.Contains(body, name) {
			t.Errorf("app.js spells out the stage %s: it must come from /stages.json", name)
		}
	}
	_, _, css := get(t, Handler(Options{}), "GET", "/style.css")
	if strings.Contains(css, "s-compute") {
		t.Error("style.css names a stage: colors go by position")
	}
}

// TestEmbeddedDist checks that the embedded build folder and Built agree,
// whether or not `make wasm` ran before this test.
func TestEmbeddedDist(t *testing.T) {
	code, _, body := get(t, Handler(Options{}), "GET", "/ag.wasm")
	switch {
	case Built() && (code != 200 || !strings.HasPrefix(body, "\x00asm")):
		t.Errorf("Built() but GET /ag.wasm gave %d %.20q", code, body)
	case !Built() && code != 503:
		t.Errorf("not Built() but GET /ag.wasm gave %d", code)
	}
}

// TestHandlerHosts: only the Host names given (by default the loopback
// names, any port) are served; anything else, such as a name rebound to
// this machine by DNS, gets 421 naming the Host and what is allowed.
func TestHandlerHosts(t *testing.T) {
	loop := Handler(Options{WasmDir: t.TempDir()})
	named := Handler(Options{WasmDir: t.TempDir(), Hosts: []string{"127.0.0.1:8080", "[::1]:8080", "ag.example", "Box.Lan.:9000"}})
	for _, tc := range []struct {
		h    http.Handler
		name string
		host string
		code int
	}{
		{loop, "default localhost", "localhost:8080", 200},
		{loop, "default 127.0.0.1 other port", "127.0.0.1:1234", 200},
		{loop, "default v6", "[::1]:8080", 200},
		{loop, "default upper case", "LocalHost:8080", 200},
		{loop, "default trailing dot", "localhost.:8080", 200},
		{loop, "default no port", "localhost", 200},
		{loop, "default rebound name", "evil.example", 421},
		{loop, "default rebound name with port", "evil.example:8080", 421},
		{loop, "default localhost suffix", "localhost.evil.example:8080", 421},
		{loop, "default empty", "", 421},
		{named, "listed", "127.0.0.1:8080", 200},
		{named, "listed v6", "[::1]:8080", 200},
		{named, "listed other port", "127.0.0.1:8081", 421},
		{named, "listed, no port means 80", "127.0.0.1", 421},
		{named, "localhost not listed", "localhost:8080", 421},
		{named, "any port", "ag.example:3", 200},
		{named, "normalized", "box.lan:9000", 200},
		{named, "rebound", "evil.example:8080", 421},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := getHost(t, tc.h, "GET", "/", tc.host)
			if code != tc.code {
				t.Fatalf("Host %q: %d %.60q, want %d", tc.host, code, body, tc.code)
			}
			if code == 421 && !strings.Contains(body, fmt.Sprintf("Host %q is not a name of this server", tc.host)) {
				t.Errorf("Host %q: body %q does not name the Host", tc.host, body)
			}
		})
	}
}
