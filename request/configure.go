package request

import (
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/queen-node/queen-node/command"
)

// Configure is POST /api/v1/configure as a front end decoded it (spec
// §4.1). Options are the options named (an unnamed one keeps its value:
// configure merges); a front end sets them by their spec names with
// SetOption.
type Configure struct {
	Queue     string
	Namespace *string
	Task      *string
	Options   *command.QueueOptions
}

// ConfigureQueue validates a configure: options are sizes or durations (never
// negative, at most about 100 years; retryDelay is in milliseconds), except
// priority, which may be negative.
func ConfigureQueue(in Configure) (*command.Configure, error) {
	if err := CheckName("queue", in.Queue); err != nil {
		return nil, err
	}
	out := &command.Configure{Queue: in.Queue, Options: in.Options}
	if out.Options == nil {
		out.Options = &command.QueueOptions{}
	}
	if in.Namespace != nil {
		out.Namespace, out.HasNamespace = *in.Namespace, true
	}
	if in.Task != nil {
		out.Task, out.HasTask = *in.Task, true
	}
	var err error
	out.Options.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.Int64Kind {
			return true
		}
		name := fd.JSONName()
		n, limit := v.Int(), int64(MaxSeconds)
		if name == "retryDelay" || name == "retryDelayMax" {
			limit = MaxSeconds * 1000
		}
		switch {
		case n < 0 && name != "priority":
			err = Bad("options." + name + " must not be negative")
		case n > limit || n < -limit:
			err = Bad("options." + name + " is too large")
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// OptionKind says what an option named by its spec name takes; ok=false
// for a name the API does not know (ignored, spec §4.1).
func OptionKind(name string) (isBool, ok bool) {
	fd := optionFields()[name]
	if fd == nil {
		return false, false
	}
	return fd.Kind() == protoreflect.BoolKind, true
}

// SetOption sets the option with the spec name name (an integer or a
// boolean, as OptionKind says).
func SetOption(o *command.QueueOptions, name string, v any) {
	fd := optionFields()[name]
	switch x := v.(type) {
	case int64:
		o.ProtoReflect().Set(fd, protoreflect.ValueOfInt64(x))
	case bool:
		o.ProtoReflect().Set(fd, protoreflect.ValueOfBool(x))
	}
}

var (
	optionFieldsOnce   sync.Once
	optionFieldsByName map[string]protoreflect.FieldDescriptor
)

// optionFields are the queue options by their spec (JSON) names.
func optionFields() map[string]protoreflect.FieldDescriptor {
	optionFieldsOnce.Do(func() {
		fields := (&command.QueueOptions{}).ProtoReflect().Descriptor().Fields()
		optionFieldsByName = make(map[string]protoreflect.FieldDescriptor, fields.Len())
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			optionFieldsByName[fd.JSONName()] = fd
		}
	})
	return optionFieldsByName
}

// ExtendLease validates POST /api/v1/lease/:leaseId/extend (spec §4.6):
// seconds 1..604800, 60 when not given.
func ExtendLease(leaseID string, seconds int64, given bool) (*command.ExtendLease, error) {
	if leaseID == "" {
		return nil, Bad("leaseId is required")
	}
	if err := CheckName("leaseId", leaseID); err != nil { // from the path: any bytes
		return nil, err
	}
	if !given {
		seconds = DefaultExtendSeconds
	}
	if seconds <= 0 || seconds > MaxExtendSeconds {
		return nil, Bad("seconds must be an integer between 1 and 604800")
	}
	return &command.ExtendLease{LeaseId: leaseID, Seconds: seconds}, nil
}

// DeleteQueue validates DELETE /api/v1/resources/queues/:queue.
func DeleteQueue(queue string) (*command.DeleteQueue, error) {
	if err := CheckName("queue", queue); err != nil {
		return nil, err
	}
	return &command.DeleteQueue{Queue: queue}, nil
}

// SetSwitches validates POST /api/v1/system/kv-timers (addendum §4.4): at
// least one switch named.
func SetSwitches(kv, timersSchedule, timersFire *bool) (*command.SetSwitches, error) {
	if kv == nil && timersSchedule == nil && timersFire == nil {
		return nil, Bad("name at least one of kv, timersSchedule, timersFire (booleans)")
	}
	return &command.SetSwitches{KvEnabled: kv, TimersScheduleEnabled: timersSchedule, TimersFireEnabled: timersFire}, nil
}
