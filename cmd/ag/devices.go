package main

import (
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/ag-go/ag/backend"
)

func devices(args []string) error {
	fs := flag.NewFlagSet("devices", flag.ExitOnError)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUNS HERE\tAUTO\tDETAILS")
	for _, d := range backend.Drivers() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Name, yes(d.OK), yes(d.OK && d.Auto), d.Why)
	}
	tw.Flush()
	fmt.Println("\n`auto` picks the first row marked AUTO: rows are in order of preference.")
	return nil
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
