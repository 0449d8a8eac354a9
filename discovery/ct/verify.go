package ct

import (
	"context"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// hashTileCacheSize bounds the verified hash tiles kept during one read.
// Reading in order needs the right edge of the tree (a partial tile per
// level) and one parent per level: a few tiles, whatever the log's size.
const hashTileCacheSize = 32

// tileReader is the tlog.TileReader of one read: level-0 tiles computed from
// the data tile being verified, other hash tiles fetched from the log and,
// once tlog has verified them, kept in a small cache.
//
// It holds the read's context because tlog.TileReader takes none; it lives
// only as long as that read, and is used by one goroutine.
type tileReader struct {
	ctx    context.Context
	reader *Reader
	log    Log

	// computed is the level-0 tile under verification, from its entries.
	computed     tlog.Tile
	computedData []byte

	cache map[tlog.Tile]cachedTile
	clock int64

	// fetchErr is the last failure to fetch a tile, told apart from a
	// tile that does not verify.
	fetchErr error
}

type cachedTile struct {
	data     []byte
	lastUsed int64
}

func (tr *tileReader) Height() int { return tileHeight }

func (tr *tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	data := make([][]byte, len(tiles))
	for i, t := range tiles {
		tr.clock++
		if t == tr.computed && tr.computedData != nil {
			data[i] = tr.computedData
			continue
		}
		if c, ok := tr.cache[t]; ok {
			c.lastUsed = tr.clock
			tr.cache[t] = c
			data[i] = c.data
			continue
		}
		b, err := tr.reader.getTile(tr.ctx, tr.log, t, int64(1<<tileHeight)*tlog.HashSize)
		if err != nil {
			tr.fetchErr = err
			return nil, err
		}
		// A full tile read in place of a partial one holds more hashes.
		if len(b) < t.W*tlog.HashSize || (len(b) != t.W*tlog.HashSize && len(b) != (1<<tileHeight)*tlog.HashSize) {
			tr.fetchErr = fmt.Errorf("%w: hash tile %s holds %d bytes, not %d", ErrVerification, tilePath(t), len(b), t.W*tlog.HashSize)
			return nil, tr.fetchErr
		}
		data[i] = b[:t.W*tlog.HashSize]
	}
	return data, nil
}

// SaveTiles keeps the tiles tlog has verified, evicting the least recently
// used beyond hashTileCacheSize.
func (tr *tileReader) SaveTiles(tiles []tlog.Tile, data [][]byte) {
	for i, t := range tiles {
		if t == tr.computed {
			continue
		}
		if _, ok := tr.cache[t]; ok {
			continue
		}
		tr.clock++
		tr.cache[t] = cachedTile{data: data[i], lastUsed: tr.clock}
	}
	for len(tr.cache) > hashTileCacheSize {
		var oldest tlog.Tile
		first := true
		for t, c := range tr.cache {
			if first || c.lastUsed < tr.cache[oldest].lastUsed {
				oldest, first = t, false
			}
		}
		delete(tr.cache, oldest)
	}
}

// verifier checks data tiles against one checkpoint's tree.
type treeVerifier struct {
	tree   tlog.Tree
	tiles  *tileReader
	hashes tlog.HashReader
}

func newTreeVerifier(ctx context.Context, r *Reader, l Log, tree tlog.Tree) *treeVerifier {
	tr := &tileReader{ctx: ctx, reader: r, log: l, cache: make(map[tlog.Tile]cachedTile)}
	return &treeVerifier{tree: tree, tiles: tr, hashes: tlog.TileHashReader(tree, tr)}
}

// verifyLeaves checks that leafHashes, the record hashes of data tile n's
// entries, are the tree's level-0 tile n. tlog checks the tile against its
// parent tile, and the parents up to the tree's root hash.
func (v *treeVerifier) verifyLeaves(n int64, leafHashes []byte) error {
	t := tlog.Tile{H: tileHeight, L: 0, N: n, W: len(leafHashes) / tlog.HashSize}
	v.tiles.computed, v.tiles.computedData = t, leafHashes
	v.tiles.fetchErr = nil
	defer func() { v.tiles.computed, v.tiles.computedData = tlog.Tile{}, nil }()
	if _, err := v.hashes.ReadHashes([]int64{tlog.StoredHashIndex(0, n<<tileHeight)}); err != nil {
		if v.tiles.fetchErr != nil {
			return v.tiles.fetchErr
		}
		return fmt.Errorf("%w: data tile %s (entries %d to %d) does not match the checkpoint's root hash (tree size %d): %v",
			ErrVerification, tilePath(tlog.Tile{H: tileHeight, L: -1, N: n, W: t.W}), n<<tileHeight, n<<tileHeight+int64(t.W)-1, v.tree.N, err)
	}
	return nil
}

// verifyExtends checks that the tree extends an earlier one of size and
// root: the earlier root is recomputed from the new tree's verified tiles.
func (v *treeVerifier) verifyExtends(size int64, root tlog.Hash) error {
	if size > v.tree.N {
		return fmt.Errorf("%w: the log's tree shrank from %d to %d entries", ErrVerification, size, v.tree.N)
	}
	v.tiles.fetchErr = nil
	got, err := tlog.TreeHash(size, v.hashes)
	if err != nil && v.tiles.fetchErr != nil {
		return v.tiles.fetchErr
	}
	if err != nil {
		return fmt.Errorf("proving tree size %d extends %d: %w", v.tree.N, size, err)
	}
	if got != root {
		return fmt.Errorf("%w: the log's tree of %d entries does not extend the one of %d read before (a forked or rewritten log)", ErrVerification, v.tree.N, size)
	}
	return nil
}
