package nodeproc

import (
	"os"
	"path/filepath"
)

// DirBytes is the size of the regular files under path (or of the file at
// path; 0 when it is gone): what a node's data dir, or a part of it,
// holds.
func DirBytes(path string) int64 {
	var n int64
	filepath.Walk(path, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}
