package policy

import (
	"fmt"
	"os"
	"strings"

	clientset "k8s.io/client-go/kubernetes"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
)

// loadBytes runs the descheduler's LoadPolicyConfig on data, the bytes Load
// has already read (within the size limit) and checked. LoadPolicyConfig
// reads a path itself; reading the file a second time could load other
// bytes than were checked (a ConfigMap volume swaps its files while a pod
// runs) and would skip the size limit. So the bytes go through a pipe, as a
// shell's process substitution passes them: /dev/fd/N names the pipe's read
// end, which needs no writable filesystem. The pipe's name in the
// descheduler's messages is replaced by path.
func loadBytes(path string, data []byte, client clientset.Interface, registry pluginregistry.Registry) (*api.DeschedulerPolicy, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer func() { _ = r.Close() }()
	go func() {
		// An error here (the reader gone) surfaces as the reader's.
		_, _ = w.Write(data)
		_ = w.Close()
	}()
	fdPath := fmt.Sprintf("/dev/fd/%d", r.Fd())
	p, err := descheduler.LoadPolicyConfig(fdPath, client, registry)
	if err != nil {
		return nil, fmt.Errorf("%s", strings.ReplaceAll(err.Error(), fdPath, path))
	}
	return p, nil
}
