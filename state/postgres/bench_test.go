package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/state/postgres"
)

// BenchmarkShardClaims measures what one PostgreSQL carries of shared
// probing: N claimants (1, 2, 5, 10, 20 replicas' worth, each a store of
// its own) claim the shards of one open sweep and write each back, as
// fast as they can. One op is one shard: a claim and a write-back. A
// shard's work is 8 KiB (about 100 encoded targets) and its result 200
// KiB (100 observations with a 2 KiB chain each). shards/s is what the
// database takes from all claimants together. Run with
//
//	go test -run '^$' -bench ShardClaims -benchtime 2000x ./state/postgres
func BenchmarkShardClaims(b *testing.B) {
	const workBytes, resultBytes = 8 << 10, 200 << 10
	for _, n := range []int{1, 2, 5, 10, 20} {
		b.Run(fmt.Sprintf("claimants=%d", n), func(b *testing.B) {
			srv := pg.Server(b)
			url := srv.CreateDatabase(b)
			ctx := context.Background()
			leader := open(b, url, postgres.Options{})
			work := make([][]byte, b.N)
			for i := range work {
				work[i] = make([]byte, workBytes)
			}
			result := make([]byte, resultBytes)
			if _, err := leader.OpenSweep(ctx, time.Now().Add(time.Hour), work); err != nil {
				b.Fatal(err)
			}
			stores := make([]*postgres.Store, n)
			for i := range stores {
				stores[i] = open(b, url, postgres.Options{})
			}
			b.SetBytes(workBytes + resultBytes)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for i, s := range stores {
				holder := fmt.Sprintf("replica-%d", i)
				wg.Go(func() {
					for {
						c, ok, err := s.ClaimShard(ctx, holder, time.Minute)
						if err != nil {
							b.Error(err)
							return
						}
						if !ok {
							return
						}
						if err := s.CompleteShard(ctx, c, result); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "shards/s")
		})
	}
}
