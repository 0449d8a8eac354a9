package serve

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/certwatch/certwatch/state"
)

// RecordTerm records this replica's latest leadership, for /metrics
// (certwatch_leader, certwatch_leader_epoch) and /readyz, which says
// "standby" on a replica that does not lead. Only replicas sharing a
// PostgreSQL state call it; until then neither metric is exported.
func (s *Server) RecordTerm(t state.Term) {
	s.termMu.Lock()
	defer s.termMu.Unlock()
	s.term, s.termSet = t, true
}

// role describes, for /readyz, whether this replica leads; "" for a
// single instance.
func (s *Server) role() string {
	s.termMu.Lock()
	defer s.termMu.Unlock()
	switch {
	case !s.termSet:
		return ""
	case s.term.Leader:
		return fmt.Sprintf(" (leader, epoch %d)", s.term.Epoch)
	case s.term.Holder != "":
		return fmt.Sprintf(" (standby: replica %s leads, epoch %d)", s.term.Holder, s.term.Epoch)
	}
	return " (standby: no replica leads yet)"
}

// leaderCollector exports the leadership recorded by RecordTerm.
type leaderCollector struct {
	s             *Server
	leader, epoch *prometheus.Desc
}

func newLeaderCollector(s *Server) *leaderCollector {
	return &leaderCollector{
		s:      s,
		leader: prometheus.NewDesc("certwatch_leader", "1 on the replica that leads (runs discovery, probes, notifications and delivery), 0 on a standby.", nil, nil),
		epoch:  prometheus.NewDesc("certwatch_leader_epoch", "Fencing epoch of the current leadership as this replica last saw it; it grows with every change of leader.", nil, nil),
	}
}

func (c *leaderCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.leader
	ch <- c.epoch
}

func (c *leaderCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.termMu.Lock()
	t, set := c.s.term, c.s.termSet
	c.s.termMu.Unlock()
	if !set {
		return
	}
	leader := 0.0
	if t.Leader {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(c.epoch, prometheus.GaugeValue, float64(t.Epoch))
}
