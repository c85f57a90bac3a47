package tenant

import (
	"fmt"
	"log/slog"
	"sync"
)

// Source is what a front end knows of a request's tenant.
type Source struct {
	Claim       string // the token's tenant claim: a name, All, or "" (none, or JWT off)
	Header      string // the x-queen-tenant header (gRPC metadata), "" = none
	TrustHeader bool   // the node runs with --trust-tenant-header
}

// Resolve is the one rule for a request's tenant, for every front end:
//   - a token's claim names it, and no header overrides it;
//   - an admin token of every tenant (All) reads across tenants, and its
//     writes go to the tenant the header names (any admin of every tenant
//     may choose), or to the default tenant;
//   - without a claim, the header names it only when the node trusts the
//     header (a proxy in front sets it); otherwise the header is ignored
//     (ignored reports it, for a log line) and the tenant is the default.
//
// A header that is read must be a valid name (the error states the rule).
func Resolve(s Source) (name string, ignored bool, err error) {
	switch {
	case s.Claim == All:
		if s.Header == "" {
			return Default, false, nil
		}
		return checked(s.Header)
	case s.Claim != "":
		return s.Claim, s.Header != "" && s.Header != s.Claim, nil
	case s.Header == "":
		return Default, false, nil
	case !s.TrustHeader:
		return Default, true, nil
	}
	return checked(s.Header)
}

func checked(header string) (string, bool, error) {
	if err := Valid(header); err != nil {
		return "", false, fmt.Errorf("header %s: %w", Header, err)
	}
	return header, false, nil
}

// Door is one front end's use of Resolve: it trusts the header or not, and
// says once in its log that it ignored one (a client or proxy that sets
// it without --trust-tenant-header is misconfigured, and every one of its
// requests goes to the default tenant).
type Door struct {
	TrustHeader bool
	Log         *slog.Logger // nil = slog.Default()
	Front       string       // "http", "grpc", "kafka": for the log line
	once        sync.Once
}

// Resolve is Resolve for a request of this front end.
func (d *Door) Resolve(claim, header string) (string, error) {
	name, ignored, err := Resolve(Source{Claim: claim, Header: header, TrustHeader: d.TrustHeader})
	if ignored {
		d.once.Do(func() {
			log := d.Log
			if log == nil {
				log = slog.Default()
			}
			why := "the node does not trust the header (start it with --trust-tenant-header behind a proxy that sets it)"
			if claim != "" {
				why = "the token's tenant claim names the tenant, and a header never overrides it"
			}
			log.Warn("a request's "+Header+" header was ignored; logged once", "front", d.Front, "header", header,
				"tenant", name, "why", why)
		})
	}
	return name, err
}
