//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

// allocatedBytes is the disk space a file occupies (st_blocks * 512).
func allocatedBytes(info fs.FileInfo) (int64, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int64(st.Blocks) * 512, true
}
