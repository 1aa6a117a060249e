package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ag-go/ag/web"
)

// serve runs the profile page (package web) until interrupted.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	wasmDir := fs.String("wasm", "", "folder holding ag.wasm and wasm_exec.js (default: the build embedded by `make wasm`)")
	appPkg := fs.String("app", "", "a main package calling app.Run (e.g. ./examples/spiral): built for the browser into a temporary folder and served instead of the MLP")
	allow := fs.String("allow-host", "", "more names the page may be opened by, comma-separated (name or name:port; without a port, the listening port). "+
		"The listening host, localhost, 127.0.0.1 and [::1] always are; other Host headers get 421 (DNS rebinding)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *appPkg != "" {
		if *wasmDir != "" {
			return fmt.Errorf("-app and -wasm both given: -app builds the wasm module itself")
		}
		dir, err := os.MkdirTemp("", "ag-serve-app-")
		if err != nil {
			return fmt.Errorf("-app %s: %w", *appPkg, err)
		}
		defer os.RemoveAll(dir)
		t0 := time.Now()
		if err := web.BuildApp(*appPkg, dir); err != nil {
			return fmt.Errorf("-app %s: %w", *appPkg, err)
		}
		fmt.Printf("built %s for the browser in %.1f s\n", *appPkg, time.Since(t0).Seconds())
		*wasmDir = dir
	} else if *wasmDir != "" {
		if st, err := os.Stat(*wasmDir + "/ag.wasm"); err != nil {
			return fmt.Errorf("-wasm %s: %w (build it with: bash web/build.sh %s)", *wasmDir, err, *wasmDir)
		} else if st.IsDir() {
			return fmt.Errorf("-wasm %s: %s/ag.wasm is a folder, want the built module (bash web/build.sh %s)", *wasmDir, *wasmDir, *wasmDir)
		}
	} else if !web.Built() {
		fmt.Fprintln(os.Stderr, "warning: "+web.NotBuilt+"; the page still opens profile JSON files")
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("-addr %s: %w", *addr, err)
	}
	srv, hosts, err := newServer(ln.Addr(), splitList(*allow), web.Options{WasmDir: *wasmDir})
	if err != nil {
		ln.Close()
		return err
	}
	fmt.Printf("ag profile page: http://%s/  (Ctrl-C stops; answers to %s)\n", hosts[0], strings.Join(hosts, ", "))
	// Ctrl-C closes the server, so the deferred clean-up (the -app build) runs.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving %s: %w", *addr, err)
	}
	return nil
}

// The server's timeouts. Requests are small GETs, so reading one takes
// well under a second on any link; the largest response is ag.wasm (4.7 MB
// measured), which writeTimeout lets arrive at 30 KB/s. A client that stalls
// longer (or an idle keep-alive connection) is dropped instead of holding a
// connection open forever.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 3 * time.Minute
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

// newServer returns the page's server for a listener on addr, admitting the
// Host names allowedHosts lists, and those names.
func newServer(addr net.Addr, extra []string, o web.Options) (*http.Server, []string, error) {
	hosts, err := allowedHosts(addr, extra)
	if err != nil {
		return nil, nil, err
	}
	o.Hosts = hosts
	return &http.Server{
		Handler:           web.Handler(o),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}, hosts, nil
}

// allowedHosts lists the Host values the page answers to, as name:port: the
// listening host (unless it is a wildcard such as 0.0.0.0, which no browser
// sends), localhost, 127.0.0.1 and [::1] on the listening port, then extra
// (name, on the listening port, or name:port).
func allowedHosts(addr net.Addr, extra []string) ([]string, error) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("listening on %v (%T), want a TCP address", addr, addr)
	}
	port := fmt.Sprint(tcp.Port)
	names := []string{"127.0.0.1", "localhost", "::1"}
	if !tcp.IP.IsUnspecified() { // first, as the address to print
		names = append([]string{tcp.IP.String()}, names...)
	}
	var hosts []string
	for _, h := range names {
		if hp := net.JoinHostPort(h, port); !slices.Contains(hosts, hp) {
			hosts = append(hosts, hp)
		}
	}
	for _, e := range extra {
		hp, err := hostEntry(e, port)
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, hp)
	}
	return hosts, nil
}

// hostEntry checks one -allow-host value (name, name:port, [v6] or
// [v6]:port) and returns it as name:port, port defaulting to port.
func hostEntry(e, port string) (string, error) {
	name, p, err := net.SplitHostPort(e)
	if err != nil { // no port
		name, p = strings.TrimSuffix(strings.TrimPrefix(e, "["), "]"), port
	}
	n, perr := strconv.Atoi(p)
	if name == "" || strings.ContainsAny(name, "/@ []") || perr != nil || n < 1 || n > 65535 ||
		strings.Contains(name, ":") && net.ParseIP(name) == nil {
		return "", fmt.Errorf("-allow-host %q is not a host name or name:port", e)
	}
	return net.JoinHostPort(name, p), nil
}
