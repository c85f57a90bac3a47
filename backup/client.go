package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// Download saves a backup of the cluster that baseURL (a node's HTTP
// address) belongs to at path (of every Raft group it has): streamed to
// path + ".part", verified whole, then renamed; it returns each record's
// header. A file that does not verify is removed.
func Download(ctx context.Context, c *http.Client, baseURL, path string) ([]Header, error) {
	var h []Header
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+"/api/v1/system/backup", nil)
	if err != nil {
		return h, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return h, answerError("backup", resp)
	}
	part := path + ".part"
	f, err := os.Create(part)
	if err != nil {
		return h, err
	}
	_, err = io.Copy(f, resp.Body)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(part)
		return h, fmt.Errorf("backup: receiving: %w", err)
	}
	b, err := Open(part)
	if err != nil {
		os.Remove(part)
		return h, err
	}
	h = b.Headers()
	b.Close()
	return h, os.Rename(part, path)
}

// Upload verifies the backup at path and restores it into the cluster that
// baseURL belongs to, following a follower's answer to the leader. A
// backup of every group of a cluster with --raft-groups is sent record by
// record, each to its group's leader (?group=N); the answer then lists
// each group's.
func Upload(ctx context.Context, c *http.Client, baseURL, path string) (map[string]any, error) {
	b, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	base := strings.TrimRight(baseURL, "/")
	if len(b.Records) == 1 && b.Header.GroupCount() == 1 {
		return uploadRecord(ctx, c, base, "", b, 0)
	}
	var groups []map[string]any
	for i, r := range b.Records {
		out, err := uploadRecord(ctx, c, base, fmt.Sprintf("?group=%d", r.Header.Group), b, i)
		if err != nil {
			return nil, fmt.Errorf("raft group %d (%d of %d restored before it): %w", r.Header.Group, i, len(b.Records), err)
		}
		out["group"] = r.Header.Group
		groups = append(groups, out)
	}
	if len(groups) == 1 {
		return groups[0], nil
	}
	return map[string]any{"restored": true, "groups": groups}, nil
}

// uploadRecord sends record i of b to url's restore (query: ?group=N or
// ""), following a not_leader answer to the group's leader.
func uploadRecord(ctx context.Context, c *http.Client, url, query string, b *File, i int) (map[string]any, error) {
	for hop := 0; hop < 3; hop++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/v1/system/restore"+query, b.RecordBytes(i))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		var out map[string]any
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		_ = json.Unmarshal(body, &out)
		switch {
		case resp.StatusCode == http.StatusOK:
			return out, nil
		case resp.StatusCode == http.StatusConflict && out["code"] == "not_leader":
			leader, _ := out["leaderHttp"].(string)
			if leader == "" {
				return nil, fmt.Errorf("restore: %s has no leader to send the restore to", url)
			}
			if !strings.Contains(leader, "://") {
				leader = "http://" + leader
			}
			url = leader
			continue
		}
		return nil, fmt.Errorf("restore: %s answered %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil, fmt.Errorf("restore: the leader kept moving")
}

func answerError(what string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return fmt.Errorf("%s: %s answered %d: %s", what, resp.Request.URL.Host, resp.StatusCode, strings.TrimSpace(string(body)))
}
