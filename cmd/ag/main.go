// Command ag trains, benchmarks and inspects ag models.
//
//	ag devices                 list the backends and whether they run here
//	ag demo [flags]            train the seeds' MLP on the best device, print the loss and step times
//	ag bench [flags]           measure matmul and training-step speed, write JSON
//	ag serve [flags]           serve the profile page (make serve builds the wasm first)
//	ag ggml [-build]           print the cgo flags and tag that link the ggml backends (eval them)
//
// Run `ag <command> -h` for a command's flags.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/ag-go/ag/internal/outfile"

	_ "github.com/ag-go/ag/backend/all"
)

var commands = map[string]func(args []string) error{
	"devices": devices,
	"demo":    demo,
	"bench":   bench,
	"serve":   serve,
	"ggml":    ggmlCmd,
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: ag devices | demo [flags] | bench [flags] | serve [flags] | ggml [-build]\nrun `ag <command> -h` for the flags of a command")
		os.Exit(2)
	}
	if err := commands[os.Args[1]](os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "ag "+os.Args[1]+":", err)
		os.Exit(1)
	}
}

// parseFlags parses a command's flags (a bad one exits with status 2, as
// flag.ExitOnError does) and refuses words after them: flag parsing stops at
// the first word that is no flag, so the flags after it would be ignored
// (`ag demo -steps 3 x -mode captured` ran lazily).
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: the command takes only flags (run `ag %s -h`)", fs.Args(), fs.Name())
	}
	return nil
}

// checkOutput refuses the path of an output file flag (without its dash)
// that cannot be written, before any work is done (outfile.Check).
func checkOutput(flag, path string) error {
	if err := outfile.Check(path); err != nil {
		return fmt.Errorf("-%s %s: %w", flag, path, err)
	}
	return nil
}
