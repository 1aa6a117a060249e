// Command ag trains, benchmarks and inspects ag models.
//
//	ag devices                 list the backends and whether they run here
//	ag demo [flags]            train the seeds' MLP on the best device, print the loss and step times
//	ag bench [flags]           measure matmul and training-step speed, write JSON
//	ag serve [flags]           serve the profile page (make serve builds the wasm first)
//
// Run `ag <command> -h` for a command's flags.
package main

import (
	"fmt"
	"os"

	_ "github.com/ag-go/ag/backend/all"
)

var commands = map[string]func(args []string) error{
	"devices": devices,
	"demo":    demo,
	"bench":   bench,
	"serve":   serve,
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: ag devices | demo [flags] | bench [flags] | serve [flags]\nrun `ag <command> -h` for the flags of a command")
		os.Exit(2)
	}
	if err := commands[os.Args[1]](os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "ag "+os.Args[1]+":", err)
		os.Exit(1)
	}
}
