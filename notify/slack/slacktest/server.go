// Package slacktest is a local Slack Web API for tests: chat.postMessage and
// chat.update on a loopback port, taking form or JSON bodies with the token
// in the form or an Authorization header, answering as Slack does
// ({"ok":true,"channel":...,"ts":...} or {"ok":false,"error":...}), and
// keeping every channel's messages and threads so tests assert on what
// people in the channel would see. Scripted responses (429 with
// Retry-After, 5xx, ok:false errors) test retries.
//
// slack-go's own slacktest serves the RTM and a few read methods; it has no
// chat.update, threads or scripted failures, hence this one.
package slacktest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Call is one request the server received.
type Call struct {
	// Method is the API method, e.g. "chat.postMessage".
	Method string
	// Channel, TS, ThreadTS, Text, Blocks and Broadcast are the request's
	// parameters (Blocks as raw JSON).
	Channel   string
	TS        string
	ThreadTS  string
	Text      string
	Blocks    string
	Broadcast bool
	// Error is the "error" the server answered, "" for ok; Status the HTTP
	// status.
	Error  string
	Status int
}

// Message is a message as it stands in a channel, after updates.
type Message struct {
	Channel   string
	TS        string
	ThreadTS  string
	Text      string
	Blocks    string
	Broadcast bool
	// Edits counts chat.update calls on it.
	Edits int
}

// Response is a scripted answer to one request.
type Response struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter string
	// Error, when set, answers {"ok":false,"error":Error}.
	Error string
}

// Server is a fake Slack Web API. It is safe for concurrent use.
type Server struct {
	srv   *httptest.Server
	token string

	mu       sync.Mutex
	channels map[string]string // "#name" and ID -> ID
	script   []Response
	calls    []Call
	messages []*Message
	seq      int
	// hook, when set, answers a request instead of the script and the
	// normal handling when it returns true.
	hook func(Call) (Response, bool)
}

// New starts a server on 127.0.0.1 that accepts token, with the given
// channels ("#certs"), and closes it when the test ends.
func New(t testing.TB, token string, channels ...string) *Server {
	s := &Server{token: token, channels: map[string]string{}}
	for i, c := range channels {
		id := fmt.Sprintf("C%08d", i+1)
		s.channels[c] = id
		s.channels[strings.TrimPrefix(c, "#")] = id
		s.channels[id] = id
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the API base URL, ending in "/", for slack.OptionAPIURL.
func (s *Server) URL() string { return s.srv.URL + "/api/" }

// Close stops the server; requests then fail to connect.
func (s *Server) Close() { s.srv.Close() }

// ChannelID returns the ID of a channel given by name.
func (s *Server) ChannelID(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.channels[name]
}

// Script queues responses for the next requests, in order. Once used up,
// the server works normally.
func (s *Server) Script(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, rs...)
}

// SetHook installs a function consulted before every request with what
// was asked (Call.Channel is the channel as given: a name or an ID); when it
// returns true its response is sent instead. Use it for behaviour that
// depends on time, load or channel, such as a rate limit or an outage. It
// runs with the server's lock held and must not call the server.
func (s *Server) SetHook(h func(Call) (Response, bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = h
}

// Calls returns every request received, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Messages returns the messages in a channel (name or ID), top-level and
// thread replies, in posting order, as they stand now.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.channels[channel]
	var out []Message
	for _, m := range s.messages {
		if m.Channel == id {
			out = append(out, *m)
		}
	}
	return out
}

// TopLevel returns the channel's messages that are not thread replies,
// plus replies broadcast to the channel.
func (s *Server) TopLevel(channel string) []Message {
	var out []Message
	for _, m := range s.Messages(channel) {
		if m.ThreadTS == "" || m.Broadcast {
			out = append(out, m)
		}
	}
	return out
}

// Thread returns the replies to the message with ts, in order.
func (s *Server) Thread(channel, ts string) []Message {
	var out []Message
	for _, m := range s.Messages(channel) {
		if m.ThreadTS == ts {
			out = append(out, m)
		}
	}
	return out
}

type params struct {
	token, channel, ts, threadTS, text, blocks string
	broadcast                                  bool
}

func readParams(r *http.Request) (params, error) {
	var p params
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return p, err
	}
	if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		p.token = auth
	}
	switch mt {
	case "application/json":
		var j struct {
			Channel   string          `json:"channel"`
			TS        string          `json:"ts"`
			ThreadTS  string          `json:"thread_ts"`
			Text      string          `json:"text"`
			Blocks    json.RawMessage `json:"blocks"`
			Broadcast bool            `json:"reply_broadcast"`
		}
		if err := json.Unmarshal(body, &j); err != nil {
			return p, err
		}
		p.channel, p.ts, p.threadTS, p.text, p.broadcast = j.Channel, j.TS, j.ThreadTS, j.Text, j.Broadcast
		if len(j.Blocks) > 0 && string(j.Blocks) != "null" {
			p.blocks = string(j.Blocks)
		}
	case "application/x-www-form-urlencoded":
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return p, err
		}
		if t := v.Get("token"); t != "" {
			p.token = t
		}
		p.channel, p.ts, p.threadTS, p.text, p.blocks = v.Get("channel"), v.Get("ts"), v.Get("thread_ts"), v.Get("text"), v.Get("blocks")
		p.broadcast = v.Get("reply_broadcast") == "true"
	default:
		return p, fmt.Errorf("unsupported content type %q", mt)
	}
	return p, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	method, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if r.Method != http.MethodPost || !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	p, perr := readParams(r)

	s.mu.Lock()
	defer s.mu.Unlock()
	call := Call{Method: method, Channel: p.channel, TS: p.ts, ThreadTS: p.threadTS, Text: p.text, Blocks: p.blocks, Broadcast: p.broadcast, Status: http.StatusOK}
	var resp Response
	scripted := false
	if s.hook != nil {
		resp, scripted = s.hook(call)
	}
	if !scripted && len(s.script) > 0 {
		resp, s.script, scripted = s.script[0], s.script[1:], true
	}
	if scripted {
		if resp.Status == 0 {
			resp.Status = http.StatusOK
		}
		call.Status, call.Error = resp.Status, resp.Error
		s.calls = append(s.calls, call)
		if resp.RetryAfter != "" {
			w.Header().Set("Retry-After", resp.RetryAfter)
		}
		if resp.Status != http.StatusOK {
			w.WriteHeader(resp.Status)
			if resp.Status >= 500 {
				io.WriteString(w, "<html><body>upstream error</body></html>")
			}
			return
		}
		writeJSON(w, map[string]any{"ok": false, "error": resp.Error})
		return
	}

	fail := func(e string) {
		call.Error = e
		s.calls = append(s.calls, call)
		writeJSON(w, map[string]any{"ok": false, "error": e})
	}
	switch {
	case perr != nil:
		fail("invalid_form_data")
		return
	case p.token == "":
		fail("not_authed")
		return
	case p.token != s.token:
		fail("invalid_auth")
		return
	}
	id, known := s.channels[p.channel]
	switch method {
	case "chat.postMessage":
		switch {
		case p.channel == "":
			fail("channel_not_found")
			return
		case !known:
			fail("channel_not_found")
			return
		case p.text == "" && p.blocks == "":
			fail("no_text")
			return
		case p.blocks != "" && !json.Valid([]byte(p.blocks)):
			fail("invalid_blocks")
			return
		case p.threadTS != "" && s.find(id, p.threadTS) == nil:
			fail("thread_not_found")
			return
		}
		s.seq++
		m := &Message{Channel: id, TS: fmt.Sprintf("1700000000.%06d", s.seq), ThreadTS: p.threadTS, Text: p.text, Blocks: p.blocks, Broadcast: p.broadcast}
		s.messages = append(s.messages, m)
		s.calls = append(s.calls, call)
		writeJSON(w, map[string]any{"ok": true, "channel": id, "ts": m.TS, "message": map[string]any{"text": m.Text, "ts": m.TS, "thread_ts": m.ThreadTS}})
	case "chat.update":
		// chat.update takes a channel ID, not a name.
		if !known || id != p.channel {
			fail("channel_not_found")
			return
		}
		m := s.find(id, p.ts)
		if m == nil {
			fail("message_not_found")
			return
		}
		if p.text == "" && p.blocks == "" {
			fail("no_text")
			return
		}
		m.Text, m.Blocks = p.text, p.blocks
		m.Edits++
		s.calls = append(s.calls, call)
		writeJSON(w, map[string]any{"ok": true, "channel": id, "ts": m.TS, "text": m.Text})
	default:
		fail("unknown_method")
	}
}

func (s *Server) find(channel, ts string) *Message {
	for _, m := range s.messages {
		if m.Channel == channel && m.TS == ts {
			return m
		}
	}
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(v)
}
