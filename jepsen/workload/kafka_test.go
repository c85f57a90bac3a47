package workload

import (
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func kIn(n int, off int64) *kgo.Record {
	v := []byte(strconv.Itoa(n))
	return &kgo.Record{Partition: int32(n) % 3, Offset: off, Key: v, Value: v}
}

func kOut(n int, tag string, size int) *kgo.Record {
	v := []byte(strconv.Itoa(n))
	return &kgo.Record{Key: v, Value: v, Headers: []kgo.RecordHeader{{Key: "txn", Value: []byte(tag)}, {Key: "size", Value: []byte(strconv.Itoa(size))}}}
}

// kafkaHistory: inputs 0..5 acknowledged, all in the input once and in
// the output once, in two whole transactions.
func kafkaHistory() *kafkaWL {
	k := newKafka()
	k.inputRecs = map[int32][]*kgo.Record{}
	for n := 0; n < 6; n++ {
		k.acked[n] = true
		p := int32(n) % 3
		k.ackOrder[p] = append(k.ackOrder[p], n)
		k.inputRecs[p] = append(k.inputRecs[p], kIn(n, int64(1+n/3)))
	}
	k.outputRecs = map[int32][]*kgo.Record{
		0: {kOut(0, "t1", 3), kOut(3, "t2", 3)},
		1: {kOut(1, "t1", 3), kOut(4, "t2", 3)},
		2: {kOut(2, "t1", 3), kOut(5, "t2", 3)},
	}
	return k
}

func checkKafka(t *testing.T, k *kafkaWL) Result {
	t.Helper()
	return k.Check(&Env{Logf: t.Logf})
}

// The kafka checker passes a clean history and names each kind of breach.
func TestCheckKafka(t *testing.T) {
	if r := checkKafka(t, kafkaHistory()); !r.OK() {
		t.Fatalf("clean history: %+v", r)
	}
	cases := []struct {
		name   string
		break_ func(k *kafkaWL)
		want   string
		lost   int
		dups   int
	}{
		{"acked input lost", func(k *kafkaWL) { k.inputRecs[2] = k.inputRecs[2][:1]; k.outputRecs[2] = k.outputRecs[2][:1] }, "not in the input topic", 1, 0},
		{"input written twice", func(k *kafkaWL) { k.inputRecs[0] = append(k.inputRecs[0], kIn(0, 3)) }, "written 2 times", 0, 1},
		{"input out of ack order", func(k *kafkaWL) { r := k.inputRecs[1]; r[0], r[1] = r[1], r[0] }, "out of the order", 0, 0},
		{"input never transformed", func(k *kafkaWL) {
			k.outputRecs[0] = k.outputRecs[0][:1]
			k.outputRecs[1] = k.outputRecs[1][:1]
			k.outputRecs[2] = k.outputRecs[2][:1]
		}, "never reached the output", 3, 0},
		{"replayed transaction", func(k *kafkaWL) { k.outputRecs[0] = append(k.outputRecs[0], kOut(0, "t3", 1)) }, "in the output 2 times", 0, 1},
		{"half-visible transaction", func(k *kafkaWL) {
			k.outputRecs[2] = k.outputRecs[2][:1]
			k.outputRecs[0] = append(k.outputRecs[0], kOut(5, "t4", 1))
		}, "half visible: 2 of its 3", 0, 0},
		{"crashed transaction visible", func(k *kafkaWL) { k.crashed["t2"] = true }, "closed before its EndTxn", 0, 0},
		{"group commit lost", func(k *kafkaWL) {
			k.commitLost = append(k.commitLost, "committer group resumed partition 0 at offset 1 below 2")
		}, "below", 0, 0},
		{"topics never read", func(k *kafkaWL) { k.inputRecs = nil }, "never read back", 0, 0},
	}
	for _, c := range cases {
		k := kafkaHistory()
		c.break_(k)
		r := checkKafka(t, k)
		if r.OK() || r.Lost != c.lost || r.Duplicated != c.dups || !strings.Contains(strings.Join(r.Violations, "\n"), c.want) {
			t.Errorf("%s: want %q lost=%d dups=%d, got %+v", c.name, c.want, c.lost, c.dups, r)
		}
	}
}
