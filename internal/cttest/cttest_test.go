package cttest_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/certwatch/certwatch/internal/cttest"
)

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("get %s: %s %v", url, resp.Status, err)
	}
	return body
}

// The fake hashes entries as Sunlight does: logging Sunlight's data tile
// gives Sunlight's level-0 hash tile, byte for byte.
func TestHashTileMatchesSunlight(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile("testdata/navigli2025h2/tile/0/000")
	if err != nil {
		t.Fatal(err)
	}
	log := cttest.Start(t)
	if err := log.AppendTileLeaves(cttest.SunlightDataTile()); err != nil {
		t.Fatal(err)
	}
	if log.Size() != 256 {
		t.Fatalf("size %d after one full data tile, want 256", log.Size())
	}
	if got := get(t, log.URL+"tile/0/000"); !bytes.Equal(got, want) {
		t.Errorf("tile/0/000 differs from Sunlight's")
	}
	if got := get(t, log.URL+"tile/data/000"); !bytes.Equal(got, cttest.SunlightDataTile()) {
		t.Errorf("tile/data/000 differs from the data tile logged")
	}
}
