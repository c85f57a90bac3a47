package diskspace

import (
	"testing"
	"time"
)

func TestFreeReadsTheFilesystem(t *testing.T) {
	f, err := Free(t.TempDir())
	if err != nil || f == 0 {
		t.Fatalf("free %d, %v", f, err)
	}
	if _, err := Free("/no/such/dir"); err == nil {
		t.Fatal("a missing path has free space")
	}
}

func TestOffNeverRefusesOrPauses(t *testing.T) {
	m := New(t.TempDir(), 0, nil)
	defer m.Close()
	if m.Low() {
		t.Fatal("minFree 0 refused")
	}
	if !m.AwaitApply() {
		t.Fatal("minFree 0 held apply")
	}
}

// With a threshold above the disk's size, writes are refused and apply
// waits until the monitor closes (which is how a shutdown releases it).
func TestBelowTheThresholdApplyWaits(t *testing.T) {
	dir := t.TempDir()
	free, _ := Free(dir)
	m := New(dir, free*4+1<<40, nil)
	if !m.Low() {
		t.Fatal("not low below the threshold")
	}
	done := make(chan struct{})
	var ok bool
	go func() { ok = m.AwaitApply(); close(done) }()
	select {
	case <-done:
		t.Fatal("apply did not wait")
	case <-time.After(300 * time.Millisecond):
	}
	if !m.Paused() {
		t.Fatal("waiting apply not reported as paused")
	}
	m.Close()
	select {
	case <-done:
		if ok {
			t.Fatal("released by Close with the disk still full, AwaitApply said apply")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the waiting apply")
	}
	// Above the threshold: no wait.
	m2 := New(dir, 1, nil)
	defer m2.Close()
	if !m2.AwaitApply() || m2.Low() || m2.Paused() {
		t.Fatal("low with room to spare")
	}
}
