package files_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/files"
)

// TestHostileKubeconfig: a kubeconfig-looking YAML file of a few MiB,
// or one within the size bound holding more nodes than any kubeconfig,
// is an error naming the file and the bound, decoded in bounded memory;
// 15 MiB of one-character list items took 1.65 GB and 7.6 s.
func TestHostileKubeconfig(t *testing.T) {
	dir := t.TempDir()
	head := "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster:\n    certificate-authority-data: \"\"\nusers:\n- name: x\n  user:\n    tokens:\n"
	big := []byte(head + strings.Repeat("    - a\n", 2<<20/8))
	many := []byte(head + strings.Repeat("    - a\n", (1<<20-len(head)-64)/8))
	// Aliases: each list refers to the one before ten times over.
	var lol strings.Builder
	lol.WriteString(head)
	lol.WriteString("    - &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&lol, "    - &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	for name, tc := range map[string]struct {
		b    []byte
		says []string
	}{
		"size":    {big, []string{"kubeconfig", fmt.Sprintf("%d bytes", len(big)), "1048576"}},
		"nodes":   {many, []string{"kubeconfig", "more than 100000 nodes"}},
		"aliases": {[]byte(lol.String()), []string{"kubeconfig", "more than 100000 nodes"}},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".yaml")
			write(t, path, tc.b)
			took, allocated, err := hostile(t, files.Config{Groups: []files.Group{{Globs: []string{path}}}}, slowdown*30*time.Second)
			wantRefused(t, err, path, tc.says...)
			if took > slowdown*5*time.Second || allocated > 256<<20 {
				t.Errorf("refusing it took %v and %d bytes, want under 5 s and 256 MiB", took, allocated)
			}
		})
	}
}
