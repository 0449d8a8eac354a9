package serve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/state"
)

// Silences is what the silence endpoints need: list them, and, when a
// token is configured, add and expire them. Implemented in internal/cli.
type Silences interface {
	// ListSilences returns the silences in force, with the open alerts
	// each matches.
	ListSilences(ctx context.Context) ([]state.SilenceStatus, error)
	// AddSilence adds one; errors matching ErrBadSilence are the
	// request's fault.
	AddSilence(ctx context.Context, r SilenceRequest) (state.Silence, error)
	// ExpireSilence ends one now; errors match ErrNoSilence for an
	// unknown ID and ErrBadSilence for one that cannot be expired here.
	ExpireSilence(ctx context.Context, id string) (state.Silence, error)
}

// Errors a Silences returns for what the request says.
var (
	ErrBadSilence = errors.New("bad silence request")
	ErrNoSilence  = errors.New("no such silence")
)

// SilenceRequest is the body of POST /api/v1/silences.
type SilenceRequest struct {
	Match state.Matchers `json:"match"`
	// For ("7d") or Until (RFC 3339) says when it ends.
	For   string    `json:"for,omitempty"`
	Until time.Time `json:"until,omitzero"`
	// UpTo is the highest tier covered; empty: the tier of the finding's
	// open alert for a finding ID, else page.
	UpTo   string `json:"up_to,omitempty"`
	Reason string `json:"reason"`
	Author string `json:"author"`
}

// maxSilenceBody bounds a POST /api/v1/silences body.
const maxSilenceBody = 64 << 10

func (s *Server) listSilences(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	list, err := s.opts.Silences.ListSilences(ctx)
	if err != nil {
		s.logger.Warn("cannot list silences", "err", err)
		http.Error(w, "cannot read the silences: the state store failed (see /readyz)", http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// authorized reports whether r carries the silence token, answering it
// when not. The scheme is case-insensitive (RFC 7235 section 2.1). The
// comparison takes the same time whatever the token given; the token is
// never logged. Past MaxAuthFailures failures a minute from r's client,
// it answers 429 with a Retry-After without looking at the token.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if len(s.opts.SilenceToken) == 0 {
		http.Error(w, "changing silences over HTTP is off: set serve.silence_token_env or serve.silence_token_file, or use 'certwatch silence'", http.StatusForbidden)
		return false
	}
	client, now := clientOf(r.RemoteAddr), s.now()
	if d := s.authFailures.wait(client, now); d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter(d)))
		http.Error(w, fmt.Sprintf("too many failed attempts at the silence token: try again in %d seconds", retryAfter(d)), http.StatusTooManyRequests)
		return false
	}
	scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	got = strings.TrimLeft(got, " ")
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256(s.opts.SilenceToken)
	if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		if s.authFailures.fail(client, now) {
			s.logger.Warn("silence token failures limited", "client", client.String(), "max_per_minute", MaxAuthFailures)
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="certwatch silences"`)
		http.Error(w, "a valid bearer token is required (Authorization: Bearer <serve.silence_token>)", http.StatusUnauthorized)
		return false
	}
	return true
}

func (s *Server) addSilence(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var req SilenceRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxSilenceBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "bad silence request: "+err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	si, err := s.opts.Silences.AddSilence(ctx, req)
	if s.silenceError(w, "add", err) {
		return
	}
	s.logger.Info("silence added over HTTP", "silence", si.ID, "author", si.Author, "until", si.Until, "up_to", si.UpTo.String())
	writeJSON(w, http.StatusCreated, si)
}

func (s *Server) expireSilence(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	si, err := s.opts.Silences.ExpireSilence(ctx, r.PathValue("id"))
	if s.silenceError(w, "expire", err) {
		return
	}
	s.logger.Info("silence expired over HTTP", "silence", si.ID)
	writeJSON(w, http.StatusOK, si)
}

// silenceError answers err, if any, and reports whether it did.
func (s *Server) silenceError(w http.ResponseWriter, op string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrNoSilence):
		http.Error(w, err.Error(), http.StatusNotFound)
	case errors.Is(err, ErrBadSilence):
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		s.logger.Warn("cannot "+op+" silence", "err", err)
		http.Error(w, fmt.Sprintf("cannot %s the silence: the state store failed (see /readyz)", op), http.StatusServiceUnavailable)
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
