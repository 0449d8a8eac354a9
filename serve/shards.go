package serve

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/certwatch/certwatch/state"
)

// shardCounters count the probe shards this replica claimed, by outcome.
type shardCounters struct {
	shards    *prometheus.CounterVec
	endpoints prometheus.Counter
}

func newShardCounters() *shardCounters {
	return &shardCounters{
		shards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "certwatch_probe_shards_total",
			Help: "Probe shards of shared runs this replica claimed, by outcome: written (back in time), cut_short (written, with endpoints not probed before the sweep deadline), lost (the claim ran out or the sweep closed; another replica probes it) or failed.",
		}, []string{"outcome"}),
		endpoints: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "certwatch_probe_shard_endpoints_total",
			Help: "Endpoints this replica probed and wrote back for shared probe runs.",
		}),
	}
}

// RecordShard counts the outcome of one probe shard this replica claimed
// (see daemon.Worker.OnShard): err is nil when it was written back in
// full.
func (s *Server) RecordShard(_ state.Claim, endpoints int, err error) {
	outcome := "written"
	switch {
	case err == nil:
	case errors.Is(err, state.ErrClaimLost):
		outcome = "lost"
	case endpoints > 0:
		outcome = "cut_short"
	default:
		outcome = "failed"
	}
	s.shardCounters.shards.WithLabelValues(outcome).Inc()
	if outcome == "written" || outcome == "cut_short" {
		s.shardCounters.endpoints.Add(float64(endpoints))
	}
}
