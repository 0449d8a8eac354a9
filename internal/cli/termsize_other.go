//go:build !unix

package cli

import "io"

// terminalWidth returns 0: the terminal's width is not known here.
func terminalWidth(io.Writer) int { return 0 }
