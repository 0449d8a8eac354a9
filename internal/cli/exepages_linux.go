package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseExecutablePages unmaps, from this process only, the read-only
// pages of its own executable (code, constants, the runtime's function
// tables) that are mapped in, so that pages touched once stop counting in
// its resident memory. The kernel maps each touched page with up to 64 KiB
// or a large folio around it, so what is mapped grows with everything the
// process has ever run, not with what it runs now:
//
//   - Package initialisation of the hundreds of packages linked in touches
//     a little of each, scattered over the 80 MB binary: about 23 MiB of
//     the file is mapped after start-up (Main releases it).
//   - A phase of work maps the code of the phases before it: at the end of
//     probing 100,000 endpoints, 17–24 MiB of the file are mapped, of which
//     building and writing the report use about 10 (giveBackMemory
//     releases it at the phase boundaries).
//
// The pages stay in the page cache, and whatever runs next maps them again
// on first use, as a minor fault: about a millisecond for the few thousand
// pages a phase needs. The writable mapping (initialised data) is left
// alone: dropping pages written since start-up would lose what was
// written. Read-only mappings of the executable hold nothing but the file's
// own bytes, which cannot change while it runs (writing to a running
// executable fails with ETXTBSY).
func releaseExecutablePages() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	s := bufio.NewScanner(bytes.NewReader(maps))
	for s.Scan() {
		// address perms offset dev inode path
		f := strings.Fields(s.Text())
		if len(f) != 6 || f[5] != exe || (f[1] != "r-xp" && f[1] != "r--p") {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return fmt.Errorf("/proc/self/maps: unexpected line %q", s.Text())
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_DONTNEED); errno != 0 {
			return fmt.Errorf("madvise(MADV_DONTNEED) of %s's %s mapping %s: %w", exe, f[1], f[0], errno)
		}
	}
	return s.Err()
}
