package cluster

import (
	"testing"

	"github.com/queen-node/queen-node/command"
)

// A lock call adds KV rows: a nearly full disk refuses it with the other
// writes that add data.
func TestLockCallsAddData(t *testing.T) {
	if !addsData(&command.Command{Body: &command.Command_Locks{Locks: &command.Locks{}}}) {
		t.Fatal("a locks command does not count as adding data")
	}
}
