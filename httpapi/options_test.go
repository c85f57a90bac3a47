package httpapi

import (
	"testing"

	"github.com/queen-node/queen-node/command"
)

// Every option a view picks is one optionsOut renders (directly or by its
// alias), so no view shows a null where a value is stored.
func TestPickedOptionsAreRendered(t *testing.T) {
	limit := int64(7)
	o := &command.QueueOptions{RetryLimit: &limit}
	all := optionsOut(o)
	for _, names := range [][]string{statusConfigOptions, messageConfigOptions} {
		got := optionsPick(o, names...)
		for _, name := range names {
			key := name
			if a, ok := optionAliases[name]; ok {
				key = a
			}
			if _, ok := all[key]; !ok || got[name] != all[key] {
				t.Fatalf("%s (%s): picked %v, rendered %v", name, key, got[name], all[key])
			}
		}
	}
	if got := optionsPick(o, "retryLimit", "maxQueueSize"); got["retryLimit"] != int64(7) || got["maxQueueSize"] != o.GetMaxSize() {
		t.Fatalf("picked %v", got)
	}
}
