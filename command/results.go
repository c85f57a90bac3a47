package command

import (
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// responseArms maps each result type to its field in Response's result
// oneof. A new command's result needs only its arm in results.proto:
// Wrap and Unwrap find it here.
// (Computed on first use: the descriptors exist only once the generated
// files' init functions have run.)
var responseArms = sync.OnceValue(func() map[protoreflect.FullName]protoreflect.FieldDescriptor {
	arms := map[protoreflect.FullName]protoreflect.FieldDescriptor{}
	fields := (&Response{}).ProtoReflect().Descriptor().Oneofs().ByName("result").Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if _, dup := arms[fd.Message().FullName()]; dup {
			panic("command: two Response arms carry " + fd.Message().FullName())
		}
		arms[fd.Message().FullName()] = fd
	}
	return arms
})

func resultOneof() protoreflect.OneofDescriptor {
	return (&Response{}).ProtoReflect().Descriptor().Oneofs().ByName("result")
}

// Wrap puts a command's result into the Response envelope, for storing it
// (idempotency) or sending it over the wire (forwarding). A Response is
// returned as it is; nil wraps to an empty Response.
func Wrap(m proto.Message) *Response {
	switch v := m.(type) {
	case *Response:
		return v
	case nil:
		return &Response{}
	}
	fd, ok := responseArms()[m.ProtoReflect().Descriptor().FullName()]
	if !ok {
		panic(fmt.Sprintf("command: no Response arm for result %T", m))
	}
	r := &Response{}
	r.ProtoReflect().Set(fd, protoreflect.ValueOfMessage(m.ProtoReflect()))
	return r
}

// Unwrap returns the typed result inside a Response, or the Response itself
// when it carries none (an internal error).
func Unwrap(r *Response) proto.Message {
	fd := r.ProtoReflect().WhichOneof(resultOneof())
	if fd == nil {
		return r
	}
	return r.ProtoReflect().Get(fd).Message().Interface()
}
