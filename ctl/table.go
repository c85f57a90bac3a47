package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// table writes aligned columns (text/tabwriter); an empty cell shows "-".
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		c = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return ' '
			}
			return r
		}, c)
		if c == "" {
			c = "-"
		}
		cells[i] = c
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// fields prints "name: value" lines, aligned.
func fields(w io.Writer, kv ...string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(tw, "%s:\t%s\n", kv[i], v)
	}
	return tw.Flush()
}

// Human units.

// count is a message count: exact below 10,000, then 12.3k, 4.5M, 1.2G.
func count[T ~int | ~int64 | ~uint64](n T) string {
	f := float64(n)
	switch {
	case f < 10_000:
		return fmt.Sprint(n)
	case f < 1e6:
		return trimZero(fmt.Sprintf("%.1f", f/1e3)) + "k"
	case f < 1e9:
		return trimZero(fmt.Sprintf("%.1f", f/1e6)) + "M"
	}
	return trimZero(fmt.Sprintf("%.1f", f/1e9)) + "G"
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }

// bytesIEC is a size in KiB, MiB, GiB...
func bytesIEC(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// span is a duration in at most two units: 45s, 3m12s, 2h5m, 3d4h.
func span(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return twoUnits(s/60, "m", s%60, "s")
	case s < 86400:
		return twoUnits(s/3600, "h", s%3600/60, "m")
	}
	return twoUnits(s/86400, "d", s%86400/3600, "h")
}

func twoUnits(a int64, ua string, b int64, ub string) string {
	if b == 0 {
		return fmt.Sprintf("%d%s", a, ua)
	}
	return fmt.Sprintf("%d%s%d%s", a, ua, b, ub)
}

// seconds is a lag the API gives in whole seconds.
func seconds(s int64) string { return span(time.Duration(s) * time.Second) }

// ago is an ISO time of the API as "3m ago" ("in 20s" ahead of now, "" for
// null or unreadable).
func ago(iso *string, now time.Time) string {
	if iso == nil || *iso == "" {
		return ""
	}
	t, err := time.Parse(time.RFC3339Nano, *iso)
	if err != nil {
		return *iso
	}
	if d := now.Sub(t); d >= 0 {
		return span(d) + " ago"
	}
	return "in " + span(t.Sub(now))
}

// clip shortens s to n runes with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// compact is JSON on one line, clipped.
func compact(raw json.RawMessage, n int) string {
	if len(raw) == 0 {
		return ""
	}
	var buf strings.Builder
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return clip(string(raw), n)
	}
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return clip(strings.TrimSpace(buf.String()), n)
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// nullable is s, or JSON null for "".
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// parseWhen reads a time given on the command line: RFC 3339
// (2026-12-01T09:00:00Z), a date (2026-12-01, UTC), or a duration meaning
// that long ago (90m, 2h). It returns the API's ISO form.
func parseWhen(s string, now time.Time) (string, error) {
	const iso = "2006-01-02T15:04:05.000Z"
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC().Format(iso), nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t.UTC().Format(iso), nil
	}
	if d, err := time.ParseDuration(strings.TrimPrefix(s, "-")); err == nil && d >= 0 {
		return now.Add(-d).UTC().Format(iso), nil
	}
	return "", usagef("%q is not a time: give RFC 3339 (2026-12-01T09:00:00Z), a date, or a duration ago (90m)", s)
}
