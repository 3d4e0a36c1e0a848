package planner

import (
	"github.com/go-logr/logr"
)

// quietErrors wraps the plugins' logger. The descheduler's plugins log every
// refused eviction as an error; here a refusal is a decision of the plan,
// recorded among its skips, so it is logged as a verbose info line instead.
type quietErrors struct {
	logr.LogSink
}

const refusedEvictionVerbosity = 4

func (q quietErrors) Error(err error, msg string, kv ...any) {
	if q.LogSink.Enabled(refusedEvictionVerbosity) {
		q.LogSink.Info(refusedEvictionVerbosity, msg, append(kv, "err", err)...)
	}
}

func (q quietErrors) WithValues(kv ...any) logr.LogSink {
	return quietErrors{q.LogSink.WithValues(kv...)}
}

func (q quietErrors) WithName(name string) logr.LogSink {
	return quietErrors{q.LogSink.WithName(name)}
}

// pluginLogger is the logger handed to the descheduler plugins.
func pluginLogger(l logr.Logger) logr.Logger {
	if l.GetSink() == nil {
		return l
	}
	return logr.New(quietErrors{l.GetSink()})
}
