package fsm

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/queen-node/queen-node/command"
)

// Every arm of Command's body has a handler, and every handler an arm
// (dispatch.go's recipe for adding a command).
func TestEveryCommandBodyHasAHandler(t *testing.T) {
	fields := (&command.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("body").Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		cmd := &command.Command{}
		m := cmd.ProtoReflect()
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		if handlerFor(cmd) == nil {
			t.Errorf("command body %s has no handler: register it in dispatch.go", fd.Name())
		}
	}
	if len(handlers) != fields.Len() {
		t.Errorf("%d handlers for %d command bodies", len(handlers), fields.Len())
	}
}
