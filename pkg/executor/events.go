package executor

import (
	"context"
	"fmt"
	"os"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ref "k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// syncRecorder writes each Event before Eventf returns. client-go's
// broadcaster sends from a goroutine, and a one-shot run (a Job) can exit
// before its last Events are sent; a rebalancer writes a few Events per
// cycle, so writing them synchronously costs nothing and loses none.
type syncRecorder struct {
	client   kubernetes.Interface
	instance string
	logger   klog.Logger
}

// NewEventRecorder returns a recorder that writes events.k8s.io/v1 Events
// synchronously, reported by rebalancer from this host.
func NewEventRecorder(client kubernetes.Interface, logger klog.Logger) events.EventRecorder {
	host, _ := os.Hostname()
	return &syncRecorder{client: client, instance: host, logger: logger}
}

func (r *syncRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	reg, err := ref.GetReference(scheme.Scheme, regarding)
	if err != nil {
		r.logger.Error(err, "Not recording an event: no reference to its object", "reason", reason)
		return
	}
	now := time.Now()
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", reg.Name, now.UnixNano()),
			Namespace: reg.Namespace,
		},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: wellknown.ReportingController,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *reg,
		Note:                fmt.Sprintf(note, args...),
		Type:                eventtype,
	}
	if related != nil {
		if rel, err := ref.GetReference(scheme.Scheme, related); err == nil {
			ev.Related = rel
		}
	}
	if ev.Namespace == "" {
		ev.Namespace = metav1.NamespaceDefault
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.client.EventsV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		r.logger.Error(err, "Failed to record event", "reason", reason, "object", klog.KRef(reg.Namespace, reg.Name))
	}
}

var _ events.EventRecorder = &syncRecorder{}
