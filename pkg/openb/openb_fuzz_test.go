package openb

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/rebalancer-dev/rebalancer/internal/seeds"
)

// located is the shape of every error about a CSV's content: the file, then
// the line (and column) it is about.
var located = regexp.MustCompile(`^(nodes|pods)\.csv(:\d+(:\d+)?)?: \S`)

// FuzzReadCSV feeds both readers the same bytes, seeded with the good and bad
// CSVs of the bad-input corpus and the first lines of the real trace. Neither
// may panic; an error is one line that names the file; a success has rows
// that the readers' own checks allow.
func FuzzReadCSV(f *testing.F) {
	for _, s := range seeds.Files(f, "../../test/badinput/testdata/*.csv", "../../test/testdata/bad/openb-*.csv") {
		f.Add(s)
	}
	f.Add([]byte("sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,32000,262144,0,\n"))
	f.Add([]byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n" +
		"openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(err error) {
			if err == nil {
				return
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !located.MatchString(msg) {
				t.Fatalf("error %q: want one line starting with the file name", msg)
			}
		}
		nodes, err := ReadNodes("nodes.csv", bytes.NewReader(data))
		check(err)
		for _, n := range nodes {
			if n.Name == "" || n.MilliCPU <= 0 || n.MemoryMiB <= 0 || n.GPUs < 0 || (n.GPUs == 0 && n.GPUModel != "") {
				t.Fatalf("accepted a bad node %+v", n)
			}
		}
		pods, err := ReadPods("pods.csv", bytes.NewReader(data))
		check(err)
		for _, p := range pods {
			if p.Name == "" || p.MilliCPU < 0 || p.GPUMilli > 1000 || (p.Deleted >= 0 && p.Deleted < p.Created) {
				t.Fatalf("accepted a bad pod %+v", p)
			}
		}
	})
}
