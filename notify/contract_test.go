package notify_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/state"
)

// baseStore is a store that keeps alert state and an outbox but nothing
// that makes delivery exactly-once: no delivery leases, no intents, no
// fence.
type baseStore interface {
	Update(ctx context.Context, fn func(state.Snapshot) (state.Changes, error)) error
	Pending(ctx context.Context, channel string, limit int) ([]state.Outbound, error)
	Settle(ctx context.Context, ids []int64, s state.Settlement) error
}

// wrappedStore is a store wrapped for metrics or retries by someone who
// embedded only the base.
type wrappedStore struct {
	baseStore
}

// TestNewRefusesAStoreThatLostExactlyOnce: a wrapper that keeps only the
// base of a store must not be accepted by New. Were it accepted, the
// notifier would deliver without a delivery lease (two processes on one
// state send the same notification), without an intent marker (a crash
// after Slack accepted a post posts it again) and without the fence (a
// replaced leader still pages), and nothing would say so. New takes the
// whole contract (state.Outbox), so such a wrapper does not compile.
func TestNewRefusesAStoreThatLostExactlyOnce(t *testing.T) {
	param := reflect.TypeOf(notify.New).In(1)
	if reflect.TypeFor[wrappedStore]().Implements(param) {
		t.Errorf("notify.New accepts a store wrapper that embeds only Update, Pending and Settle (%v): it would deliver without leases, intents or fence", param)
	}
	for _, m := range []string{"Lease", "Intend", "Fenced", "Abandon"} {
		if _, ok := param.MethodByName(m); !ok {
			t.Errorf("the store notify.New takes (%v) has no %s: a store without it would be accepted", param, m)
		}
	}
}
