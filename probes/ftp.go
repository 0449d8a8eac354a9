package probes

// ftp upgrades an FTP control connection (RFC 4217 4): the 220 greeting
// (after any 120 "ready in n minutes"), AUTH TLS, 234. Nothing is logged
// in and no data connection is opened.
func (d *dialogue) ftp() error {
	code, text, err := d.reply("ftp")
	for err == nil && code == 120 {
		code, text, err = d.reply("ftp")
	}
	if err != nil {
		return err
	}
	if code != 220 {
		return refused("ftp", code, text)
	}
	if err := d.sendLine("AUTH TLS"); err != nil {
		return err
	}
	if code, text, err = d.reply("ftp"); err != nil {
		return err
	}
	if code != 234 {
		// 500, 502, 504: AUTH or TLS unknown; 534, 431: refused by policy.
		return noStartTLS("AUTH TLS answered %d %s", code, replyText(first(text)))
	}
	return nil
}
