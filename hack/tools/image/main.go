// Command image builds, writes and pushes rebalancer's container image
// without a container engine, with go-containerregistry:
//
//	image build  -platform linux/amd64=DIR ... -version V -revision C -created T -o DIR
//	             an OCI image layout holding one multi-platform index; each DIR
//	             holds that platform's rebalancer and rebalancer-scheduler
//	image push   -layout DIR -image REF
//	             push the layout's index, with the Docker config's credentials
//	image rootfs -o DIR
//	             the image's files but the binaries, for the Dockerfile
//	image tar    -C DIR -created T -o FILE
//	             DIR as a reproducible tarball (the release's .oci.tar)
//
// Everything written depends only on the inputs: one commit's binaries and
// -created (the commit's time) give the same digests on every machine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: image build|push|rootfs|tar [flags]")
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		err = runBuild(args)
	case "push":
		err = runPush(args)
	case "rootfs":
		err = runRootfs(args)
	case "tar":
		err = runTar(args)
	default:
		err = fmt.Errorf("unknown command %q: want build, push, rootfs or tar", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// platformFlag collects -platform os/arch=dir flags.
type platformFlag map[string]string

func (f platformFlag) String() string { return fmt.Sprint(map[string]string(f)) }

func (f platformFlag) Set(s string) error {
	p, dir, ok := strings.Cut(s, "=")
	if !ok || p == "" || dir == "" {
		return fmt.Errorf("%q: want os/arch=dir", s)
	}
	f[p] = dir
	return nil
}

// createdFlag is an RFC 3339 time, in whole seconds: tar and the image
// config then both record it exactly.
func createdFlag(fs *flag.FlagSet) *string {
	return fs.String("created", "", "the image's creation time, RFC 3339 (the Makefile's BUILD_DATE: the commit's time)")
}

func parseCreated(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("-created is required: a fixed time keeps the image reproducible")
	}
	t, err := time.Parse(time.RFC3339, s)
	return t.UTC().Truncate(time.Second), err
}

func runBuild(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	o := buildOptions{platforms: platformFlag{}}
	fs.Var(platformFlag(o.platforms), "platform", "os/arch=dir: a platform and the directory of its binaries (repeat per platform)")
	binaries := fs.String("binaries", "rebalancer,rebalancer-scheduler", "the binaries of each platform's directory to put at /, comma-separated; the first is the entrypoint")
	fs.StringVar(&o.version, "version", "", "the version label")
	fs.StringVar(&o.revision, "revision", "", "the revision label: the git commit")
	created := createdFlag(fs)
	out := fs.String("o", "_output/image", "the OCI layout directory to write (replaced)")
	_ = fs.Parse(args)
	var err error
	if o.created, err = parseCreated(*created); err != nil {
		return err
	}
	if len(o.platforms) == 0 || o.version == "" || *binaries == "" {
		return errors.New("-platform, -version and -binaries are required")
	}
	o.binaries = strings.Split(*binaries, ",")
	idx, err := buildIndex(o)
	if err != nil {
		return err
	}
	if err := writeLayout(*out, idx, o.version); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s\n", *out, d)
	return nil
}

func runPush(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	dir := fs.String("layout", "_output/image", "the OCI layout `make image` wrote")
	ref := fs.String("image", "", "where to push, e.g. registry.example.com/rebalancer:v0.1.0")
	_ = fs.Parse(args)
	if *ref == "" {
		return errors.New("-image is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	d, err := push(ctx, *dir, *ref)
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", *ref, d)
	return nil
}

func runRootfs(args []string) error {
	fs := flag.NewFlagSet("rootfs", flag.ExitOnError)
	out := fs.String("o", "", "the directory to write the files into")
	_ = fs.Parse(args)
	if *out == "" {
		return errors.New("-o is required")
	}
	return writeRootfs(*out, baseEntries())
}

func runTar(args []string) error {
	fs := flag.NewFlagSet("tar", flag.ExitOnError)
	dir := fs.String("C", "_output/image", "the directory to archive")
	created := createdFlag(fs)
	out := fs.String("o", "", "the tarball to write")
	_ = fs.Parse(args)
	mtime, err := parseCreated(*created)
	if err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-o is required")
	}
	entries, err := dirEntries(*dir)
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := writeTar(f, entries, mtime); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
