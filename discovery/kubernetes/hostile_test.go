package kubernetes_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/kubernetes"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/kubetest"
)

// TestRedirect: an API server that answers with a redirect, to another
// host over plain HTTP, is not followed: nothing reaches that host (the
// bearer token least of all), nothing it would answer is taken as the
// cluster's, and the error names the API server and where it pointed.
func TestRedirect(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string // what reached elsewhere: the Authorization of each request
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	}))
	t.Cleanup(elsewhere.Close)
	srv := kubetest.New(t)
	srv.Redirect(elsewhere.URL)
	s, _ := newSource(t, srv, kubernetes.Config{})
	_, err := s.Discover(t.Context())
	want := fmt.Sprintf("the API server %s redirected to %s/apis/apiextensions.k8s.io/v1/customresourcedefinitions?", srv.URL(), elsewhere.URL)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "point the kubeconfig's server") {
		t.Errorf("err = %v, want it to say %q and what to do", err, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) > 0 {
		t.Errorf("%d requests followed the redirect, with Authorization %q", len(got), got)
	}
}

// heapGrowth runs f and returns how much the process allocated
// meanwhile.
func heapGrowth(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestBoundedAnswers: a gzip answer that expands to an object past
// MaxObjectBytes, or to a page past MaxAnswerBytes, is an error naming
// the list and the bound, read no further; the rest of the cluster is
// read. Before, a 1 GiB expansion was read whole (28 s, 6.3 GB) and the
// read succeeded.
func TestBoundedAnswers(t *testing.T) { // not parallel: measures the heap
	p := newPKI()
	leaf := p.leaf("a.svc")
	tests := []struct {
		name        string
		count, size int
		want        string
		// maxAlloc bounds what the read allocates in all: an object
		// past the bound is not read whole.
		maxAlloc uint64
	}{
		{"object", 1, 256 << 20, "list secrets (type=Opaque): decoding list item: an object larger than 4 MiB: the API server stores no object past 1.5 MiB", 8 * kubernetes.MaxObjectBytes},
		{"page", 100, 1 << 20, "list secrets (type=Opaque): decoding list item: an answer larger than 64 MiB: lower page_size", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := kubetest.New(t)
			srv.Add(kubetest.ConfigMap("a", "ca", map[string]string{"ca.crt": string(certtest.PEM(leaf.Cert))}, nil, nil))
			srv.Bomb("secrets", tt.count, tt.size)
			// 64 MiB of JSON takes longer than the default timeout with
			// the race detector.
			s, _ := newSource(t, srv, kubernetes.Config{SecretTypes: []string{"Opaque"}, Timeout: 5 * time.Minute})
			var err error
			var n int
			grew := heapGrowth(func() {
				certs, _, e := s.Certificates(t.Context())
				n, err = len(certs), e
			})
			t.Logf("%d × %d bytes: %d MiB allocated", tt.count, tt.size, grew>>20)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to say %q", err, tt.want)
			}
			if n != 1 {
				t.Errorf("%d certificates, want the ConfigMap's", n)
			}
			if tt.maxAlloc > 0 && grew > tt.maxAlloc {
				t.Errorf("%d MiB allocated, want at most %d", grew>>20, tt.maxAlloc>>20)
			}
		})
	}
}

// TestEndlessList: a list whose continue token comes back ends at once,
// and one whose tokens never end ends after MaxPages, each with an error
// naming the list; the rest is read.
func TestEndlessList(t *testing.T) {
	t.Parallel()
	p := newPKI()
	leaf := p.leaf("a.svc")
	tests := []struct {
		name     string
		repeat   bool
		want     string
		requests int
	}{
		{"repeated", true, "list configmaps: the API server gave a continue token it gave before, after 2 pages: the list would never end", 2},
		{"endless", false, fmt.Sprintf("list configmaps: the list did not end within %d pages", kubernetes.MaxPages), kubernetes.MaxPages},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := kubetest.New(t)
			srv.Add(
				kubetest.ConfigMap("a", "ca", map[string]string{"ca.crt": string(certtest.PEM(leaf.Cert))}, nil, nil),
				kubetest.Secret("a", "tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(leaf.Cert)}, nil),
			)
			srv.LoopContinue("configmaps", tt.repeat)
			s, _ := newSource(t, srv, kubernetes.Config{QPS: -1})
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			certs, st, err := s.Certificates(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "check that the kubeconfig's server is the API server") {
				t.Errorf("err = %v, want it to say %q", err, tt.want)
			}
			if len(certs) != 1 || st.Requests != 6+tt.requests {
				t.Errorf("%d certificates in %d requests, want 1 in %d (%d pages of configmaps)", len(certs), st.Requests, 6+tt.requests, tt.requests)
			}
		})
	}
}
