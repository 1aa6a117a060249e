package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/ag-go/ag/web"
)

// serve runs the profile page (package web) until interrupted.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	wasmDir := fs.String("wasm", "", "folder holding ag.wasm and wasm_exec.js (default: the build embedded by `make wasm`)")
	fs.Parse(args)
	if *wasmDir != "" {
		if _, err := os.Stat(*wasmDir + "/ag.wasm"); err != nil {
			return fmt.Errorf("-wasm %s: %w (build it with: bash web/build.sh %s)", *wasmDir, err, *wasmDir)
		}
	} else if !web.Built() {
		fmt.Fprintln(os.Stderr, "warning: "+web.NotBuilt+"; the page still opens profile JSON files")
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("-addr %s: %w", *addr, err)
	}
	fmt.Printf("ag profile page: http://%s/  (Ctrl-C stops)\n", ln.Addr())
	srv := &http.Server{Handler: web.Handler(web.Options{WasmDir: *wasmDir}), ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving %s: %w", *addr, err)
	}
	return nil
}
