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
// address) belongs to at path: streamed to path + ".part", verified whole,
// then renamed. A file that does not verify is removed.
func Download(ctx context.Context, c *http.Client, baseURL, path string) (Header, error) {
	var h Header
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
	h = b.Header
	b.Close()
	return h, os.Rename(part, path)
}

// Upload verifies the backup at path and restores it into the cluster that
// baseURL belongs to, following a follower's answer to the leader.
func Upload(ctx context.Context, c *http.Client, baseURL, path string) (map[string]any, error) {
	b, err := Open(path)
	if err != nil {
		return nil, err
	}
	b.Close()
	url := strings.TrimRight(baseURL, "/")
	for hop := 0; hop < 3; hop++ {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/v1/system/restore", f)
		if err != nil {
			f.Close()
			return nil, err
		}
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := c.Do(req)
		f.Close()
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
