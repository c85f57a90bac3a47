package lossyfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/queen-node/queen-node/store"
)

// mount mounts a fresh lossyfs for a test (skipping where FUSE is
// genuinely unavailable) and unmounts it at the end.
func mount(t *testing.T) (m *mounted) {
	t.Helper()
	if ok, why := Available(); !ok {
		t.Skipf("lossyfs cannot be mounted on this machine: %s", why)
	}
	dir := t.TempDir()
	m = &mounted{t: t, backing: filepath.Join(dir, "disk"), dir: filepath.Join(dir, "mnt")}
	os.Mkdir(m.backing, 0o755)
	os.Mkdir(m.dir, 0o755)
	m.remount()
	t.Cleanup(func() {
		if m.fs != nil {
			if err := m.fs.Unmount(); err != nil {
				t.Errorf("unmount: %v", err)
			}
		}
	})
	return m
}

type mounted struct {
	t       *testing.T
	backing string
	dir     string
	fs      *FS
}

func (m *mounted) remount() {
	m.t.Helper()
	f, err := Mount(m.backing, m.dir, nil)
	if err != nil {
		m.t.Fatal(err)
	}
	m.fs = f
}

func (m *mounted) path(name string) string { return filepath.Join(m.dir, name) }

// powerLoss drops the unsynced data and mounts the disk again.
func (m *mounted) powerLoss() Loss {
	m.t.Helper()
	loss, err := m.fs.PowerLoss()
	m.fs = nil
	if err != nil {
		m.t.Fatal(err)
	}
	m.remount()
	return loss
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUnsyncedWriteIsLost(t *testing.T) {
	m := mount(t)
	if err := os.WriteFile(m.path("a"), []byte("not synced"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, m.path("a")); string(got) != "not synced" {
		t.Fatalf("before the power loss: %q", got)
	}
	loss := m.powerLoss()
	if loss.Pages != 1 || loss.PerFile["a"] != 1 {
		t.Fatalf("loss = %+v, want one page of a", loss)
	}
	// The create is metadata and survives; the data does not.
	got, err := os.ReadFile(m.path("a"))
	if err != nil {
		t.Fatalf("the created file is gone: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("after the power loss a holds %q, want nothing", got)
	}
}

func TestFsyncedWriteSurvives(t *testing.T) {
	m := mount(t)
	f, err := os.Create(m.path("a"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("synced."))
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte(" not synced"))
	f.Close()
	if got := mustRead(t, m.path("a")); string(got) != "synced. not synced" {
		t.Fatalf("before the power loss: %q", got)
	}
	m.powerLoss()
	if got := mustRead(t, m.path("a")); string(got) != "synced." {
		t.Fatalf("after the power loss: %q, want %q", got, "synced.")
	}

	// fdatasync through another descriptor (read-only even) makes the
	// file's data durable too: fsync is per file, not per descriptor.
	w, _ := os.OpenFile(m.path("a"), os.O_WRONLY|os.O_APPEND, 0)
	w.Write([]byte(" more"))
	r, _ := os.Open(m.path("a"))
	if err := syscall.Fdatasync(int(r.Fd())); err != nil {
		t.Fatal(err)
	}
	r.Close()
	w.Close()
	// A file closed without fsync keeps its data across a process crash
	// (same mount) ...
	os.WriteFile(m.path("b"), []byte("page cache"), 0o644)
	if got := mustRead(t, m.path("b")); string(got) != "page cache" {
		t.Fatalf("reopened b: %q", got)
	}
	if m.fs.Unsynced() != 1 {
		t.Fatalf("unsynced pages = %d, want 1 (b)", m.fs.Unsynced())
	}
	// ... but not a power loss.
	m.powerLoss()
	if got := mustRead(t, m.path("a")); string(got) != "synced. more" {
		t.Fatalf("after the second power loss: %q", got)
	}
	if got := mustRead(t, m.path("b")); len(got) != 0 {
		t.Fatalf("b after the power loss: %q", got)
	}
}

func TestOSyncWritesAreDurable(t *testing.T) {
	m := mount(t)
	f, err := os.OpenFile(m.path("a"), os.O_CREATE|os.O_WRONLY|os.O_SYNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("o_sync"))
	f.Close()
	m.powerLoss()
	if got := mustRead(t, m.path("a")); string(got) != "o_sync" {
		t.Fatalf("after the power loss: %q", got)
	}
}

func TestReadYourWrites(t *testing.T) {
	m := mount(t)
	rng := rand.New(rand.NewSource(1))
	want := make([]byte, 5*PageSize+123) // zeros where nothing is written
	rng.Read(want[:PageSize+7])
	// The durable part first.
	if err := os.WriteFile(m.path("f"), want[:PageSize+7], 0o644); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(m.path("f"), os.O_RDWR, 0)
	defer func() { f.Close() }()
	f.Sync()
	// Unsynced writes: unaligned, overlapping, extending, leaving a hole.
	for i := 0; i < 200; i++ {
		off := rng.Intn(len(want) - 1)
		n := 1 + rng.Intn(min(3*PageSize, len(want)-off))
		b := make([]byte, n)
		rng.Read(b)
		copy(want[off:], b)
		if _, err := f.WriteAt(b, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	hole := int64(len(want) + 3*PageSize)
	f.WriteAt([]byte("end"), hole)
	want = append(want, make([]byte, 3*PageSize)...)
	want = append(want, "end"...)
	check := func(when string) {
		t.Helper()
		st, err := os.Stat(m.path("f"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != int64(len(want)) {
			t.Fatalf("%s: size %d, want %d", when, st.Size(), len(want))
		}
		got := mustRead(t, m.path("f"))
		if !bytes.Equal(got, want) {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Fatalf("%s: contents differ (len %d vs %d) from offset %d", when, len(got), len(want), i)
		}
		// Unaligned reads too.
		for i := 0; i < 50; i++ {
			off := rng.Intn(len(want))
			n := rng.Intn(2 * PageSize)
			buf := make([]byte, n)
			k, _ := f.ReadAt(buf, int64(off))
			if exp := min(n, len(want)-off); k != exp || !bytes.Equal(buf[:k], want[off:off+k]) {
				t.Fatalf("%s: ReadAt(%d, %d) = %d bytes, want %d", when, off, n, k, exp)
			}
		}
	}
	check("unsynced")
	// Truncate inside an unsynced page, then extend again: the tail reads
	// as zeros.
	cut := int64(2*PageSize + 100)
	if err := f.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(cut + PageSize); err != nil {
		t.Fatal(err)
	}
	want = append(want[:cut], make([]byte, PageSize)...)
	check("truncated")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := mustRead(t, filepath.Join(m.backing, "f")); !bytes.Equal(got, want) {
		t.Fatalf("the backing file after fsync differs")
	}
	f, _ = os.OpenFile(m.path("f"), os.O_RDWR, 0)
	check("synced")
}

func TestRenameAndUnlink(t *testing.T) {
	m := mount(t)
	// The write-to-temp, fsync, rename pattern keeps the new contents.
	os.WriteFile(m.path("cur"), []byte("old"), 0o644)
	f, _ := os.OpenFile(m.path("cur"), os.O_RDWR, 0)
	f.Sync()
	f.Close()
	f, _ = os.Create(m.path("cur.tmp"))
	f.Write([]byte("new"))
	f.Sync()
	f.Close()
	if err := os.Rename(m.path("cur.tmp"), m.path("cur")); err != nil {
		t.Fatal(err)
	}
	// Without the fsync the renamed file is empty after a power loss.
	os.WriteFile(m.path("lazy.tmp"), []byte("lazy"), 0o644)
	os.Rename(m.path("lazy.tmp"), m.path("lazy"))
	if got := mustRead(t, m.path("lazy")); string(got) != "lazy" {
		t.Fatalf("renamed unsynced file reads %q", got)
	}
	// An unlinked file's unsynced data does not leak into a new file.
	os.WriteFile(m.path("gone"), bytes.Repeat([]byte("x"), 3*PageSize), 0o644)
	os.Remove(m.path("gone"))
	os.WriteFile(m.path("fresh"), []byte("y"), 0o644)
	if got := mustRead(t, m.path("fresh")); string(got) != "y" {
		t.Fatalf("fresh = %q", got)
	}
	m.powerLoss()
	if got := mustRead(t, m.path("cur")); string(got) != "new" {
		t.Fatalf("cur = %q, want new", got)
	}
	if got := mustRead(t, m.path("lazy")); len(got) != 0 {
		t.Fatalf("lazy = %q, want empty", got)
	}
}

// A Go process must never fault on an mmap of a FUSE file it serves itself:
// a thread stuck in a page fault is not at a safe point, a garbage
// collection then waits for it forever, and the server goroutines that
// would answer the fault never run. So everything below that maps a file
// on the mount (bbolt does) runs in a child process (see TestChild), as the
// broker runs in its own process under the fault harness.

func TestMmapSeesUnsyncedWrites(t *testing.T) {
	m := mount(t)
	if out := child(t, "mmap", m.path("m")); out != "ok" {
		t.Fatal(out)
	}
	if m.fs.Unsynced() == 0 {
		t.Fatal("the child's writes were synced: the test means nothing")
	}
}

func childMmap(path string) string {
	f, err := os.Create(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	size := 4 * PageSize
	want := bytes.Repeat([]byte("abcdefgh"), size/8)
	f.Write(want)
	// Map more than the file, as bbolt does.
	data, err := syscall.Mmap(int(f.Fd()), 0, 16*PageSize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return err.Error()
	}
	defer syscall.Munmap(data)
	if !bytes.Equal(data[:size], want) {
		return "the mapping does not show the unsynced writes"
	}
	// Writes after the mapping exists show through it too, also where
	// the file grows.
	f.WriteAt([]byte("MMAP"), int64(PageSize+5))
	f.WriteAt(bytes.Repeat([]byte("z"), PageSize), int64(size))
	copy(want[PageSize+5:], "MMAP")
	want = append(want, bytes.Repeat([]byte("z"), PageSize)...)
	if !bytes.Equal(data[:len(want)], want) {
		return fmt.Sprintf("the mapping does not show writes made after it: %q", data[PageSize:PageSize+16])
	}
	return "ok"
}

// TestBoltPowerLoss runs bbolt in a child process (as a broker would run):
// some commits fsynced, the rest NoSync; the child is SIGKILLed. A process
// crash keeps every commit; a power loss keeps exactly the synced ones and
// leaves a file bbolt opens and checks clean. The store's session record
// (store.Options.DeferSync) flags the file untrusted after the "reboot".
func TestBoltPowerLoss(t *testing.T) {
	for _, powerLoss := range []bool{false, true} {
		t.Run(fmt.Sprintf("powerloss=%v", powerLoss), func(t *testing.T) {
			m := mount(t)
			const synced, unsynced = 20, 30
			runWriter(t, m.dir, "boot-a", synced, unsynced)
			if m.fs.Unsynced() == 0 {
				t.Fatal("the NoSync commits left no unsynced pages: the test means nothing")
			}
			bootID := "boot-a"
			want := synced + unsynced
			if powerLoss {
				loss := m.powerLoss()
				t.Logf("power loss: %v", loss)
				if loss.PerFile["state.db"] == 0 || loss.PerFile["store.db"] == 0 {
					t.Fatalf("nothing of state.db or store.db was dropped: %v", loss)
				}
				bootID, want = "boot-b", synced
			}
			wantOut := fmt.Sprintf("bolt: %d commits, check ok; store: trusted=%v, %d commits", want, !powerLoss, want)
			if powerLoss {
				// An untrusted store file is not read (the broker sets it
				// aside and rebuilds it).
				wantOut = fmt.Sprintf("bolt: %d commits, check ok; store: trusted=false", want)
			}
			if out := child(t, "verify", m.dir, bootID); out != wantOut {
				t.Fatalf("after powerloss=%v:\n got %s\nwant %s", powerLoss, out, wantOut)
			}
		})
	}
}

// TestBoltTornPowerLoss is a power loss where the disk wrote back a random
// half of the unsynced pages first: the bbolt file may be torn (a meta page
// that points at pages that never arrived). Nothing can promise that it
// opens; the store's session record must flag it untrusted, so that the
// broker sets it aside instead of reading it. What bbolt and store.Open do
// with such a file is logged (each runs in a child, since bbolt may panic
// in a goroutine of its own).
func TestBoltTornPowerLoss(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		m := mount(t)
		runWriter(t, m.dir, "boot-a", 5, 60)
		loss, err := m.fs.PowerLossTorn(rand.New(rand.NewSource(seed)), 0.5)
		m.fs = nil
		if err != nil {
			t.Fatal(err)
		}
		m.remount()
		if loss.Kept == 0 || loss.Pages == 0 {
			t.Fatalf("seed %d: a torn loss kept %d and dropped %d pages", seed, loss.Kept, loss.Pages)
		}
		sess, err := os.ReadFile(m.path("store.db.session"))
		if err != nil || !bytes.Contains(sess, []byte(`"bootId":"boot-a","clean":false`)) {
			t.Fatalf("seed %d: the store's session record after the power loss: %s (%v)", seed, sess, err)
		}
		t.Logf("seed %d: %v;\n\traw bbolt file: %s\n\tstore.Open after the reboot: %s", seed, loss,
			child(t, "probe-bolt", m.path("state.db")), child(t, "probe-store", m.dir, "boot-b"))
	}
}

// child runs TestChild in a child process and returns its answer (or how
// it died).
func child(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestChild$")
	cmd.Env = append(os.Environ(), "LOSSYFS_CHILD="+strings.Join(args, "|"))
	out, _ := cmd.CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if a, ok := strings.CutPrefix(l, "child: "); ok {
			return a
		}
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") || strings.HasPrefix(l, "unexpected fault") {
			return "crashed: " + l
		}
	}
	return "no answer: " + string(out)
}

// TestChild is the child process of the tests above.
func TestChild(t *testing.T) {
	spec := os.Getenv("LOSSYFS_CHILD")
	if spec == "" {
		t.Skip("the child process of the other tests")
	}
	args := strings.Split(spec, "|")
	var out string
	switch args[0] {
	case "mmap":
		out = childMmap(args[1])
	case "write":
		synced, _ := strconv.Atoi(args[3])
		unsynced, _ := strconv.Atoi(args[4])
		out = childWrite(args[1], args[2], synced, unsynced)
	case "verify":
		out = childVerify(args[1], args[2])
	case "probe-bolt":
		out = probeBolt(args[1])
	case "probe-store":
		out = probeStore(args[1], args[2])
	}
	fmt.Println("child: " + out)
	if args[0] == "write" {
		os.Stdout.Sync()
		time.Sleep(time.Minute) // SIGKILLed before this ends
	}
}

// runWriter runs childWrite in a child process and SIGKILLs it once it has
// written.
func runWriter(t *testing.T, dir, bootID string, synced, unsynced int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$")
	cmd.Env = append(os.Environ(), "LOSSYFS_CHILD="+strings.Join([]string{"write", dir, bootID, strconv.Itoa(synced), strconv.Itoa(unsynced)}, "|"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	n, _ := out.Read(buf)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if !strings.Contains(string(buf[:n]), "child: ready") {
		t.Fatalf("writer: %q", buf[:n])
	}
}

// childWrite writes synced+unsynced commits, each of a key 0, 1, ... and a
// value of 3000 bytes (so that commits span pages), to a raw bbolt file
// (dir/state.db, NoSync, bbolt's Sync after the first synced commits) and
// to a store file as the broker keeps its state (dir/store.db, DeferSync,
// Sync likewise), then waits to be killed.
func childWrite(dir, bootID string, synced, unsynced int) string {
	// NoGrowSync: bbolt otherwise fsyncs the file whenever it grows it,
	// which would make some of the NoSync commits durable after all.
	db, err := bolt.Open(filepath.Join(dir, "state.db"), 0o600, &bolt.Options{NoSync: true, NoGrowSync: true, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return err.Error()
	}
	sdb, err := store.Open(filepath.Join(dir, "store.db"), []store.Bucket{[]byte("b")}, store.Options{DeferSync: true, BootID: bootID})
	if err != nil {
		return err.Error()
	}
	val := bytes.Repeat([]byte("v"), 3000)
	for i := 0; i < synced+unsynced; i++ {
		k := make([]byte, 8)
		binary.BigEndian.PutUint64(k, uint64(i))
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put(k, val)
		})
		if err != nil {
			return err.Error()
		}
		if err := sdb.Update(func(b *store.Batch) error { return b.Put([]byte("b"), k, val) }); err != nil {
			return err.Error()
		}
		if i == synced-1 {
			if err := db.Sync(); err != nil {
				return err.Error()
			}
			if err := sdb.Sync(); err != nil {
				return err.Error()
			}
		}
	}
	return "ready"
}

// childVerify counts the commits in dir/state.db (checking the file) and
// opens dir/store.db as the broker would after a boot with bootID.
func childVerify(dir, bootID string) string {
	db, err := bolt.Open(filepath.Join(dir, "state.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return "bbolt does not open the file: " + err.Error()
	}
	n, err := countCommits(db)
	db.Close()
	if err != nil {
		return err.Error()
	}
	out := fmt.Sprintf("bolt: %d commits, check ok", n)
	sdb, err := store.Open(filepath.Join(dir, "store.db"), []store.Bucket{[]byte("b")}, store.Options{DeferSync: true, BootID: bootID})
	if err != nil {
		return out + "; store.Open: " + err.Error()
	}
	defer sdb.Close()
	out += fmt.Sprintf("; store: trusted=%v", (sdb.SetAside() == ""))
	if !(sdb.SetAside() == "") {
		return out
	}
	got := 0
	sdb.View(func(r store.Reader) error {
		c := r.Cursor([]byte("b"))
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			got++
		}
		return nil
	})
	return out + fmt.Sprintf(", %d commits", got)
}

// countCommits checks db and counts its keys, which must be 0, 1, ...
func countCommits(db *bolt.DB) (int, error) {
	got := 0
	err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return fmt.Errorf("check: %w", err)
		}
		b := tx.Bucket([]byte("b"))
		if b == nil {
			return fmt.Errorf("bucket missing")
		}
		c := b.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if binary.BigEndian.Uint64(k) != uint64(got) {
				return fmt.Errorf("key %d where %d was expected", binary.BigEndian.Uint64(k), got)
			}
			got++
		}
		return nil
	})
	return got, err
}

func probeBolt(path string) string {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return "does not open: " + err.Error()
	}
	defer db.Close()
	n, err := countCommits(db)
	if err != nil {
		return "opens, but " + err.Error()
	}
	return fmt.Sprintf("opens and checks clean, %d commits", n)
}

func probeStore(dir, bootID string) string {
	sdb, err := store.Open(filepath.Join(dir, "store.db"), []store.Bucket{[]byte("b")}, store.Options{DeferSync: true, BootID: bootID})
	if err != nil {
		return "fails: " + err.Error()
	}
	defer sdb.Close()
	return fmt.Sprintf("opens, trusted=%v", (sdb.SetAside() == ""))
}
