// Command rebalancer is the rebalancing daemon and its tools.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rebalancer-dev/rebalancer/internal/gogc"
	"github.com/rebalancer-dev/rebalancer/pkg/cli"
)

func main() {
	gogc.Default()
	// SIGTERM (a Pod's termination) and Ctrl-C end every command promptly,
	// in any phase: connecting, syncing, planning or evicting.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := cli.NewRootCommand().ExecuteContext(ctx)
	if err != nil && ctx.Err() != nil {
		// Whatever failed, it failed because the command was told to stop.
		err = fmt.Errorf("interrupted (%v): %w", context.Cause(ctx), err)
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
