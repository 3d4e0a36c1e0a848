package main

// What a child prints and the parent writes, apart from the code that
// measures: both sides read these types.

// Results is bench-results.json.
type Results struct {
	Plan map[string]PlanResult `json:"plan"`
	// PlanFile is `rebalancer plan --snapshot` on the 5,000-node synthetic
	// file: the path users run, decoding and admission included.
	PlanFile     PlanFileResult `json:"plan_file_5000"`
	PlanFileJSON PlanFileResult `json:"plan_file_json_5000"`
	// PlanThin is one plan of the shipped pair on a thin fleet of 5,000
	// identical nodes of 30 small pods each (thin.go).
	PlanThin ThinResult `json:"plan_thin_5000"`
	// PlanHeld is one plan of the shipped pair on a fleet of 5,000 nodes
	// that no plugin may change (held.go).
	PlanHeld HeldResult `json:"plan_held_5000"`
	// PlanGang is one plan of the shipped pair on 1,000 nodes holding a
	// gang of 10,000 members (gang.go).
	PlanGang            GangResult `json:"plan_gang_10000"`
	PredictionsPerS5000 float64    `json:"predictions_per_s_5000"`
	HintOverheadPct     float64    `json:"hint_overhead_pct"`
	HintOverheadHinted  float64    `json:"hint_overhead_hinted_pct"`
	// ExtenderPrioritize is one prioritize call of the extender at 5,000
	// nodes, through its HTTP handler.
	ExtenderPrioritize LatencyResult `json:"extender_prioritize_5000"`
	// EstimatorReplicas is one MaxAvailableReplicas question to `rebalancer
	// estimator` at 5,000 nodes, through its gRPC handler.
	EstimatorReplicas LatencyResult `json:"estimator_max_available_replicas_5000"`
	// Consolidation is the full consolidation of a fragmented cluster:
	// Consolidation alone, no node cap, no eviction limits.
	Consolidation ConsolidationResult `json:"consolidation_5000"`
	// Openb is one result per pod list of the openb trace found.
	Openb []OpenbResult `json:"openb"`
	// Import is the replay of a large pod list generated from the
	// trace's default one (importrate.go); nil without that list.
	Import   *ImportResult     `json:"openb_import,omitempty"`
	Commands map[string]string `json:"commands"`
	Machine  string            `json:"machine"`
	// Commit and Go name what was measured, so that two result files can
	// be compared.
	Commit string `json:"commit"`
	// Runs is how many times each plan figure was measured: its figure is
	// the run of median time, Spread the fastest and slowest time (seconds)
	// by key, when Runs > 1.
	Runs   int                   `json:"runs"`
	Spread map[string][2]float64 `json:"spread_s,omitempty"`
	Go     string                `json:"go"`
	Notes  []string              `json:"notes"`
}

// PlanResult is one plan of ours at a cluster size, beside one upstream
// cycle where the upstream descheduler was run.
type PlanResult struct {
	OursS      float64             `json:"ours_s"`
	OursRSSMiB float64             `json:"ours_rss_mib"`
	Moves      int                 `json:"moves"`
	Upstream   *UpstreamPlanResult `json:"upstream,omitempty"`
}

// UpstreamPlanResult is one cycle of the upstream descheduler.
type UpstreamPlanResult struct {
	Seconds   float64 `json:"s"`
	RSSMiB    float64 `json:"rss_mib"`
	Evictions int     `json:"evictions"`
}

// LatencyResult is the latency of a serving path's calls, in milliseconds.
type LatencyResult struct {
	P50Ms  float64 `json:"p50_ms,omitempty"`
	P99Ms  float64 `json:"p99_ms"`
	MeanMs float64 `json:"mean_ms"`
	Calls  int     `json:"calls"`
	// AnswersPerS is the answers a second to 8 callers asking at once.
	AnswersPerS float64 `json:"answers_per_s_8_callers,omitempty"`
	// NoOpinion counts the answers of -1 (past the budget).
	NoOpinion int `json:"no_opinion,omitempty"`
}

// ThinResult is one plan of the thin fleet.
type ThinResult struct {
	Seconds float64 `json:"s"`
	RSSMiB  float64 `json:"rss_mib"`
	Moves   int     `json:"moves"`
	// Emptied are the nodes the plan empties.
	Emptied int `json:"emptied"`
}

// HeldResult is one plan of the held fleet.
type HeldResult struct {
	Seconds float64 `json:"s"`
	RSSMiB  float64 `json:"rss_mib"`
	Moves   int     `json:"moves"`
	// Skips are the evictions the plan refused.
	Skips int `json:"skips"`
}

// GangResult is one plan of a cluster holding a gang.
type GangResult struct {
	Seconds float64 `json:"s"`
	RSSMiB  float64 `json:"rss_mib"`
	Moves   int     `json:"moves"`
	// GangSkips are the evictions skipped because their gang cannot move
	// whole.
	GangSkips int `json:"gang_skips"`
}

// PlanFileResult is one `rebalancer plan --snapshot` of a snapshot file.
type PlanFileResult struct {
	Seconds float64 `json:"s"`
	RSSMiB  float64 `json:"rss_mib"`
	Moves   int     `json:"moves"`
}

// ConsolidationResult is one uncapped Consolidation plan.
type ConsolidationResult struct {
	Seconds     float64 `json:"s"`
	RSSMiB      float64 `json:"rss_mib"`
	Moves       int     `json:"moves"`
	NodesBefore int     `json:"nodes_in_use_before"`
	NodesAfter  int     `json:"nodes_in_use_after"`
	LowerBound  int     `json:"lower_bound"`
}

// OpenbResult compares 10 simulated rounds on the openb trace.
type OpenbResult struct {
	// List is the pod list's kind: openb_pod_list_<list>.csv.
	List                string `json:"list"`
	Pods                int    `json:"pods"`
	NodesBefore         int    `json:"nodes_before"`
	NodesInUse          int    `json:"nodes_in_use"`
	LowerBound          int    `json:"lower_bound"`
	ClassLowerBound     int    `json:"class_lower_bound"`
	NodesOverLowerBound int    `json:"nodes_over_lower_bound"`
	EvictionsOurs       int    `json:"evictions_ours"`
	EvictionsUpstream   int    `json:"evictions_upstream"`
	NodesInUseUpstream  int    `json:"nodes_in_use_upstream"`
	PingPong            int    `json:"ping_pong"`
	PingPongUpstream    int    `json:"ping_pong_upstream"`
	ConvergedAt         int    `json:"converged_at"`
	UnschedulableOurs   int    `json:"unschedulable_ours"`
	UnschedulableUp     int    `json:"unschedulable_upstream"`
}

// ImportResult is one openb.Import of the generated pod list.
type ImportResult struct {
	Pods       int     `json:"pods"`
	Events     int     `json:"events"`
	EventsPerS float64 `json:"events_per_s"`
	Seconds    float64 `json:"s"`
	RSSMiB     float64 `json:"rss_mib"`
}

// measurement is what a child prints.
type measurement struct {
	Seconds float64 `json:"seconds"`
	Count   int     `json:"count"`
	Value   float64 `json:"value"`
	Value2  float64 `json:"value2"`
	// Openb is set by the openb child.
	Openb *OpenbResult `json:"openb,omitempty"`
	// Consolidation is set by the consolidate child.
	Consolidation *ConsolidationResult `json:"consolidation,omitempty"`
	// Latency is set by the estimate child.
	Latency *LatencyResult `json:"latency,omitempty"`
	// RSSMiB is filled in by the parent from the child's rusage.
	RSSMiB float64 `json:"-"`
}
