package nodeproc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/queen-node/queen-node/cluster"
)

// probeTimeout bounds each request nodeproc makes itself.
const probeTimeout = 3 * time.Second

// Health is GET /health (200 when the node can serve writes, 503 when not;
// both carry the Raft view).
type Health struct {
	Status string     `json:"status"`
	NodeID string     `json:"nodeId"`
	Raft   HealthRaft `json:"raft"`
}

// HealthRaft is the raft object of GET /health.
type HealthRaft struct {
	Role     string `json:"role"`
	LeaderID string `json:"leaderId"`
	Term     uint64 `json:"term"`
	Applied  uint64 `json:"applied"`
	Commit   uint64 `json:"commit"`
	Lag      uint64 `json:"lag"`
	// StateApplied is the last entry the node's state holds (it trails
	// Applied while apply waits for disk space).
	StateApplied uint64 `json:"stateApplied"`
}

// Do sends one request to the node (a JSON body when body is not nil) and
// returns the status and the body. It is bounded by ctx and by 3 s.
func (n *Node) Do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	return doAs(ctx, n.hc, method, n.URL()+path, body, n.spec.Token)
}

func do(ctx context.Context, hc *http.Client, method, url string, body []byte) (int, []byte, error) {
	return doAs(ctx, hc, method, url, body, "")
}

// doAs is do with a bearer token ("" = none).
func doAs(ctx context.Context, hc *http.Client, method, url string, body []byte, token string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// Health reads GET /health, whatever its status.
func (n *Node) Health(ctx context.Context) (Health, error) {
	h, err := health(ctx, n.hc, n.URL())
	if err != nil {
		return h, fmt.Errorf("%s %w", n.spec.ID, err)
	}
	return h, nil
}

// HealthURL reads baseURL/health, whatever its status: for a node that
// nodeproc did not start.
func HealthURL(ctx context.Context, baseURL string) (Health, error) {
	return health(ctx, http.DefaultClient, strings.TrimRight(baseURL, "/"))
}

func health(ctx context.Context, hc *http.Client, base string) (Health, error) {
	var h Health
	_, b, err := do(ctx, hc, http.MethodGet, base+"/health", nil)
	if err == nil {
		err = json.Unmarshal(b, &h)
	}
	if err != nil {
		return h, fmt.Errorf("/health: %w", err)
	}
	return h, nil
}

// ClusterView reads GET /api/v1/system/cluster: the node's view of the
// cluster.
func (n *Node) ClusterView(ctx context.Context) (cluster.ClusterView, error) {
	var v cluster.ClusterView
	status, b, err := n.Do(ctx, http.MethodGet, "/api/v1/system/cluster", nil)
	switch {
	case err != nil:
	case status != http.StatusOK:
		err = fmt.Errorf("HTTP %d %s", status, bytes.TrimSpace(b))
	default:
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		return v, fmt.Errorf("%s cluster view: %w", n.spec.ID, err)
	}
	return v, nil
}

// WaitHealthy polls GET /health until it answers 200, for at most within;
// it fails at once when the process exits (with the end of its log).
func (n *Node) WaitHealthy(ctx context.Context, within time.Duration) error {
	return waitHealthy(ctx, n.hc, n.URL(), within, func() error {
		if !n.Exited() {
			return nil
		}
		return fmt.Errorf("nodeproc: %s exited before it was healthy (%v); its log ends:\n%s", n.spec.ID, n.ExitErr(), n.Tail(10))
	})
}

// WaitHealthyURL polls baseURL/health until it answers 200, for at most
// within: for a node that nodeproc did not start.
func WaitHealthyURL(ctx context.Context, baseURL string, within time.Duration) error {
	return waitHealthy(ctx, &http.Client{}, strings.TrimRight(baseURL, "/"), within, nil)
}

func waitHealthy(ctx context.Context, hc *http.Client, base string, within time.Duration, gone func() error) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	last := "no answer"
	for {
		if gone != nil {
			if err := gone(); err != nil {
				return err
			}
		}
		status, b, err := do(ctx, hc, http.MethodGet, base+"/health", nil)
		if err == nil && status == http.StatusOK {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("HTTP %d %s", status, bytes.TrimSpace(b))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodeproc: %s/health not 200 after %v: %s", base, within, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// LogSize is the size of the node's log now (an offset for LogSince).
func (n *Node) LogSize() int64 {
	fi, err := os.Stat(n.spec.LogPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// LogSince is the node's log from offset on.
func (n *Node) LogSince(offset int64) string {
	f, err := os.Open(n.spec.LogPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// Tail is the last lines lines of the node's log (from its last MiB).
func (n *Node) Tail(lines int) string {
	const window = 1 << 20
	off := max(n.LogSize()-window, 0)
	s := strings.TrimRight(n.LogSince(off), "\n")
	if s == "" {
		return ""
	}
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n") + "\n"
}
