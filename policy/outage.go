package policy

// MinEndpointsForFailureShare is the smallest run in which the share of
// endpoints that failed to answer is read as a problem on certwatch's side
// (its network, a resolver, a firewall) rather than of the endpoints: below
// it, a few refused ports would make the share jump.
const MinEndpointsForFailureShare = 10

// Unanswered reports whether an endpoint that failed with this failure
// class (probes.Failure's values) went unanswered: no name resolution, no
// route, no answer in time, a reset, or not probed at all. These are what a
// host that lost its network, a broken resolver or a firewall in the way
// produce, and only they count towards the failure share. A refused
// connection, a server that is not TLS or that fails the handshake answered:
// the network works, the service is absent or broken (a whole-zone scan on
// extra ports finds mostly refused names), so they do not.
func Unanswered(failure string) bool {
	switch failure {
	case "resolve", "no_route", "timeout", "reset", "not_probed":
		return true
	}
	return false
}

// FailureShareExceeded reports whether a run of at least
// MinEndpointsForFailureShare endpoints looks like a problem on certwatch's
// side: every one of the total endpoints failed (failed counts every class,
// refused included: nothing was checked), or more than maxShare (0 to 1) of
// them went unanswered (unanswered counts the Unanswered classes only). It
// is the one rule behind the notifier's storm guard
// (notify.storm.max_failure_share), the daemon's heartbeat and the exit code
// of `certwatch scan`, so that a run the daemon treats as an outage is never
// a green scan, and a zone scanned on ports most of its names refuse is not
// an outage.
func FailureShareExceeded(failed, unanswered, total int, maxShare float64) bool {
	if total < MinEndpointsForFailureShare {
		return false
	}
	return failed == total || float64(unanswered) > maxShare*float64(total)
}
