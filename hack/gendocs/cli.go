package main

import (
	"bytes"
	"path"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// cliPages writes a page per command of `rebalancer`, as cobra documents a
// command tree (the descheduler publishes its docs/cli the same way).
func cliPages(root *cobra.Command, pages Pages) error {
	root.DisableAutoGenTag = true // no date: the pages change only with the code
	return walk(root, func(c *cobra.Command) error {
		var b bytes.Buffer
		b.WriteString(header)
		link := func(name string) string { return name }
		if err := doc.GenMarkdownCustom(c, &b, link); err != nil {
			return err
		}
		pages[path.Join("docs/cli", strings.ReplaceAll(c.CommandPath(), " ", "_")+".md")] = b.Bytes()
		return nil
	})
}

// walk calls f on c and every command under it that users see.
func walk(c *cobra.Command, f func(*cobra.Command) error) error {
	if !c.IsAvailableCommand() && c.HasParent() {
		return nil
	}
	if err := f(c); err != nil {
		return err
	}
	for _, sub := range c.Commands() {
		if err := walk(sub, f); err != nil {
			return err
		}
	}
	return nil
}
