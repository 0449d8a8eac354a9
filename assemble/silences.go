package assemble

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/serve"
	"github.com/certwatch/certwatch/state"
)

// Silences are the silences of c's silences: section, with IDs that stay
// the same while an entry does ("config:" and a hash of it).
func Silences(c config.Config) []state.Silence {
	var out []state.Silence
	for _, cs := range c.Silences {
		kind, _ := policy.KindNamed(cs.Match.Kind) // validated
		s := state.Silence{
			Match: state.Matchers{
				FindingID: cs.Match.FindingID, Kind: kind, Name: cs.Match.Name,
				Zone: cs.Match.Zone, Labels: cs.Match.Labels, Certificate: cs.Match.Certificate,
			},
			UpTo: cs.UpToTier(), Reason: cs.Reason, Author: cmp.Or(cs.Author, "config"), Until: cs.Until.Time, Config: true,
		}
		s = notify.NormalizeSilence(s)
		b, _ := json.Marshal(s)
		sum := sha256.Sum256(b)
		s.ID = "config:" + hex.EncodeToString(sum[:4])
		out = append(out, s)
	}
	return out
}

// SilenceBook adds, lists and expires the silences kept in a store, for
// `certwatch silence` and the HTTP API (SilenceAPI), beside those a
// configuration declares. Its settings change with a reload (Configure).
type SilenceBook struct {
	store    state.Store
	settings atomic.Pointer[silenceSettings]
	now      func() time.Time
}

// silenceSettings are what a configuration says about silences.
type silenceSettings struct {
	max    time.Duration
	config []state.Silence
	labels func(policy.Finding) map[string]string
}

// NewSilenceBook returns the book of the silences kept in store and
// declared in c.
func NewSilenceBook(store state.Store, c config.Config) *SilenceBook {
	b := &SilenceBook{store: store, now: time.Now}
	b.Configure(c)
	return b
}

// Configure takes the silence settings of c: silence_max, the silences it
// declares, and the labels findings carry.
func (b *SilenceBook) Configure(c config.Config) {
	b.settings.Store(&silenceSettings{
		max:    time.Duration(c.Notify.SilenceMax),
		config: Silences(c),
		labels: Labels(c),
	})
}

// ErrBadSilence marks a silence refused for what it says, not for a
// failing store.
var ErrBadSilence = errors.New("silence refused")

// Add completes s (ID, creation time, the tier it covers unless upTo) and
// stores it once it passes notify.CheckSilence.
func (b *SilenceBook) Add(ctx context.Context, s state.Silence, upTo bool) (state.Silence, error) {
	now := b.now().UTC()
	set := b.settings.Load()
	s = notify.NormalizeSilence(s)
	s.ID, s.Created = notify.NewSilenceID(), now
	if !upTo {
		s.UpTo = policy.Page
		if id := s.Match.FindingID; id != "" {
			alerts, err := b.store.Alerts(ctx, false)
			if err != nil {
				return state.Silence{}, err
			}
			found := false
			for _, a := range alerts {
				if a.ID == id || a.Finding.ID() == id {
					s.UpTo, found = a.Tier, true
				}
			}
			if !found {
				return state.Silence{}, fmt.Errorf("%w: no open alert has finding ID %q (see 'certwatch alerts --output json'); give --up-to to silence it before it is raised", ErrBadSilence, id)
			}
		}
	}
	if err := notify.CheckSilence(s, now, set.max); err != nil {
		return state.Silence{}, fmt.Errorf("%w: %w", ErrBadSilence, err)
	}
	if err := b.store.AddSilence(ctx, s); err != nil {
		return state.Silence{}, err
	}
	return s, nil
}

// List returns the silences kept and configured, with the open alerts each
// matches; ended ones too with all.
func (b *SilenceBook) List(ctx context.Context, all bool) ([]state.SilenceStatus, error) {
	stored, err := b.store.Silences(ctx)
	if err != nil {
		return nil, err
	}
	alerts, err := b.store.Alerts(ctx, false)
	if err != nil {
		return nil, err
	}
	set := b.settings.Load()
	return notify.DescribeSilences(append(stored, set.config...), alerts, set.labels, all, b.now()), nil
}

// Expire ends the stored silence id now.
func (b *SilenceBook) Expire(ctx context.Context, id string) (state.Silence, error) {
	if strings.HasPrefix(id, "config:") {
		return state.Silence{}, fmt.Errorf("%w: silence %s is declared in the configuration file: remove it from silences: there (and reload)", ErrBadSilence, id)
	}
	return b.store.ExpireSilence(ctx, id, b.now().UTC())
}

// SilenceAPI serves the silence endpoints of `certwatch run` from Book.
type SilenceAPI struct{ Book *SilenceBook }

var _ serve.Silences = SilenceAPI{}

func (a SilenceAPI) ListSilences(ctx context.Context) ([]state.SilenceStatus, error) {
	return a.Book.List(ctx, false)
}

func (a SilenceAPI) AddSilence(ctx context.Context, r serve.SilenceRequest) (state.Silence, error) {
	s := state.Silence{Match: r.Match, Reason: r.Reason, Author: r.Author, Until: r.Until}
	if r.For != "" {
		d, err := config.ParseDuration(r.For)
		if err != nil {
			return state.Silence{}, fmt.Errorf("%w: for: %w", serve.ErrBadSilence, err)
		}
		if !r.Until.IsZero() {
			return state.Silence{}, fmt.Errorf("%w: give for or until, not both", serve.ErrBadSilence)
		}
		s.Until = a.Book.now().UTC().Add(d)
	}
	if r.UpTo != "" {
		t, err := policy.ParseTier(r.UpTo)
		if err != nil {
			return state.Silence{}, fmt.Errorf("%w: up_to: %w", serve.ErrBadSilence, err)
		}
		s.UpTo = t
	}
	out, err := a.Book.Add(ctx, s, r.UpTo != "")
	if errors.Is(err, ErrBadSilence) {
		err = fmt.Errorf("%w: %w", serve.ErrBadSilence, err)
	}
	return out, err
}

func (a SilenceAPI) ExpireSilence(ctx context.Context, id string) (state.Silence, error) {
	out, err := a.Book.Expire(ctx, id)
	switch {
	case errors.Is(err, state.ErrNoSilence):
		err = fmt.Errorf("%w: %w", serve.ErrNoSilence, err)
	case errors.Is(err, ErrBadSilence):
		err = fmt.Errorf("%w: %w", serve.ErrBadSilence, err)
	}
	return out, err
}
