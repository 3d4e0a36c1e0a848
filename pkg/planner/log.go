package planner

import (
	"github.com/go-logr/logr"
)

// pluginVerbosity is added to the verbosity of everything the descheduler's
// plugins log: their findings (node classifications, evictions asked for)
// are details of how a plan came about, shown from -v=3 on, while the plan
// itself is the output. They also log every refused eviction as an error;
// here a refusal is a decision of the plan, recorded among its skips, so it
// becomes an info line too.
const pluginVerbosity = 3

type pluginSink struct {
	logr.LogSink
}

func (s pluginSink) Enabled(level int) bool { return s.LogSink.Enabled(level + pluginVerbosity) }

func (s pluginSink) Info(level int, msg string, kv ...any) {
	s.LogSink.Info(level+pluginVerbosity, msg, kv...)
}

func (s pluginSink) Error(err error, msg string, kv ...any) {
	if s.LogSink.Enabled(pluginVerbosity + 1) {
		s.LogSink.Info(pluginVerbosity+1, msg, append(kv, "err", err)...)
	}
}

func (s pluginSink) WithValues(kv ...any) logr.LogSink {
	return pluginSink{s.LogSink.WithValues(kv...)}
}

func (s pluginSink) WithName(name string) logr.LogSink { return pluginSink{s.LogSink.WithName(name)} }

// pluginLogger is the logger handed to the descheduler plugins.
func pluginLogger(l logr.Logger) logr.Logger {
	if l.GetSink() == nil {
		return l
	}
	return logr.New(pluginSink{l.GetSink()})
}
