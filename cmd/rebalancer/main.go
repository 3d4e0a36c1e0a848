// Command rebalancer is the rebalancing daemon and its tools.
package main

import (
	"fmt"
	"os"

	"github.com/rebalancer-dev/rebalancer/pkg/cli"
)

func main() {
	if err := cli.NewRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
