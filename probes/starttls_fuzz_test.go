package probes

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/certwatch/certwatch/discovery"
)

// The STARTTLS fuzzers drive each dialogue over a net.Pipe whose server
// end sends the fuzzer's bytes, then closes. Whatever a hostile server
// sends, the dialogue must end (the pipe closes, so every read ends), not
// panic, and return an error a log line can carry: short, printable,
// server text quoted. Seeds are in testdata/fuzz/<FuzzName>/.

// maxDialogueError bounds the message of a failed dialogue: it quotes at
// most a short piece of what the server sent (see quoteReply).
const maxDialogueError = 512

func fuzzDialogue(f *testing.F, proto discovery.Protocol) {
	f.Fuzz(func(t *testing.T, reply []byte) {
		client, server := net.Pipe()
		// A safety net only: the server end closes after its bytes, so
		// a dialogue waiting for more reads EOF at once.
		_ = client.SetDeadline(time.Now().Add(5 * time.Second))
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = io.Copy(io.Discard, server) }) // what the client sends
		wg.Go(func() {
			_, _ = server.Write(reply)
			_ = server.Close()
		})
		err := upgrade(client, proto, "mail.example")
		_ = client.Close()
		wg.Wait()
		if err == nil {
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the dialogue did not end when the server closed: %v", err)
		}
		msg := err.Error()
		if len(msg) > maxDialogueError {
			t.Errorf("error is %d bytes, want at most %d: %.200q…", len(msg), maxDialogueError, msg)
		}
		for _, r := range msg {
			if !unicode.IsPrint(r) {
				t.Errorf("error carries the unprintable %U: %q", r, msg)
				break
			}
		}
	})
}

func FuzzStartTLSSMTP(f *testing.F)     { fuzzDialogue(f, discovery.SMTP) }
func FuzzStartTLSIMAP(f *testing.F)     { fuzzDialogue(f, discovery.IMAP) }
func FuzzStartTLSPOP3(f *testing.F)     { fuzzDialogue(f, discovery.POP3) }
func FuzzStartTLSFTP(f *testing.F)      { fuzzDialogue(f, discovery.FTP) }
func FuzzStartTLSLDAP(f *testing.F)     { fuzzDialogue(f, discovery.LDAP) }
func FuzzStartTLSMySQL(f *testing.F)    { fuzzDialogue(f, discovery.MySQL) }
func FuzzStartTLSPostgres(f *testing.F) { fuzzDialogue(f, discovery.Postgres) }
func FuzzStartTLSXMPP(f *testing.F)     { fuzzDialogue(f, discovery.XMPPClient) }
