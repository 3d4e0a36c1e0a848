// Package liblog quiets the libraries rebalancer is built on (the
// descheduler's plugins, kube-scheduler's framework and config loader):
// their findings are details of how a result came about, shown from -v=3
// on, while the result itself is the output, so a normal run prints only what
// the user asked for.
package liblog

import (
	"github.com/go-logr/logr"
)

// shift is added to the verbosity of everything a library logs. The
// descheduler also logs every refused eviction as an error; to rebalancer a
// refusal is a decision of the plan, recorded among its skips, so errors
// become info lines too.
const shift = 3

type quietSink struct {
	logr.LogSink
}

// Init does not pass the call on: the wrapped sink was initialized when its
// own logger was made, and is shared with every goroutine logging through
// it (klog's sink writes its call depth in Init).
func (s *quietSink) Init(logr.RuntimeInfo) {}

func (s *quietSink) Enabled(level int) bool { return s.LogSink.Enabled(level + shift) }

func (s *quietSink) Info(level int, msg string, kv ...any) {
	s.LogSink.Info(level+shift, msg, kv...)
}

func (s *quietSink) Error(err error, msg string, kv ...any) {
	if s.LogSink.Enabled(shift + 1) {
		s.LogSink.Info(shift+1, msg, append(kv, "err", err)...)
	}
}

// WithValues keeps the values only where a line may be written: with
// nothing of a library shown (below -v=3) it returns s itself. The
// descheduler's evictor adds values for every pod it filters, and keeping
// them was a large share of a plan's allocations.
func (s *quietSink) WithValues(kv ...any) logr.LogSink {
	if !s.LogSink.Enabled(shift) {
		return s
	}
	return &quietSink{s.LogSink.WithValues(kv...)}
}

func (s *quietSink) WithName(name string) logr.LogSink {
	return &quietSink{s.LogSink.WithName(name)}
}

// Quiet is l for a library: its info lines 3 levels more verbose, its
// errors info lines at -v=4.
func Quiet(l logr.Logger) logr.Logger {
	if l.GetSink() == nil {
		return l
	}
	return logr.New(&quietSink{l.GetSink()})
}
