package webhook_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/notify/webhook"
)

// TestConfigPrintsNoSecret: a Config printed or logged, whole or inside
// another value, shows the channel and not its secret.
func TestConfigPrintsNoSecret(t *testing.T) {
	c := webhook.Config{Name: "hook", URL: "https://hooks.example/", Secret: "SIGNING-SECRET-42"}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("channel", "config", c)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("channel", "config", c)
	printed := fmt.Sprintf("%v %+v %#v %s", c, c, c, c) + fmt.Sprint([]webhook.Config{c}) + logs.String()
	if strings.Contains(printed, "SECRET") {
		t.Errorf("printed config shows the secret: %s", printed)
	}
	if !strings.Contains(printed, c.Name) {
		t.Errorf("printed config does not name the channel: %s", printed)
	}
}
