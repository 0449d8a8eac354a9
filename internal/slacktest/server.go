// Package slacktest is a local Slack Web API for tests: chat.postMessage and
// chat.update on a loopback port, taking form or JSON bodies with the token
// in the form or an Authorization header, answering as Slack does
// ({"ok":true,"channel":...,"ts":...} or {"ok":false,"error":...}), and
// keeping every channel's messages and threads so tests assert on what
// people in the channel would see. Scripted responses (429 with
// Retry-After, 5xx, ok:false errors) test retries.
//
// Messages keep the metadata they were posted with (event_type and
// event_payload), and the server reads them back as Slack does:
// conversations.history (top-level messages and broadcast replies, newest
// first, oldest/latest/inclusive, limit and cursor pages, metadata only
// with include_all_metadata), conversations.replies (a thread, oldest
// first) and conversations.list (to find a channel's ID by name). Message
// ts values are the posting time, as Slack's are, so oldest bounds work.
//
// slack-go's own slacktest serves the RTM and a few read methods; it has no
// chat.update, threads, metadata or scripted failures, hence this one.
package slacktest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
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
	// Metadata is the message metadata posted, as raw JSON ("" for none).
	Metadata string
	// Oldest, Latest, Cursor, Limit and IncludeAllMetadata are the
	// parameters of a read (conversations.history or .replies).
	Oldest, Latest, Cursor string
	Limit                  int
	IncludeAllMetadata     bool
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
	// Metadata is what the message was posted with, nil for none.
	Metadata *Metadata
	// Edits counts chat.update calls on it.
	Edits int
}

// Metadata is Slack message metadata
// (https://api.slack.com/metadata/using).
type Metadata struct {
	EventType    string         `json:"event_type"`
	EventPayload map[string]any `json:"event_payload"`
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
	// posted, when set, is called with each message accepted, before the
	// answer is written.
	posted func(Message)
	// lastTS is the ts of the latest message, so ts values grow.
	lastTS time.Time
	// now is the clock message ts values come from; nil means time.Now.
	now func() time.Time
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

// Script queues responses for the next chat.postMessage and chat.update
// requests, in order (reads are answered normally; use SetHook to fail
// them). Once used up, the server works normally.
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

// SetClock makes message ts values come from now (a test's clock) rather
// than time.Now; ts values still grow by at least a microsecond.
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// OnPosted installs a function called with each message the server has
// accepted (stored, so it stands in the channel), before it answers:
// killing the client there is a crash between Slack accepting a post and
// the client learning of it. It runs with the server's lock held and must
// not call the server.
func (s *Server) OnPosted(f func(Message)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.posted = f
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
	metadata                                   string
	oldest, latest, cursor, limit, types       string
	inclusive, includeAllMetadata              bool
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
			Metadata  json.RawMessage `json:"metadata"`
		}
		if err := json.Unmarshal(body, &j); err != nil {
			return p, err
		}
		p.channel, p.ts, p.threadTS, p.text, p.broadcast = j.Channel, j.TS, j.ThreadTS, j.Text, j.Broadcast
		if len(j.Blocks) > 0 && string(j.Blocks) != "null" {
			p.blocks = string(j.Blocks)
		}
		if len(j.Metadata) > 0 && string(j.Metadata) != "null" {
			p.metadata = string(j.Metadata)
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
		p.metadata = v.Get("metadata")
		p.oldest, p.latest, p.cursor, p.limit, p.types = v.Get("oldest"), v.Get("latest"), v.Get("cursor"), v.Get("limit"), v.Get("types")
		p.inclusive = truthy(v.Get("inclusive"))
		p.includeAllMetadata = truthy(v.Get("include_all_metadata"))
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
	call := Call{Method: method, Channel: p.channel, TS: p.ts, ThreadTS: p.threadTS, Text: p.text, Blocks: p.blocks, Broadcast: p.broadcast,
		Metadata: p.metadata, Oldest: p.oldest, Latest: p.latest, Cursor: p.cursor, IncludeAllMetadata: p.includeAllMetadata, Status: http.StatusOK}
	call.Limit, _ = strconv.Atoi(p.limit)
	if s.answerScripted(w, call) {
		return
	}
	body, e := s.handle(method, p, perr)
	if e != "" {
		call.Error = e
		body = map[string]any{"ok": false, "error": e}
	}
	s.calls = append(s.calls, call)
	writeJSON(w, body)
}

// answerScripted answers call as the hook or, for a chat method, the next
// scripted response says, and reports whether one did.
func (s *Server) answerScripted(w http.ResponseWriter, call Call) bool {
	var resp Response
	scripted := false
	if s.hook != nil {
		resp, scripted = s.hook(call)
	}
	if !scripted && len(s.script) > 0 && strings.HasPrefix(call.Method, "chat.") {
		resp, s.script, scripted = s.script[0], s.script[1:], true
	}
	if !scripted {
		return false
	}
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
		return true
	}
	writeJSON(w, map[string]any{"ok": false, "error": resp.Error})
	return true
}

// handle answers one authenticated call of method: the answer's body, or
// the Slack error code of a refusal.
func (s *Server) handle(method string, p params, perr error) (body map[string]any, refusal string) {
	switch {
	case perr != nil:
		return nil, "invalid_form_data"
	case p.token == "":
		return nil, "not_authed"
	case p.token != s.token:
		return nil, "invalid_auth"
	}
	id, known := s.channels[p.channel]
	switch method {
	case "chat.postMessage":
		return s.postMessage(p, id, known)
	case "chat.update":
		return s.updateMessage(p, id, known)
	case "conversations.history", "conversations.replies":
		return s.readMessages(method, p, id, known)
	case "conversations.list":
		return s.listChannels(), ""
	}
	return nil, "unknown_method"
}

// postMessage is chat.postMessage to the channel id (known: p.channel
// names one).
func (s *Server) postMessage(p params, id string, known bool) (map[string]any, string) {
	switch {
	case p.channel == "":
		return nil, "channel_not_found"
	case !known:
		return nil, "channel_not_found"
	case p.text == "" && p.blocks == "":
		return nil, "no_text"
	case p.blocks != "" && !json.Valid([]byte(p.blocks)):
		return nil, "invalid_blocks"
	case p.threadTS != "" && s.find(id, p.threadTS) == nil:
		return nil, "thread_not_found"
	}
	var meta *Metadata
	if p.metadata != "" {
		// Slack rejects metadata that is not an object with an
		// event_type and an event_payload object.
		meta = &Metadata{}
		if err := json.Unmarshal([]byte(p.metadata), meta); err != nil || meta.EventType == "" || meta.EventPayload == nil {
			return nil, "invalid_metadata_format"
		}
	}
	s.seq++
	m := &Message{Channel: id, TS: s.nextTS(), ThreadTS: p.threadTS, Text: p.text, Blocks: p.blocks, Broadcast: p.broadcast, Metadata: meta}
	s.messages = append(s.messages, m)
	if s.posted != nil {
		s.posted(*m)
	}
	return map[string]any{"ok": true, "channel": id, "ts": m.TS, "message": s.render(m, true)}, ""
}

// updateMessage is chat.update, which takes a channel ID, not a name.
func (s *Server) updateMessage(p params, id string, known bool) (map[string]any, string) {
	if !known || id != p.channel {
		return nil, "channel_not_found"
	}
	m := s.find(id, p.ts)
	if m == nil {
		return nil, "message_not_found"
	}
	if p.text == "" && p.blocks == "" {
		return nil, "no_text"
	}
	m.Text, m.Blocks = p.text, p.blocks
	m.Edits++
	return map[string]any{"ok": true, "channel": id, "ts": m.TS, "text": m.Text}, ""
}

// readMessages is conversations.history or conversations.replies (method),
// which both take a channel ID, not a name: one page of messages.
func (s *Server) readMessages(method string, p params, id string, known bool) (map[string]any, string) {
	if !known || id != p.channel {
		return nil, "channel_not_found"
	}
	var msgs []*Message
	if method == "conversations.history" {
		// Newest first: top-level messages and replies broadcast to
		// the channel.
		for i := len(s.messages) - 1; i >= 0; i-- {
			if m := s.messages[i]; m.Channel == id && (m.ThreadTS == "" || m.Broadcast) {
				msgs = append(msgs, m)
			}
		}
	} else {
		parent := s.find(id, p.ts)
		if parent == nil || parent.ThreadTS != "" {
			return nil, "thread_not_found"
		}
		// Oldest first: the parent, then its replies.
		msgs = append(msgs, parent)
		for _, m := range s.messages {
			if m.Channel == id && m.ThreadTS == parent.TS {
				msgs = append(msgs, m)
			}
		}
	}
	page, next, err := s.page(msgs, p)
	if err != "" {
		return nil, err
	}
	out := make([]map[string]any, len(page))
	for i, m := range page {
		out[i] = s.render(m, p.includeAllMetadata)
	}
	return map[string]any{"ok": true, "messages": out, "has_more": next != "", "pin_count": 0,
		"response_metadata": map[string]any{"next_cursor": next}}, ""
}

// listChannels is conversations.list: the channels known by name.
func (s *Server) listChannels() map[string]any {
	var names []string
	for name, cid := range s.channels {
		if !strings.HasPrefix(name, "#") && name != cid {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make([]map[string]any, len(names))
	for i, name := range names {
		out[i] = map[string]any{"id": s.channels[name], "name": name, "is_channel": true, "is_member": true}
	}
	return map[string]any{"ok": true, "channels": out, "response_metadata": map[string]any{"next_cursor": ""}}
}

// nextTS returns a ts for a message posted now: Slack's form, seconds and
// microseconds of the posting time, always later than the one before.
func (s *Server) nextTS() string {
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	now = now.Truncate(time.Microsecond)
	if !now.After(s.lastTS) {
		now = s.lastTS.Add(time.Microsecond)
	}
	s.lastTS = now
	return fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000)
}

// render is a message as the Web API returns it.
func (s *Server) render(m *Message, withMetadata bool) map[string]any {
	out := map[string]any{"type": "message", "user": "U0CERTWATCH", "bot_id": "B0CERTWATCH", "text": m.Text, "ts": m.TS}
	if m.Blocks != "" {
		out["blocks"] = json.RawMessage(m.Blocks)
	}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
		if m.Broadcast {
			out["subtype"] = "thread_broadcast"
		}
	} else if n := s.replies(m); n > 0 {
		out["thread_ts"], out["reply_count"] = m.TS, n
	}
	if withMetadata && m.Metadata != nil {
		out["metadata"] = m.Metadata
	}
	return out
}

// replies counts the replies to m.
func (s *Server) replies(m *Message) int {
	n := 0
	for _, r := range s.messages {
		if r.Channel == m.Channel && r.ThreadTS == m.TS {
			n++
		}
	}
	return n
}

// page applies a read's oldest, latest, inclusive, limit and cursor to
// msgs (in the order the method returns them) as Slack does: limit
// defaults to 100 (at most 999), and the cursor is opaque, here the
// position of the next message.
func (s *Server) page(msgs []*Message, p params) ([]*Message, string, string) {
	var in []*Message
	for _, m := range msgs {
		if p.oldest != "" && (tsLess(m.TS, p.oldest) || (!p.inclusive && m.TS == p.oldest)) {
			continue
		}
		if p.latest != "" && (tsLess(p.latest, m.TS) || (!p.inclusive && m.TS == p.latest)) {
			continue
		}
		in = append(in, m)
	}
	start := 0
	if p.cursor != "" {
		raw, err := base64.StdEncoding.DecodeString(p.cursor)
		n, ok := strings.CutPrefix(string(raw), "next:")
		if err != nil || !ok {
			return nil, "", "invalid_cursor"
		}
		if start, err = strconv.Atoi(n); err != nil || start < 0 || start > len(in) {
			return nil, "", "invalid_cursor"
		}
	}
	limit, err := strconv.Atoi(p.limit)
	if err != nil || limit <= 0 {
		limit = 100
	}
	limit = min(limit, 999)
	end := min(start+limit, len(in))
	next := ""
	if end < len(in) {
		next = base64.StdEncoding.EncodeToString([]byte("next:" + strconv.Itoa(end)))
	}
	return in[start:end], next, ""
}

// tsLess compares two Slack ts values ("seconds.micros") by time.
func tsLess(a, b string) bool {
	sa, ma := splitTS(a)
	sb, mb := splitTS(b)
	return sa < sb || (sa == sb && ma < mb)
}

func splitTS(ts string) (sec, micros int64) {
	whole, frac, _ := strings.Cut(ts, ".")
	sec, _ = strconv.ParseInt(whole, 10, 64)
	frac = (frac + "000000")[:6]
	micros, _ = strconv.ParseInt(frac, 10, 64)
	return sec, micros
}

func truthy(v string) bool { return v == "1" || v == "true" }

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
