package policy

// MinEndpointsForFailureShare is the smallest run in which the share of
// endpoints that failed to answer is read as a problem on certwatch's side
// (its network, a resolver, a firewall) rather than of the endpoints: below
// it, a few refused ports would make the share jump.
const MinEndpointsForFailureShare = 10

// FailureShareExceeded reports whether failed of total probed endpoints is
// more than maxShare (0 to 1) of a run of at least
// MinEndpointsForFailureShare endpoints. It is the one rule behind the
// notifier's storm guard (notify.storm.max_failure_share) and the exit code
// of `certwatch scan`, so that a run the daemon treats as an outage is never
// a green scan.
func FailureShareExceeded(failed, total int, maxShare float64) bool {
	return total >= MinEndpointsForFailureShare && float64(failed) > maxShare*float64(total)
}
