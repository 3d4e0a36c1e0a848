// Package live reads a running cluster into snapshot.Snapshot values: its
// objects through informers (Cluster), its usage from metrics.k8s.io
// sampled over a window (Sampler), and the answers of the Prometheus a
// policy reads (ReadPrometheus). The snapshot package is the format alone;
// this package is the only one that reads a cluster for a plan.
package live
