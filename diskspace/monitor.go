package diskspace

import (
	"log/slog"
	"sync/atomic"
	"syscall"
	"time"
)

// Free is the space available to this process on the filesystem of path.
func Free(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// Monitor samples the free space of one path.
type Monitor struct {
	path    string
	minFree uint64
	log     *slog.Logger
	free    atomic.Uint64
	stop    chan struct{}
	paused  atomic.Bool
}

// SampleInterval is how often Run samples.
const SampleInterval = 250 * time.Millisecond

// New watches path; minFree 0 turns every check off.
func New(path string, minFree uint64, log *slog.Logger) *Monitor {
	if log == nil {
		log = slog.Default()
	}
	m := &Monitor{path: path, minFree: minFree, log: log, stop: make(chan struct{})}
	m.sample()
	if minFree > 0 {
		go m.run()
	}
	return m
}

// Close stops sampling and releases a waiting apply.
func (m *Monitor) Close() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
}

func (m *Monitor) sample() uint64 {
	f, err := Free(m.path)
	if err != nil {
		m.log.Warn("cannot read the data disk's free space", "path", m.path, "err", err)
		f = ^uint64(0) // unknown: never refuse on a reading we do not have
	}
	m.free.Store(f)
	return f
}

func (m *Monitor) run() {
	t := time.NewTicker(SampleInterval)
	defer t.Stop()
	low := false
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		f := m.sample()
		if now := f < m.minFree; now != low {
			low = now
			if low {
				m.log.Error("data disk nearly full: refusing writes that add data (507 storage_full)", "path", m.path,
					"free_bytes", f, "min_free_bytes", m.minFree)
			} else {
				m.log.Info("data disk has room again: accepting writes", "path", m.path, "free_bytes", f)
			}
		}
	}
}

// FreeBytes is the last sample.
func (m *Monitor) FreeBytes() uint64 { return m.free.Load() }

// Low reports whether writes that add data should be refused.
func (m *Monitor) Low() bool { return m.minFree > 0 && m.free.Load() < m.minFree }

// Paused reports whether apply is waiting for space.
func (m *Monitor) Paused() bool { return m.paused.Load() }

// AwaitApply returns when there is room to apply a batch: at once unless
// the free space is below half of MinFree, else when it is back above it.
// The caller applies nothing meanwhile, so no entry is skipped and none
// fails halfway. It returns false when the monitor was closed (the node
// stops) while the disk was still full: the caller must not apply.
func (m *Monitor) AwaitApply() bool {
	// The sampler's last reading (at most SampleInterval old) decides; the
	// margin, half of MinFree, is far more than a batch writes in that time.
	if m.minFree == 0 || m.free.Load() >= m.minFree/2 || m.sample() >= m.minFree/2 {
		return true
	}
	m.paused.Store(true)
	defer m.paused.Store(false)
	m.log.Error("data disk full: applying paused until space is freed", "path", m.path,
		"free_bytes", m.free.Load(), "resume_above_bytes", m.minFree/2)
	for m.sample() < m.minFree/2 {
		select {
		case <-m.stop:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	m.log.Info("data disk has room again: applying resumed", "path", m.path, "free_bytes", m.free.Load())
	return true
}
