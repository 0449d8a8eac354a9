package ct

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/mod/sumdb/tlog"
)

// Read reads log l from position from up to the tree size of its current
// checkpoint and calls found, in log order, with each entry for a watched
// name, once the entry is proven part of the checkpoint's tree. found
// returning an error stops the read with that error.
//
// The Result's Position is where the next read starts. It is returned with
// an error too: it then covers the tiles fully read and reported before the
// failure, so a read that fails halfway is resumed, not restarted. Errors
// name the log's URL; those of data the log's signed tree does not vouch
// for match ErrVerification. Cancelling ctx stops the read.
func (r *Reader) Read(ctx context.Context, l Log, from Position, found func(Entry) error) (Result, error) {
	res := Result{Position: from}
	if err := r.read(ctx, l, &res, found); err != nil {
		return res, fmt.Errorf("ct log %s: %w", l.URL, err)
	}
	return res, nil
}

func (r *Reader) read(ctx context.Context, l Log, res *Result, found func(Entry) error) error {
	body, err := r.get(ctx, l, "checkpoint", maxCheckpointLen)
	if err != nil {
		return err
	}
	cp, err := openCheckpoint(body, l)
	if err != nil {
		return err
	}
	res.Checkpoint = cp.timestamp
	if res.Position.Next == FromTreeSize {
		res.Position.Next = max(cp.tree.N-max(res.Position.Back, 0), 0)
		res.Position.Back = 0
	}
	from := res.Position
	verifier := newTreeVerifier(ctx, r, l, cp.tree)
	// Before the position is checked: a tree smaller than the one read
	// before is the log's fault, not the position's.
	if from.Size > 0 {
		if err := verifier.verifyExtends(from.Size, tlog.Hash(from.Root)); err != nil {
			return err
		}
	}
	if from.Next < 0 || from.Next > cp.tree.N {
		return fmt.Errorf("start position %d is beyond the log's tree size %d (a position kept for another log?)", from.Next, cp.tree.N)
	}
	res.Position.Size, res.Position.Root = cp.tree.N, cp.tree.Hash
	if from.Next == cp.tree.N {
		return nil
	}
	end := cp.tree.N
	if r.MaxEntries > 0 {
		// A tile boundary: every tile before it is full in the tree.
		const w = 1 << tileHeight
		end = min(end, (from.Next+r.MaxEntries+w-1)/w*w)
	}
	return r.readTiles(ctx, l, end, verifier, res, found)
}

// dataTile is a data tile read and parsed, not yet verified.
type dataTile struct {
	n          int64
	leafHashes []byte
	candidates []*candidate
	unparsed   int64
	err        error
}

// readTiles streams the data tiles from res.Position.Next to size (the
// tree's, or a tile boundary within it): up to
// Parallelism tiles are fetched and parsed at once, and each is verified
// and reported in order.
func (r *Reader) readTiles(ctx context.Context, l Log, size int64, v *treeVerifier, res *Result, found func(Entry) error) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	// Each fetch gets a slot in pending, in log order, before it starts:
	// the channel's capacity bounds the tiles held in memory.
	pending := make(chan chan dataTile, r.parallelism()-1)
	wg.Go(func() {
		defer close(pending)
		for n := res.Position.Next >> tileHeight; n<<tileHeight < size; n++ {
			slot := make(chan dataTile, 1)
			select {
			case pending <- slot:
			case <-ctx.Done():
				return
			}
			width := int(min(size-n<<tileHeight, 1<<tileHeight))
			wg.Go(func() { slot <- r.readDataTile(ctx, l, n, width) })
		}
	})
	for slot := range pending {
		dt := <-slot
		if dt.err != nil {
			return dt.err
		}
		if err := v.verifyLeaves(dt.n, dt.leafHashes); err != nil {
			return err
		}
		for _, c := range dt.candidates {
			if c.entry.Index < res.Position.Next {
				continue
			}
			if err := r.findIssuer(ctx, l, c); err != nil {
				return err
			}
			if err := found(c.entry); err != nil {
				return err
			}
		}
		end := dt.n<<tileHeight + int64(len(dt.leafHashes)/tlog.HashSize)
		res.Entries += end - max(res.Position.Next, dt.n<<tileHeight)
		res.Unparsed += dt.unparsed
		res.Position.Next = end
	}
	return ctx.Err()
}

// readDataTile fetches and parses data tile n of the given width.
func (r *Reader) readDataTile(ctx context.Context, l Log, n int64, width int) dataTile {
	t := tlog.Tile{H: tileHeight, L: -1, N: n, W: width}
	body, err := r.getTile(ctx, l, t, r.maxTileBytes())
	if err != nil {
		return dataTile{err: err}
	}
	dt, err := r.parseDataTile(l.Origin, n, width, body)
	if err != nil {
		return dataTile{err: fmt.Errorf("%w: data tile %s: %v", ErrVerification, tilePath(t), err)}
	}
	return dt
}

// parseDataTile parses the width entries of data tile n, computing their
// leaf hashes and keeping those for watched names.
func (r *Reader) parseDataTile(origin string, n int64, width int, body []byte) (dataTile, error) {
	dt := dataTile{n: n, leafHashes: make([]byte, 0, width*tlog.HashSize)}
	s := cryptobyte.String(body)
	var scratch, lower []byte
	for i := range width {
		index := n<<tileHeight + int64(i)
		leaf, err := readTileLeaf(&s)
		if err != nil {
			return dataTile{}, fmt.Errorf("entry %d: %v", index, err)
		}
		if leaf.leafIndex >= 0 && leaf.leafIndex != index {
			return dataTile{}, fmt.Errorf("entry %d says it is entry %d", index, leaf.leafIndex)
		}
		var h tlog.Hash
		h, scratch = leaf.leafHash(scratch)
		dt.leafHashes = append(dt.leafHashes, h[:]...)
		lower = appendLower(lower[:0], leaf.der)
		if !r.Domains.mayMatch(lower) {
			continue
		}
		c, err := r.parseCandidate(origin, index, &leaf)
		if err != nil {
			r.logger().Debug("ct entry not parsed", "log", origin, "index", index, "err", err)
			dt.unparsed++
			continue
		}
		if c != nil {
			dt.candidates = append(dt.candidates, c)
		}
	}
	// A full tile read in place of a gone partial one has more entries.
	if !s.Empty() && width == 1<<tileHeight {
		return dataTile{}, fmt.Errorf("%d bytes after the last entry", len(s))
	}
	return dt, nil
}

// findIssuer sets the entry's issuer certificate from the log's issuers,
// when proven: its key verifies the certificate's signature, or hashes to a
// precertificate's issuer key hash.
func (r *Reader) findIssuer(ctx context.Context, l Log, c *candidate) error {
	for i, fp := range c.chain {
		if i == 2 {
			break // the issuer, or a precertificate signing certificate and its issuer
		}
		issuer, err := r.issuer(ctx, l, fp)
		if errors.Is(err, errNotFound) || errors.Is(err, errIssuerUnparsed) {
			// The spec requires every issuer to be served; one that is not,
			// or that crypto/x509 cannot parse, leaves the issuer unproven
			// rather than the log unread.
			r.logger().Debug("ct issuer not usable", "log", l.URL, "index", c.entry.Index, "err", err)
			return nil
		}
		if err != nil {
			return err
		}
		keyHash := sha256.Sum256(issuer.RawSubjectPublicKeyInfo)
		proven := c.entry.Precert && bytes.Equal(keyHash[:], c.issuerKeyHash) ||
			!c.entry.Precert && c.cert.CheckSignatureFrom(issuer) == nil
		if proven {
			c.entry.Issuer.SHA256 = hex.EncodeToString(fp[:])
			c.entry.Issuer.KeySHA256 = hex.EncodeToString(keyHash[:])
			return nil
		}
	}
	return nil
}

// errIssuerUnparsed is an issuer certificate, as served, that crypto/x509
// cannot parse.
var errIssuerUnparsed = errors.New("not a certificate crypto/x509 parses")

// maxIssuers bounds the issuer certificates cached; real logs hold a few
// hundred.
const maxIssuers = 4096

// issuer returns the issuer certificate of the given fingerprint.
func (r *Reader) issuer(ctx context.Context, l Log, fp [sha256.Size]byte) (*x509.Certificate, error) {
	r.issuersMu.Lock()
	cert, ok := r.issuers[fp]
	r.issuersMu.Unlock()
	if ok {
		return cert, nil
	}
	path := "issuer/" + hex.EncodeToString(fp[:])
	der, err := r.get(ctx, l, path, maxCheckpointLen)
	if err != nil {
		return nil, err
	}
	if sha256.Sum256(der) != fp {
		return nil, fmt.Errorf("%w: %s does not hash to its fingerprint", ErrVerification, path)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, errIssuerUnparsed, err)
	}
	r.issuersMu.Lock()
	defer r.issuersMu.Unlock()
	if r.issuers == nil || len(r.issuers) >= maxIssuers {
		r.issuers = make(map[[sha256.Size]byte]*x509.Certificate)
	}
	r.issuers[fp] = cert
	return cert, nil
}
