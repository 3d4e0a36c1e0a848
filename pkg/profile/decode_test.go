package profile

import (
	"os"
	"path/filepath"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
)

// TestDecodeConfigIsKubeSchedulers: the configuration decoded from the
// bytes LoadConfig read (once, within its size limit) is the one
// kube-scheduler's own loader reads from the file, defaults included, for
// every shipped scheduler configuration.
func TestDecodeConfigIsKubeSchedulers(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "policies", "*-scheduler*.yaml"))
	files = append(files, filepath.Join("..", "..", "test", "testdata", "unsteered-packing-scheduler.yaml"))
	if len(files) < 4 {
		t.Fatalf("found %d scheduler configurations, want the shipped ones", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeConfig(data)
			if err != nil {
				t.Fatal(err)
			}
			logger, _ := ktesting.NewTestContext(t)
			want, err := options.LoadConfigFromFile(logger, file)
			if err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(got, want) {
				t.Errorf("decoded %+v\nkube-scheduler's loader reads %+v", got, want)
			}
		})
	}
}
