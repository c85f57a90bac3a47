package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/pipeline"
	"github.com/queen-node/queen-node/request"
)

// codeOf is the Kafka error code of a failed write or read: retriable
// codes for what a retry can fix (no leader, a timeout, an outcome the
// node does not know: an idempotent producer's retry is recognised),
// authorisation codes for a token that does not reach it.
func codeOf(err error, forbidden int16) int16 {
	var re *request.Error
	switch {
	case err == nil:
		return 0
	case errors.Is(err, cluster.ErrNotLeader), errors.Is(err, cluster.ErrNoLeader):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, cluster.ErrOutcomeUnknown), errors.Is(err, cluster.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, cluster.ErrOverloaded):
		return kerr.ThrottlingQuotaExceeded.Code
	case errors.Is(err, cluster.ErrStorageFull):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, cluster.ErrShutdown):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, pipeline.ErrForbidden):
		return forbidden
	case errors.As(err, &re):
		switch re.Kind {
		case request.Forbidden:
			return forbidden
		case request.TooLarge:
			return kerr.MessageTooLarge.Code
		case request.Invalid:
			return kerr.InvalidRequest.Code
		case request.Refused:
			return kerr.PolicyViolation.Code
		case request.Unavailable, request.Overloaded, request.RateLimited:
			return kerr.RequestTimedOut.Code
		case request.StorageFull:
			return kerr.KafkaStorageError.Code
		}
	}
	return kerr.UnknownServerError.Code
}

// remoteKey carries a connection's address to the audit lines of its writes.
type remoteKey struct{}

func withRemote(ctx context.Context, remote string) context.Context {
	return context.WithValue(ctx, remoteKey{}, remote)
}

func callOf(ctx context.Context) pipeline.Call {
	r, _ := ctx.Value(remoteKey{}).(string)
	return pipeline.Call{Remote: r}
}

// clientIDKey carries a request's client id (its header's) to the group
// coordinator, which names members after it as Kafka does.
type clientIDKey struct{}

func clientIDOf(ctx context.Context) string {
	if s, _ := ctx.Value(clientIDKey{}).(string); s != "" {
		return s
	}
	return "member"
}
