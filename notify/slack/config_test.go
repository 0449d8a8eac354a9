package slack_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/notify/slack"
)

// TestConfigPrintsNoSecret: a Config printed or logged, whole or inside
// another value, shows the channel and not its secret.
func TestConfigPrintsNoSecret(t *testing.T) {
	c := slack.Config{Name: "certs", Channel: "#certs", Token: "xoxb-SECRET-42"}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("channel", "config", c)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("channel", "config", c)
	printed := fmt.Sprintf("%v %+v %#v %s", c, c, c, c) + fmt.Sprint([]slack.Config{c}) + logs.String()
	if strings.Contains(printed, "SECRET") {
		t.Errorf("printed config shows the secret: %s", printed)
	}
	if !strings.Contains(printed, c.Name) {
		t.Errorf("printed config does not name the channel: %s", printed)
	}
}
