package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ag-go/ag/web"
)

func TestAllowedHosts(t *testing.T) {
	for _, tc := range []struct {
		listen string
		extra  []string
		want   []string
	}{
		{"127.0.0.1:8080", nil, []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080"}},
		{"0.0.0.0:8080", nil, []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080"}},
		{"[::]:8080", nil, []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080"}},
		{"[::1]:9000", nil, []string{"[::1]:9000", "127.0.0.1:9000", "localhost:9000"}},
		{"192.168.1.5:8080", []string{"box.lan", "proxy.example:443", "[fe80::1]", "fe80::2"},
			[]string{"192.168.1.5:8080", "127.0.0.1:8080", "localhost:8080", "[::1]:8080", "box.lan:8080", "proxy.example:443", "[fe80::1]:8080", "[fe80::2]:8080"}},
	} {
		addr, err := net.ResolveTCPAddr("tcp", tc.listen)
		if err != nil {
			t.Fatal(err)
		}
		got, err := allowedHosts(addr, tc.extra)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("allowedHosts(%s, %q) = %q, %v; want %q", tc.listen, tc.extra, got, err, tc.want)
		}
	}
	addr, _ := net.ResolveTCPAddr("tcp", "127.0.0.1:8080")
	for _, bad := range []string{"http://box.lan/", "a b", "[]", "box.lan:http", "box.lan:99999", "a:b:c", "user@box.lan"} {
		if _, err := allowedHosts(addr, []string{bad}); err == nil || !strings.Contains(err.Error(), "-allow-host") {
			t.Errorf("-allow-host %q: got %v, want an error naming the flag", bad, err)
		}
	}
}

// TestServeTimeouts: every timeout is set, and the write timeout leaves
// ag.wasm (about 5 MB) time to arrive over a slow link (40 KB/s).
func TestServeTimeouts(t *testing.T) {
	addr, _ := net.ResolveTCPAddr("tcp", "127.0.0.1:8080")
	srv, _, err := newServer(addr, nil, web.Options{WasmDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]time.Duration{"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout} {
		if d <= 0 {
			t.Errorf("%s is %v: a stalled client would hold its connection forever", name, d)
		}
	}
	if minWrite := time.Duration(5<<20/(40<<10)) * time.Second; srv.WriteTimeout < minWrite {
		t.Errorf("WriteTimeout %v is under %v, the time ag.wasm takes at 40 KB/s", srv.WriteTimeout, minWrite)
	}
	if srv.ReadHeaderTimeout > srv.ReadTimeout || srv.MaxHeaderBytes <= 0 {
		t.Errorf("ReadHeaderTimeout %v, ReadTimeout %v, MaxHeaderBytes %d", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.MaxHeaderBytes)
	}
}

// TestServeHostCheck runs the server as `ag serve` does, on a real
// listener, and sends requests with the Host header a browser would send.
func TestServeHostCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, _, err := newServer(ln.Addr(), []string{"ag.example"}, web.Options{WasmDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		host string
		code int
	}{
		{ln.Addr().String(), 200},
		{net.JoinHostPort("localhost", strconv.Itoa(port)), 200},
		{net.JoinHostPort("::1", strconv.Itoa(port)), 200},
		{net.JoinHostPort("ag.example", strconv.Itoa(port)), 200},
		{"evil.example", 421},
		{net.JoinHostPort("evil.example", strconv.Itoa(port)), 421},
		{net.JoinHostPort("localhost", strconv.Itoa(port+1)), 421},
		{"ag.example", 421}, // port 80, not ours
	} {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/", nil)
		req.Host = tc.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("Host %q: %d %.80q, want %d", tc.host, resp.StatusCode, body, tc.code)
		}
	}
}

// -app with a package that does not build fails before listening, with the
// package and the compiler's words; with -wasm too it is refused.
func TestServeAppBuildFails(t *testing.T) {
	err := serve([]string{"-addr", "127.0.0.1:0", "-app", "./no-such-example"})
	// main puts "ag serve: " before it
	if err == nil || !strings.HasPrefix(err.Error(), "-app ./no-such-example") || !strings.Contains(err.Error(), "go build") {
		t.Fatalf("serve -app ./no-such-example: error %v, want one naming the package and go build's output", err)
	}
	err = serve([]string{"-app", "./x", "-wasm", t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "-app and -wasm") {
		t.Fatalf("serve -app -wasm: error %v, want the two flags named", err)
	}
	// a folder named ag.wasm was taken for the build, then served empty
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ag.wasm"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = serve([]string{"-addr", "127.0.0.1:0", "-wasm", dir})
	if err == nil || !strings.Contains(err.Error(), "ag.wasm is a folder") {
		t.Fatalf("serve -wasm with a folder ag.wasm: error %v, want it refused", err)
	}
}
