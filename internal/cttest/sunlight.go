package cttest

import (
	_ "embed"
	"fmt"

	"golang.org/x/crypto/cryptobyte"
)

// sunlightDataTile is the first data tile of a log run by Sunlight (see
// testdata/README).
//
//go:embed testdata/navigli2025h2/tile/data/000
var sunlightDataTile []byte

// SunlightDataTile returns a copy of the first data tile of Sunlight's
// navigli2025h2 log: 256 real certificates and precertificates as another
// implementation encoded them. Append them with AppendTileLeaves.
func SunlightDataTile() []byte {
	return append([]byte(nil), sunlightDataTile...)
}

// AppendTileLeaves logs the TileLeaf entries of a data tile as they are
// (their timestamps and leaf_index extensions included), and signs a new
// checkpoint. Issuers the entries name are not served unless appended with
// other entries.
func (l *Log) AppendTileLeaves(tile []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := cryptobyte.String(tile)
	for !s.Empty() {
		start := s
		var entryType uint16
		var skip cryptobyte.String
		ok := s.Skip(8) && s.ReadUint16(&entryType)
		if entryType == 1 {
			ok = ok && s.Skip(32)
		}
		ok = ok && s.ReadUint24LengthPrefixed(&skip) && s.ReadUint16LengthPrefixed(&skip)
		if entryType == 1 {
			ok = ok && s.ReadUint24LengthPrefixed(&skip)
		}
		ok = ok && s.ReadUint16LengthPrefixed(&skip)
		if !ok {
			return fmt.Errorf("malformed TileLeaf at entry %d", l.size)
		}
		leaf := []byte(start[:len(start)-len(s)])
		l.explicit[l.size] = leaf
		if err := l.appendLeaf(leaf); err != nil {
			return err
		}
	}
	return l.sign()
}
