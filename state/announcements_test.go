package state_test

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

// TestAnnouncementsActAsAMap: a random run of sets, gets and deletes on an
// alert's announcements gives what a map given the same would, in channel
// order, and their JSON is the map's, byte for byte (what `certwatch
// alerts --json` printed before they were a list).
func TestAnnouncementsActAsAMap(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	channels := []string{"oncall", "certs", "incidents", "team-a", "b"}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for round := range 200 {
		var as state.Announcements
		want := map[string]state.Announcement{}
		for step := range 12 {
			c := channels[rnd.IntN(len(channels))]
			switch rnd.IntN(3) {
			case 0, 1:
				an := state.Announcement{Tier: policy.Tier(rnd.IntN(4)), At: t0.Add(time.Duration(step) * time.Minute), Digest: rnd.IntN(2) == 0, Ref: c + "-ref"}
				as.Set(c, an)
				want[c] = an
			default:
				as.Delete(c)
				delete(want, c)
			}
			for _, c := range channels {
				got, ok := as.Get(c)
				w, wok := want[c]
				if ok != wok || got != w || as.Has(c) != wok {
					t.Fatalf("round %d step %d: Get(%s) = %+v, %v; want %+v, %v", round, step, c, got, ok, w, wok)
				}
			}
			if names, wantNames := as.Names(), slices.Sorted(maps.Keys(want)); !slices.Equal(names, wantNames) {
				t.Fatalf("round %d step %d: Names() = %q, want %q", round, step, names, wantNames)
			}
		}
		got, err := json.Marshal(state.Alert{ID: "x", Channels: as})
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, err := json.Marshal(struct {
			state.Alert
			Channels map[string]state.Announcement `json:"channels,omitempty"`
		}{state.Alert{ID: "x"}, want})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(wantJSON) {
			t.Fatalf("round %d: JSON\n%s\nwant the map's\n%s", round, got, wantJSON)
		}
		var back state.Alert
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(as, back.Channels); diff != "" {
			t.Fatalf("round %d: read back from JSON (-set +read):\n%s", round, diff)
		}
	}
}

// TestAnnouncementsCopies: a copy of an alert sees what a channel is told
// anew (Set of a channel it lists), as a copy sharing a map would; a
// channel added or forgotten after the copy is not the copy's, and
// forgetting channels while ranging over the list visits each once.
func TestAnnouncementsCopies(t *testing.T) {
	var as state.Announcements
	as.Set("certs", state.Announcement{Tier: policy.Warning})
	as.Set("oncall", state.Announcement{Tier: policy.Warning})
	copied := as
	as.Set("oncall", state.Announcement{Tier: policy.Page})
	if an, _ := copied.Get("oncall"); an.Tier != policy.Page {
		t.Errorf("copy sees oncall at %v after it was told anew, want %v", an.Tier, policy.Page)
	}
	as.Set("incidents", state.Announcement{Tier: policy.Page})
	as.Delete("certs")
	if got := copied.Names(); !slices.Equal(got, []string{"certs", "oncall"}) {
		t.Errorf("copy lists %q after channels were added and forgotten on the original, want [certs oncall]", got)
	}
	var visited []string
	for _, told := range as {
		visited = append(visited, told.Channel)
		as.Delete(told.Channel)
	}
	if !slices.Equal(visited, []string{"incidents", "oncall"}) || len(as) != 0 {
		t.Errorf("forgetting each channel while ranging visited %q and left %d, want [incidents oncall] and none", visited, len(as))
	}
}
