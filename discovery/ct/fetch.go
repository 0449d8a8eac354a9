package ct

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// tileHeight is the height of every Static CT tile: 256 hashes or entries.
const tileHeight = 8

// errNotFound is a 404, after which a partial tile is looked for as full.
var errNotFound = errors.New("not found (404)")

// get fetches path under the log's monitoring prefix, reading at most max
// bytes of body within the Reader's timeout. The error names the URL.
func (r *Reader) get(ctx context.Context, l Log, path string, max int64) ([]byte, error) {
	u := strings.TrimSuffix(l.URL, "/") + "/" + path
	ctx, cancel := context.WithTimeoutCause(ctx, r.timeout(), fmt.Errorf("no answer within %s (ct timeout)", r.timeout()))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", u, err)
	}
	resp, err := r.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", u, requestError(ctx, err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("get %s: %w", u, errNotFound)
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, fmt.Errorf("get %s: status %s: redirects are not followed (set the log's monitoring URL to where it serves)", u, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("get %s: status %s", u, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("get %s: reading body: %w", u, requestError(ctx, err))
	}
	if int64(len(body)) > max {
		return nil, fmt.Errorf("get %s: body larger than %d bytes", u, max)
	}
	return body, nil
}

// requestError replaces a context error by its cause (which says which
// budget ran out), and strips the URL a *url.Error repeats.
func requestError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

// client is the Reader's client with redirects refused: a log's monitoring
// prefix is configured, not discovered.
func (r *Reader) client() *http.Client {
	c := http.Client{}
	if r.Client != nil {
		c = *r.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// tilePath is a tile's path under the monitoring prefix: the tlog tile path
// without its height element, which Static CT fixes at 8
// ("tile/8/0/x001/234" becomes "tile/0/x001/234").
func tilePath(t tlog.Tile) string {
	return "tile/" + strings.TrimPrefix(t.Path(), fmt.Sprintf("tile/%d/", tileHeight))
}

// getTile fetches a tile; a partial tile that is gone (the log has grown
// past it) is read from the full tile, as the spec recommends.
func (r *Reader) getTile(ctx context.Context, l Log, t tlog.Tile, max int64) ([]byte, error) {
	body, err := r.get(ctx, l, tilePath(t), max)
	if errors.Is(err, errNotFound) && t.W < 1<<tileHeight {
		full := t
		full.W = 1 << tileHeight
		if b, ferr := r.get(ctx, l, tilePath(full), max); ferr == nil {
			return b, nil
		}
	}
	return body, err
}
