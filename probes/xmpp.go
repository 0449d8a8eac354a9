package probes

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
)

// XMPP name spaces (RFC 6120).
const (
	xmppStreams = "http://etherx.jabber.org/streams"
	xmppTLS     = "urn:ietf:params:xml:ns:xmpp-tls"
)

// xmpp upgrades an XMPP stream (RFC 6120 5.4): the client's stream header
// to the target's name, the server's stream header and features, which
// must include <starttls/>; then <starttls/> and the server's <proceed/>.
// server selects a server-to-server stream (jabber:server). No
// authentication and no stanza is sent.
func (d *dialogue) xmpp(server bool) error {
	ns := "jabber:client"
	if server {
		ns = "jabber:server"
	}
	var to bytes.Buffer
	_ = xml.EscapeText(&to, []byte(d.name))
	header := "<?xml version='1.0'?><stream:stream xmlns='" + ns + "' xmlns:stream='" + xmppStreams +
		"' to='" + to.String() + "' version='1.0'>"
	if err := d.send([]byte(header)); err != nil {
		return err
	}
	// d.r is an io.ByteReader, so the decoder reads from it byte by byte
	// and buffers nothing of its own: what it has not read is still in
	// d.r, where upgrade checks it.
	dec := xml.NewDecoder(d.r)
	el, err := d.xmppNext(dec)
	if err != nil {
		return err
	}
	if el.Name.Space != xmppStreams || el.Name.Local != "stream" {
		return &protocolError{proto: "xmpp", msg: "the server's reply is not an XMPP stream", hint: otherProtocol}
	}
	if el, err = d.xmppNext(dec); err != nil {
		return err
	}
	if el.Name.Space != xmppStreams || el.Name.Local != "features" {
		return &protocolError{proto: "xmpp", msg: "the stream does not start with its features: <" + replyText(el.Name.Local) + ">"}
	}
	offered := false
	for depth := 1; depth > 0; {
		tok, err := d.xmppToken(dec)
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 1 && t.Name.Space == xmppTLS && t.Name.Local == "starttls" {
				offered = true
			}
			depth++
		case xml.EndElement:
			depth--
		}
	}
	if !offered {
		return noStartTLS("the stream features list no <starttls/>")
	}
	if err := d.send([]byte("<starttls xmlns='" + xmppTLS + "'/>")); err != nil {
		return err
	}
	if el, err = d.xmppNext(dec); err != nil {
		return err
	}
	switch {
	case el.Name.Space == xmppTLS && el.Name.Local == "proceed":
		return nil
	case el.Name.Space == xmppTLS && el.Name.Local == "failure":
		return noStartTLS("the server answered <starttls/> with <failure/>")
	}
	return &protocolError{proto: "xmpp", msg: "the server answered <starttls/> with <" + replyText(el.Name.Local) + ">"}
}

// xmppNext returns the next start element; a stream error is an error
// naming its condition.
func (d *dialogue) xmppNext(dec *xml.Decoder) (xml.StartElement, error) {
	for {
		tok, err := d.xmppToken(dec)
		if err != nil {
			return xml.StartElement{}, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Space == xmppStreams && t.Name.Local == "error" {
				cond := "unknown condition"
				if c, err := d.xmppNext(dec); err == nil {
					cond = c.Name.Local
				}
				e := &protocolError{proto: "xmpp", msg: "stream error: " + replyText(cond)}
				if cond == "host-unknown" {
					e.hint = "the server does not serve the target's name as an XMPP domain"
				}
				return xml.StartElement{}, e
			}
			return t, nil
		case xml.EndElement:
			if t.Name.Space == xmppStreams && t.Name.Local == "stream" {
				return xml.StartElement{}, &protocolError{proto: "xmpp", msg: "the server closed the stream"}
			}
		}
	}
}

// xmppToken returns the next token. Malformed XML is a protocol error;
// I/O errors are returned as they are, so timeouts and resets are
// classified as in a handshake.
func (d *dialogue) xmppToken(dec *xml.Decoder) (xml.Token, error) {
	tok, err := dec.Token()
	if err == nil {
		return tok, nil
	}
	if _, ok := errors.AsType[*xml.SyntaxError](err); ok && d.lim.N > 0 {
		return nil, &protocolError{proto: "xmpp", msg: replyText(err.Error()), hint: otherProtocol}
	}
	if d.lim.N <= 0 {
		err = io.EOF // the budget ran out, whatever the decoder made of it
	} else if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return nil, d.readErr(err)
}
