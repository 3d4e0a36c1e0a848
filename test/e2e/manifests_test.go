//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

var variants = []string{"cronjob", "job", "deployment"}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kubectl"), append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// TestManifestsServerSideDryRun applies every variant to the real apiserver
// with server-side dry-run and strict field validation, so a broken manifest
// (unknown field, bad reference, invalid value) fails here.
func TestManifestsServerSideDryRun(t *testing.T) {
	for _, v := range variants {
		t.Run(v, func(t *testing.T) {
			out := kubectl(t, "apply", "--server-side", "--dry-run=server", "--field-manager=rebalancer-e2e",
				"--validate=strict", "-k", filepath.Join(repoRoot, "manifests", v))
			for _, want := range []string{"deployment.apps/rebalancer-scheduler", "configmap/rebalancer-policies-", "clusterrole.rbac.authorization.k8s.io/rebalancer"} {
				if !strings.Contains(out, want) {
					t.Errorf("dry-run output lacks %s:\n%s", want, out)
				}
			}
		})
	}
}

// TestManifestsLeastPrivilege checks the rendered manifests: every container
// runs non-root with a read-only root filesystem, no capabilities and the
// runtime's seccomp profile; RBAC has no wildcards and no access to secrets.
func TestManifestsLeastPrivilege(t *testing.T) {
	for _, v := range variants {
		t.Run(v, func(t *testing.T) {
			objs := decodeAll(t, kubectl(t, "kustomize", filepath.Join(repoRoot, "manifests", v)))
			workloads := 0
			for _, u := range objs {
				switch u.GetKind() {
				case "Deployment", "Job", "CronJob":
					workloads++
					checkPodSpec(t, u.GetKind()+"/"+u.GetName(), podSpecOf(t, u))
				case "ClusterRole", "Role":
					var role rbacv1.ClusterRole // Role has the same rules field
					fromUnstructured(t, u, &role)
					for _, r := range role.Rules {
						for _, field := range [][]string{r.Verbs, r.Resources, r.APIGroups} {
							for _, s := range field {
								if s == "*" {
									t.Errorf("%s/%s: wildcard in rule %+v", u.GetKind(), u.GetName(), r)
								}
							}
						}
						for _, res := range r.Resources {
							if res == "secrets" {
								t.Errorf("%s/%s grants access to secrets", u.GetKind(), u.GetName())
							}
						}
					}
				}
			}
			if workloads != 2 {
				t.Errorf("found %d workloads, want the scheduler and the rebalancer", workloads)
			}
		})
	}
}

func checkPodSpec(t *testing.T, name string, spec v1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: pod does not require runAsNonRoot", name)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != v1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod seccomp profile is not RuntimeDefault", name)
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s/%s: root filesystem is writable", name, c.Name)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s/%s: privilege escalation allowed", name, c.Name)
		}
		if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s/%s: capabilities not all dropped", name, c.Name)
		}
	}
}

func podSpecOf(t *testing.T, u *unstructured.Unstructured) v1.PodSpec {
	switch u.GetKind() {
	case "Deployment":
		var d appsv1.Deployment
		fromUnstructured(t, u, &d)
		return d.Spec.Template.Spec
	case "Job":
		var j batchv1.Job
		fromUnstructured(t, u, &j)
		return j.Spec.Template.Spec
	default:
		var c batchv1.CronJob
		fromUnstructured(t, u, &c)
		return c.Spec.JobTemplate.Spec.Template.Spec
	}
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("%s/%s: %v", u.GetKind(), u.GetName(), err)
	}
}

func decodeAll(t *testing.T, manifests string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
